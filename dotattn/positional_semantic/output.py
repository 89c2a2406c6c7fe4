"""Phase-diagram folders: writing, reading back (verified) and redrawing.

Every file is written atomically with provenance (:mod:`dotattn.core.io`) from typed records
(:class:`~dotattn.positional_semantic.records.BranchPoint`, :class:`~dotattn.positional_semantic.phase_diagram.ColumnSummary`)
and read back through their ``from_row`` after the folder is verified (:mod:`dotattn.core.integrity`,
kind ``phase-diagram`` registered by :mod:`dotattn.positional_semantic.integrity`). Figures come from
:mod:`dotattn.positional_semantic.plotting`; nothing here touches pyplot or the backend.

Outputs of ``dotattn phase-diagram``: ``phase_diagram.csv`` (one BranchPoint per row,
:data:`~dotattn.positional_semantic.phase_diagram.ROW_COLUMNS`), ``boundaries.csv`` (one PhaseBoundary per row),
``summary.json`` (one ColumnSummary per ω, boundaries included, plus provenance), figures, manifest.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from dotattn.core.integrity import read_record, read_verified_json, verify_folder
from dotattn.core.io import IntegrityError, provenance, read_csv, save_figure, write_csv, write_json, write_manifest
from dotattn.positional_semantic import integrity as _integrity  # noqa: F401  (registers the phase-diagram kind)
from dotattn.positional_semantic.phase_diagram import (BOUNDARY_ROW_COLUMNS, ROW_COLUMNS, ColumnSummary, PhaseDiagram,
                                                       check_figure_omega)
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.records import BranchPoint, PhaseBoundary

__all__ = ["write_phase_diagram", "replot_phase_diagram", "read_phase_diagram", "read_phase_summaries",
           "read_boundaries", "shape_title"]


# ----------------------------------------------------------------------------------------------
# phase diagram
# ----------------------------------------------------------------------------------------------
def write_phase_diagram(pd: PhaseDiagram, out_dir: str | os.PathLike,
                        figure_omega: float | None = None, command: str | None = None) -> dict[str, str]:
    """CSV of records, CSV of phase boundaries, summary.json with provenance, and figures (a), (b),
    (c) and the phases figure; all written atomically (``command``: recorded in the manifest)."""
    out = Path(out_dir)
    params = {"problem": pd.problem.to_dict(), "omegas": list(pd.omegas), "alphas": list(pd.alphas),
              **pd.settings.to_dict()}
    prov = provenance(params, seconds=pd.seconds)
    summary = {"omegas": [s.to_row() for s in pd.summaries],
               "quadrature": pd.settings.quadrature.to_dict(), **prov,
               "wall_seconds": round(pd.seconds, 3), "columns_from_cache": pd.from_cache,
               "column_compute_seconds_total": round(sum(s.seconds for s in pd.summaries), 1)}
    paths = {"csv": str(out / "phase_diagram.csv"), "boundaries": str(out / "boundaries.csv"),
             "summary": str(out / "summary.json")}
    comment = (f"dotattn {prov['dotattn_version']} commit {prov['git_commit']} {prov['created_utc']}; "
               f"parameters in summary.json")
    write_csv(paths["csv"], [p.to_row() for p in pd.rows], ROW_COLUMNS, comment=comment)
    write_csv(paths["boundaries"], [b.to_row() for s in pd.summaries for b in s.boundaries], BOUNDARY_ROW_COLUMNS,
              comment=comment)
    write_json(paths["summary"], summary)
    meta = {"dotattn_version": prov["dotattn_version"], "git_commit": prov["git_commit"],
            "created_utc": prov["created_utc"]}
    paths.update(_phase_diagram_figures(pd.rows, pd.summaries, pd.problem, out, meta, figure_omega))
    write_manifest(out, paths.values(), params, provenance_record=prov, command=command)
    return paths


def _phase_diagram_figures(rows: Any, summaries: Any, problem: Problem, out: Path, meta: Mapping[str, Any],
                           figure_omega: float | None = None) -> dict[str, str]:
    """Figures (a) test error and (b) overlaps at ``figure_omega`` (default 0.3 if on the grid, else
    the middle ω), and with several ω the phase plane and the phases figure; written into ``out``."""
    from dotattn.positional_semantic import plotting

    omegas = sorted({s.omega for s in summaries})
    if figure_omega is None:
        figure_omega = 0.3 if any(abs(w - 0.3) < 1e-9 for w in omegas) else omegas[len(omegas) // 2]
    check_figure_omega(figure_omega, omegas)
    s_fig = min(summaries, key=lambda s: abs(s.omega - figure_omega))
    figs = {"test_error": plotting.figure_test_error(rows, s_fig),
            "overlaps": plotting.figure_overlaps(rows, s_fig, problem.sigma)}
    if len(omegas) > 1:
        figs["phase_plane"] = plotting.figure_phase_plane(rows, summaries)
        figs["phases"] = plotting.figure_phases(rows, summaries, title=shape_title(problem, omega=False))
    paths = {}
    for name, fig in figs.items():
        paths[name] = str(out / f"{name}.png")
        save_figure(fig, paths[name], meta)
    return paths


def replot_phase_diagram(folder: str | os.PathLike, figure_omega: float | None = None) -> dict[str, str]:
    """Redraw the figures of a phase-diagram folder from its verified rows and summaries, without
    solving anything, and rewrite its manifest (the data files' provenance unchanged; ``note`` says
    which commit redrew the figures). IntegrityError if the folder fails verification."""
    folder = Path(folder)
    verify_folder(folder, kind="phase-diagram")
    manifest = json.loads((folder / "manifest.json").read_text())
    summary = json.loads((folder / "summary.json").read_text())
    rows = read_phase_diagram(folder)
    try:
        summaries = [ColumnSummary.from_row(r) for r in summary["omegas"]]
        problem = Problem.from_dict(summary["parameters"]["problem"])
    except (KeyError, TypeError, ValueError) as err:
        raise IntegrityError(f"{folder / 'summary.json'}: its column summaries cannot be read "
                             f"({type(err).__name__}: {err})") from None
    now = provenance({})
    meta = {"dotattn_version": now["dotattn_version"], "git_commit": now["git_commit"],
            "created_utc": now["created_utc"], "data_git_commit": manifest.get("git_commit"), "replotted": True}
    paths = _phase_diagram_figures(rows, summaries, problem, folder, meta, figure_omega)
    note = "; ".join(n for n in (manifest.get("note"),
                                 f"figures redrawn from the verified rows by replot_phase_diagram at commit "
                                 f"{now['git_commit']} ({now['created_utc']})") if n)
    write_manifest(folder, manifest["files"], manifest["made_for"], command=manifest.get("command"),
                   provenance_record=manifest, note=note)
    return paths


def read_phase_diagram(folder: str | os.PathLike, omega: float | None = None) -> list[BranchPoint]:
    """The records of ``phase_diagram.csv`` in a phase-diagram folder (at ``omega`` only if given),
    after the folder is verified (:func:`dotattn.core.integrity.verify_folder`; IntegrityError otherwise)."""
    verify_folder(folder, kind="phase-diagram")
    points = [BranchPoint.from_row(r) for r in read_csv(Path(folder) / "phase_diagram.csv")]
    return points if omega is None else [p for p in points if abs(p.omega - omega) < 1e-9]


def read_phase_summaries(folder: str | os.PathLike) -> list[ColumnSummary]:
    """The column summaries (α_c, α_lin and their errors per ω) of a verified phase-diagram folder."""
    folder = Path(folder)
    verify_folder(folder, kind="phase-diagram")
    rows = read_verified_json(folder / "summary.json").get("omegas")
    if not isinstance(rows, list):
        raise IntegrityError(f"{folder / 'summary.json'}: no 'omegas' list")
    return [read_record(folder / "summary.json", i, ColumnSummary, r) for i, r in enumerate(rows, start=1)]


def read_boundaries(folder: str | os.PathLike) -> list[PhaseBoundary]:
    """The phase boundaries of ``boundaries.csv`` in a verified phase-diagram folder."""
    verify_folder(folder, kind="phase-diagram")
    path = Path(folder) / "boundaries.csv"
    return [read_record(path, i, PhaseBoundary, r) for i, r in enumerate(read_csv(path), start=1)]


def shape_title(problem: Problem, omega: bool = True) -> str:
    return (f"L = {problem.L}, r = {problem.rank}, r_t = {problem.teacher_rank}"
            + (f", ω = {problem.omega:g}" if omega else ""))
