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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotattn.core.integrity import read_record, read_verified_json, verify_folder
from dotattn.core.io import IntegrityError, provenance, read_csv, save_figure, write_csv, write_json, write_manifest
from dotattn.positional_semantic import integrity as _integrity  # noqa: F401  (registers the phase-diagram kind)
from dotattn.positional_semantic.phase_diagram import (
    BOUNDARY_ROW_COLUMNS,
    ROW_COLUMNS,
    ColumnSummary,
    PhaseDiagram,
    check_figure_omega,
)
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.records import BranchPoint, PhaseBoundary

__all__ = [
    "write_phase_diagram",
    "replot_phase_diagram",
    "read_phase_diagram",
    "read_phase_summaries",
    "read_boundaries",
    "shape_title",
    "disagreements",
    "RECORD_RTOL",
    "REFINED_ROOT_TOL",
]

RECORD_RTOL = 1e-5
"""Relative tolerance (with an absolute floor of 1e-9 on e_t, ε_g and of 1e-7 on the overlaps) of a grid
record against a stored one: each fixed point is converged to a relative change of 1e-8 (tol), and two
solves of it from different starts (another warm start, another damping) agree to a few times that; 1e-5
leaves a factor 100 for the conditioning of the map, and is far below any change of the physics
(nearby fixed points on one branch differ by ≥ 3e-7 in e_t and ≥ 1e-2 in m, which it does not hide)."""
REFINED_ROOT_TOL = 1e-4
"""Absolute tolerance of one refinement rule's root against the stored one for the same rule (same seed):
the fixed points are converged to 1e-8, which moves the e_t gap by ≲ 1e-9 and the root by ≲ 1e-5 at the
gap's slope of ≥ 4e-4 per unit α; 1e-4 is at most a tenth of every stored standard error (≥ 6e-4)."""


# ----------------------------------------------------------------------------------------------
# phase diagram
# ----------------------------------------------------------------------------------------------
def write_phase_diagram(
    pd: PhaseDiagram, out_dir: str | os.PathLike, figure_omega: float | None = None, command: str | None = None
) -> dict[str, str]:
    """CSV of records, CSV of phase boundaries, summary.json with provenance, and figures (a), (b),
    (c) and the phases figure; all written atomically (``command``: recorded in the manifest)."""
    out = Path(out_dir)
    params = {
        "problem": pd.problem.to_dict(),
        "omegas": list(pd.omegas),
        "alphas": list(pd.alphas),
        **pd.settings.to_dict(),
    }
    prov = provenance(params, seconds=pd.seconds)
    summary = {
        "omegas": [s.to_row() for s in pd.summaries],
        "quadrature": pd.settings.quadrature.to_dict(),
        **prov,
        "wall_seconds": round(pd.seconds, 3),
        "columns_from_cache": pd.from_cache,
        "column_compute_seconds_total": round(sum(s.seconds for s in pd.summaries), 1),
    }
    paths = {
        "csv": str(out / "phase_diagram.csv"),
        "boundaries": str(out / "boundaries.csv"),
        "summary": str(out / "summary.json"),
    }
    comment = (
        f"dotattn {prov['dotattn_version']} commit {prov['git_commit']} {prov['created_utc']}; "
        f"parameters in summary.json"
    )
    write_csv(paths["csv"], [p.to_row() for p in pd.rows], ROW_COLUMNS, comment=comment)
    write_csv(
        paths["boundaries"],
        [b.to_row() for s in pd.summaries for b in s.boundaries],
        BOUNDARY_ROW_COLUMNS,
        comment=comment,
    )
    write_json(paths["summary"], summary)
    meta = {
        "dotattn_version": prov["dotattn_version"],
        "git_commit": prov["git_commit"],
        "created_utc": prov["created_utc"],
    }
    paths.update(_phase_diagram_figures(pd.rows, pd.summaries, pd.problem, out, meta, figure_omega))
    write_manifest(out, paths.values(), params, provenance_record=prov, command=command)
    return paths


def _phase_diagram_figures(
    rows: Any, summaries: Any, problem: Problem, out: Path, meta: Mapping[str, Any], figure_omega: float | None = None
) -> dict[str, str]:
    """Figures (a) test error and (b) overlaps at ``figure_omega`` (default 0.3 if on the grid, else
    the middle ω), and with several ω the phase plane and the phases figure; written into ``out``."""
    from dotattn.positional_semantic import plotting

    omegas = sorted({s.omega for s in summaries})
    if figure_omega is None:
        figure_omega = 0.3 if any(abs(w - 0.3) < 1e-9 for w in omegas) else omegas[len(omegas) // 2]
    check_figure_omega(figure_omega, omegas)
    s_fig = min(summaries, key=lambda s: abs(s.omega - figure_omega))
    figs = {
        "test_error": plotting.figure_test_error(rows, s_fig),
        "overlaps": plotting.figure_overlaps(rows, s_fig, problem.sigma),
    }
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
        raise IntegrityError(
            f"{folder / 'summary.json'}: its column summaries cannot be read ({type(err).__name__}: {err})"
        ) from None
    now = provenance({})
    meta = {
        "dotattn_version": now["dotattn_version"],
        "git_commit": now["git_commit"],
        "created_utc": now["created_utc"],
        "data_git_commit": manifest.get("git_commit"),
        "replotted": True,
    }
    paths = _phase_diagram_figures(rows, summaries, problem, folder, meta, figure_omega)
    note = "; ".join(
        n
        for n in (
            manifest.get("note"),
            f"figures redrawn from the verified rows by replot_phase_diagram at commit "
            f"{now['git_commit']} ({now['created_utc']})",
        )
        if n
    )
    write_manifest(
        folder,
        manifest["files"],
        manifest["made_for"],
        command=manifest.get("command"),
        provenance_record=manifest,
        note=note,
    )
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
    return f"L = {problem.L}, r = {problem.rank}, r_t = {problem.teacher_rank}" + (
        f", ω = {problem.omega:g}" if omega else ""
    )


def disagreements(summaries: list[ColumnSummary], rows: list[BranchPoint], folder: str | os.PathLike) -> list[str]:
    """Every way a computed phase diagram (its column summaries and grid records, any subset of the
    ω and α of a stored one) departs from the stored phase-diagram ``folder`` (verified first), one line
    each; empty if it agrees. Checked: α_c and α_lin (refined) within the stored standard error, each
    refinement rule's root within :data:`REFINED_ROOT_TOL` of the stored root of the same rule (a
    computation with fewer rules is compared rule by rule), the sweep rule's roots and spinodals within the
    stored critical and spinodal tolerances, and every grid record: the same status, selection and RS
    verdicts, overlaps, e_t, ε_g and replicon within :data:`RECORD_RTOL`, the jump weight within one node
    of its rule."""
    import numpy as np

    stored = {round(s.omega, 9): s for s in read_phase_summaries(folder)}
    records = {(round(p.omega, 9), round(p.alpha, 9), p.branch): p for p in read_phase_diagram(folder)}
    out: list[str] = []

    def close(a: Any, b: Any, rtol: float, atol: float) -> bool:
        if a is None or b is None:
            return a is None and b is None
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        return a.shape == b.shape and bool(
            np.all((np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= atol + rtol * np.abs(b)))
        )

    for s in summaries:
        w = round(s.omega, 9)
        if w not in stored:
            out.append(f"omega = {s.omega:g}: not in {folder}")
            continue
        ref = stored[w]
        for name in ("alpha_c", "alpha_lin"):
            got, want = getattr(s, name), getattr(ref, name)
            new_roots = (s.refined.get(name) or {}).get("roots")
            old_roots = (ref.refined.get(name) or {}).get("roots")
            if new_roots is not None and old_roots is not None and len(new_roots) < len(old_roots):
                pairs = list(zip(new_roots, old_roots, strict=False))  # fewer rules: rule by rule only
            else:
                pairs = list(zip(new_roots or [], old_roots or [], strict=False))
                err = getattr(ref, f"{name}_error")
                if (got is None) != (want is None) or (got is not None and not abs(got - want) <= (err or 0.0)):
                    out.append(f"omega = {s.omega:g}: {name} {got} against {want} +- {err}")
            for i, (a, b) in enumerate(pairs):
                if (a is None) != (b is None) or (a is not None and abs(a - b) > REFINED_ROOT_TOL):
                    out.append(f"omega = {s.omega:g}: {name} on refinement rule {i}: {a} against {b}")
        tols = {"alpha_c_sweep": 1e-4, "alpha_lin_sweep": 1e-4, "spinodal_semantic": 1e-3, "spinodal_positional": 1e-3}
        for name, tol in tols.items():
            if not close(getattr(s, name), getattr(ref, name), 0.0, tol):
                out.append(f"omega = {s.omega:g}: {name} {getattr(s, name)} against {getattr(ref, name)}")
    for p in rows:
        key = (round(p.omega, 9), round(p.alpha, 9), p.branch)
        where = f"omega = {p.omega:g}, alpha = {p.alpha:g}, {p.branch}"
        if key not in records:
            out.append(f"{where}: not in {folder}")
            continue
        r = records[key]
        if (p.status, p.selected) != (r.status, r.selected):
            out.append(f"{where}: status {p.status}, selected {p.selected} against {r.status}, {r.selected}")
            continue
        bad = [
            n
            for n, rtol, atol in (
                ("q", RECORD_RTOL, 1e-7),
                ("V", RECORD_RTOL, 1e-7),
                ("theta", RECORD_RTOL, 1e-7),
                ("mu", RECORD_RTOL, 1e-7),
                ("train_loss", RECORD_RTOL, 1e-9),
                ("test_error", RECORD_RTOL, 1e-9),
            )
            if not close(getattr(p, n), getattr(r, n), rtol, atol)
        ]
        a, b = p.stability, r.stability
        if (a is None) != (b is None):
            bad.append("stability")
        elif a is not None and b is not None:  # both present (the line above)
            if (a.status, a.at_stable, a.rs_stable) != (b.status, b.at_stable, b.rs_stable):
                bad.append("RS verdicts")
            if not close(a.replicon, b.replicon, RECORD_RTOL, 1e-9):
                bad.append("replicon")
            if not close(a.jump_weight, b.jump_weight, 0.0, 1.0 / 4096 + 1e-12):  # one node of the 2^10 x 4 rule
                bad.append("jump_weight")
        if bad:
            out.append(f"{where}: {', '.join(bad)} differ")
    return out
