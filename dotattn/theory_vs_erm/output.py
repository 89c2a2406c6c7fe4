"""Reading and writing the studies that put the positional–semantic theory beside ERM: ERM runs
(``dotattn train-erm``), the theory–ERM comparison (``dotattn compare``) and the α_c crossing study
(``dotattn erm-alpha-c``).

Every file is written atomically with provenance (:mod:`dotattn.core.io`) from typed records
(:class:`dotattn.erm.records.RunRecord`, :class:`~dotattn.theory_vs_erm.comparison.ComparisonRow`, …) and
read back into them through their ``from_row`` after the folder is verified (kinds registered by
:mod:`dotattn.erm.integrity` and :mod:`dotattn.theory_vs_erm.integrity`). Figures come from
:mod:`dotattn.theory_vs_erm.plotting`; nothing here touches pyplot or the backend.

Outputs:

* ERM (``dotattn train-erm``): ``runs.csv`` (one RunRecord per row), ``summary.csv`` (mean/std
  over seeds), ``summary.json`` (provenance, column docs, summary and runs);
* comparison (``dotattn compare``): ``comparison.csv`` / ``comparison.json`` (the table, the
  theory's BranchPoint rows, provenance), figures, ``finite_size.json``;
* α_c study (``dotattn erm-alpha-c``): ``crossings.csv``, ``cells.csv``, ``delta.csv``, ``summary.json``, figures.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dotattn.core.integrity import first_difference, read_verified_json, verify_folder
from dotattn.core.io import (
    ensure_writable_dir,
    provenance,
    read_csv,
    save_figure,
    write_csv,
    write_json,
    write_manifest,
)
from dotattn.core.validation import ParameterError
from dotattn.erm import integrity as _erm_integrity  # noqa: F401  (registers the erm and restarts kinds)
from dotattn.erm.records import COLUMN_DOCS, SUMMARY_COLUMNS, RunRecord, SummaryRecord, run_columns
from dotattn.positional_semantic.catalogue import default_quadrature
from dotattn.positional_semantic.output import read_phase_diagram, read_phase_summaries, shape_title
from dotattn.positional_semantic.phase_diagram import SweepSettings
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.records import BranchPoint
from dotattn.theory_vs_erm import integrity as _integrity  # noqa: F401  (registers the comparison and alpha-c kinds)
from dotattn.theory_vs_erm.alpha_c import DELTA_COLUMNS, SAME_MINIMUM_TOL, AlphaCStudy, mean_curves
from dotattn.theory_vs_erm.alpha_c_reader import alpha_c_rows
from dotattn.theory_vs_erm.comparison import (
    COMPARE_COLUMNS,
    COMPARED,
    DEFAULT_TOLERANCE,
    ComparisonRow,
    ErmRun,
    comparison_table,
    finite_size_points,
    linear_baseline_points,
    theory_curves,
    theory_points,
)
from dotattn.theory_vs_erm.crossing import CellSummary, SeedCrossing

if TYPE_CHECKING:  # pragma: no cover
    from dotattn.positional_semantic.phase_diagram import ColumnSummary
    from dotattn.theory_vs_erm.alpha_c import StudyPart, TheoryColumn
    from dotattn.theory_vs_erm.variant_records import VariantPoint

__all__ = [
    "read_alpha_c_part",
    "theory_from_phase_diagram",
    "write_erm",
    "load_erm",
    "read_theory",
    "compare_and_write",
    "write_alpha_c_study",
    "write_variants",
]


def theory_from_phase_diagram(
    folder: str | os.PathLike, problem: Problem, omegas: Sequence[float], alphas: Sequence[float]
) -> list[TheoryColumn]:
    """The theory columns of an α_c study read from a verified phase-diagram folder instead of being
    computed: per ω its α_c ± error (refined where the folder was) and Δe_t = e_t(sem) − e_t(pos) of
    its records at the study's α. ParameterError unless the folder was made for ``problem`` (ω
    aside) and holds every ω and α asked for."""
    from dotattn.theory_vs_erm.alpha_c import TheoryColumn

    folder = Path(folder)
    summaries = {round(s.omega, 9): s for s in read_phase_summaries(folder)}
    params = read_verified_json(folder / "summary.json").get("parameters") or {}
    have = {k: v for k, v in (params.get("problem") or {}).items() if k != "omega"}
    want = {k: v for k, v in problem.to_dict().items() if k != "omega"}
    diff = next((k for k in want if want[k] != have.get(k)), None)
    if diff is not None:
        raise ParameterError(
            f"phase diagram {folder} was made for another problem: {diff} = {have.get(diff)!r} there, "
            f"{want[diff]!r} here"
        )
    et = {
        (round(p.omega, 9), round(p.alpha, 9), p.branch): p.train_loss
        for p in read_phase_diagram(folder)
        if p.converged
    }
    out = []
    for w in omegas:
        s = summaries.get(round(w, 9))
        if s is None:
            raise ParameterError(f"phase diagram {folder} has no omega = {w:g}")
        missing = [
            a
            for a in alphas
            if (round(w, 9), round(a, 9), "semantic") not in et and (round(w, 9), round(a, 9), "positional") not in et
        ]
        if missing:
            raise ParameterError(f"phase diagram {folder} has no records at omega = {w:g}, alpha = {missing[0]:g}")
        delta = tuple(
            None
            if any((round(w, 9), round(a, 9), b) not in et for b in ("semantic", "positional"))
            else et[(round(w, 9), round(a, 9), "semantic")] - et[(round(w, 9), round(a, 9), "positional")]
            for a in alphas
        )
        out.append(
            TheoryColumn(
                omega=w,
                alpha_c=s.alpha_c,
                alphas=tuple(alphas),
                delta=delta,
                quadrature={"read_from": str(folder), **{k: params.get(k) for k in ("quadrature", "refine")}},
                seconds=0.0,
                alpha_c_error=s.alpha_c_error,
            )
        )
    return out


# ----------------------------------------------------------------------------------------------
# ERM
# ----------------------------------------------------------------------------------------------
def write_erm(folder: str | os.PathLike, result: Any, extra_parameters: dict[str, Any]) -> list[SummaryRecord]:
    """runs.csv, summary.csv and summary.json of an :class:`dotattn.erm.ErmResult` (``extra_parameters``
    join the provenance's parameters); returns the summary records."""
    folder = Path(folder)
    params: dict[str, Any] = {**result.parameters(), **extra_parameters}
    prov = provenance(params, seconds=result.seconds)
    comment = "dotattn train-erm; provenance: " + json.dumps(prov, separators=(",", ":"))
    runs = result.run_rows()
    write_csv(folder / "runs.csv", runs, run_columns(result.runs), comment=comment)
    records = result.summary_rows()
    summary = [r.to_row() for r in records]
    write_csv(folder / "summary.csv", summary, SUMMARY_COLUMNS, comment=comment)
    write_json(folder / "summary.json", {"provenance": prov, "columns": COLUMN_DOCS, "summary": summary, "runs": runs})
    write_manifest(folder, ("runs.csv", "summary.csv", "summary.json"), params, provenance_record=prov)
    return records


def load_erm(path: str | os.PathLike) -> ErmRun:
    """Read a ``dotattn train-erm`` folder (``summary.json`` for the problem, ``runs.csv`` for the runs)."""
    p = Path(path)
    if not (p / "runs.csv").is_file() or not (p / "summary.json").is_file():
        raise ParameterError(f"erm folder {str(p)!r} must hold summary.json and runs.csv from train-erm")
    verify_folder(p, kind="erm")
    meta = json.loads((p / "summary.json").read_text())
    params = meta["provenance"]["parameters"]
    return ErmRun(
        path=p,
        problem=Problem.from_dict(params["problem"]),
        d=int(params["erm"]["d"]),
        runs=tuple(RunRecord.from_row(r) for r in read_csv(p / "runs.csv")),
    )


# ----------------------------------------------------------------------------------------------
# comparison
# ----------------------------------------------------------------------------------------------
def _theory_metadata(folder: Path) -> tuple[str, dict[str, Any]]:
    """(kind, parameters) of a theory folder: "phase-diagram" (summary.json) or "comparison"
    (comparison.json); ParameterError (one line) when the file or its "parameters" is missing or unreadable."""
    if (folder / "phase_diagram.csv").is_file():
        kind, meta = "phase-diagram", folder / "summary.json"
    elif (folder / "comparison.json").is_file():
        kind, meta = "comparison", folder / "comparison.json"
    else:
        raise ParameterError(f"theory folder {str(folder)!r} must hold phase_diagram.csv or comparison.json")
    try:
        params = json.loads(meta.read_text())["parameters"]
        if not isinstance(params, dict) or "problem" not in params:
            raise KeyError("problem")
    except (OSError, ValueError, KeyError, TypeError):
        raise ParameterError(
            f"theory folder {str(folder)!r}: {meta.name} must be a dotattn {kind} output with "
            f'"parameters" (problem and solver settings)'
        ) from None
    return kind, params


def read_theory(
    folder: str | os.PathLike, problem: Problem, settings: SweepSettings | None = None
) -> list[BranchPoint]:
    """Theory records at the problem's ω from a phase-diagram folder, or from the output folder of an
    earlier comparison (its ``comparison.json`` keeps the theory rows).

    The folder must have been computed for the same problem (L, r, r_t, σ, λ, A, G; ω among its
    ω) and with the same solver ``settings`` (default: the problem's default rule and
    options); otherwise ParameterError naming the first differing field and both values.
    """
    folder = Path(folder)
    kind, params = _theory_metadata(folder)  # refuse another problem or settings first, then verify the files
    settings = settings or SweepSettings(default_quadrature(problem))
    stored_problem = params["problem"]
    omegas = (
        params.get("omegas", [stored_problem.get("omega")])
        if kind == "phase-diagram"
        else [stored_problem.get("omega")]
    )
    asked = {k: v for k, v in problem.to_dict().items() if k != "omega"}
    diff = first_difference(asked, stored_problem)
    if diff is None and not any(isinstance(w, (int, float)) and abs(w - problem.omega) < 1e-9 for w in omegas):
        diff = ("omega", problem.omega, omegas if kind == "phase-diagram" else omegas[0])
    if diff is None:
        diff = first_difference(settings.to_dict(), params)
    if diff is not None:
        field, want, have = diff
        raise ParameterError(
            f"theory folder {str(folder)!r} was computed for another {field}: {have} there, "
            f"{want} here (problem and solver options must match)"
        )
    verify_folder(folder, kind=kind)
    try:
        if kind == "comparison":
            return [BranchPoint.from_row(r) for r in json.loads((folder / "comparison.json").read_text())["theory"]]
        points = read_phase_diagram(folder, problem.omega)
    except (OSError, ValueError, KeyError, TypeError):
        raise ParameterError(f"theory folder {str(folder)!r}: its theory rows cannot be read") from None
    if not points:
        raise ParameterError(f"phase diagram {str(folder)!r} has no rows at omega = {problem.omega:g}")
    return points


def compare_and_write(
    erm_dir: Path,
    out: Path,
    theory_dir: str | None,
    finite_dirs: list[str],
    settings: SweepSettings | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> tuple[dict[str, str], list[ComparisonRow]]:
    """Load the ERM run, get the theory (read or computed), tabulate, and write comparison.csv/json
    and figures into ``out`` (created only after every input has been checked); returns (paths, table)."""
    from dotattn.positional_semantic.baseline import linear_baseline_test_error
    from dotattn.theory_vs_erm import plotting

    t0 = time.perf_counter()
    erm = load_erm(erm_dir)
    settings = settings or SweepSettings(default_quadrature(erm.problem))
    settings.check(erm.problem)
    if theory_dir:
        theory = read_theory(theory_dir, erm.problem, settings)
        have = {round(p.alpha, 9) for p in theory}
        missing = [a for a in erm.alphas if round(a, 9) not in have]
        if missing:
            raise ParameterError(
                f"alpha = {missing[0]:g} of the ERM runs is not on the alpha grid of theory folder "
                f"{str(theory_dir)!r}; every ERM alpha must be there"
            )
    finite = [load_erm(f) for f in finite_dirs]
    for f, run in zip(finite_dirs, finite, strict=True):
        diff = first_difference(erm.problem.to_dict(), run.problem.to_dict())
        if diff is not None:
            raise ParameterError(
                f"finite-size folder {str(f)!r} was run for another {diff[0]}: {diff[2]} there, "
                f"{diff[1]} in the ERM folder"
            )
    if Path(out).resolve() in [Path(erm_dir).resolve(), *(Path(f).resolve() for f in finite_dirs)]:
        raise ParameterError(
            f"out must be a folder of its own, not the ERM folder {str(out)!r} (it would then hold two folder kinds)"
        )
    out = ensure_writable_dir(out)  # only now: every input above is valid
    if not theory_dir:
        theory = theory_points(erm.problem, erm.alphas, settings)
    table = comparison_table(erm, theory, tolerance)
    prov = provenance(
        {
            "erm": str(erm_dir),
            "theory": theory_dir or "computed",
            "problem": erm.problem.to_dict(),
            "finite_size": finite_dirs,
            "tolerance": tolerance,
            "compared": COMPARED,
            **settings.to_dict(),
        },
        seconds=time.perf_counter() - t0,
    )
    paths = {
        "csv": str(out / "comparison.csv"),
        "json": str(out / "comparison.json"),
        "figure": str(out / "comparison.png"),
    }
    write_csv(
        paths["csv"],
        [r.to_row() for r in table],
        COMPARE_COLUMNS,
        comment=f"dotattn {prov['dotattn_version']} commit {prov['git_commit']}",
    )
    eps_lin = linear_baseline_test_error(erm.problem)
    write_json(
        paths["json"],
        {
            "table": [r.to_row() for r in table],
            "theory": [p.to_row() for p in theory],
            "linear_baseline_test_error": eps_lin,
            **prov,
        },
    )
    fig = plotting.figure_comparison(
        theory_curves(theory, erm.problem.omega, erm.problem.sigma),
        table,
        linear_baseline_points(erm),
        erm.problem.omega,
        erm.d,
        eps_lin,
        title=shape_title(erm.problem),
        sigma=erm.problem.sigma,
    )
    save_figure(fig, paths["figure"], {"git_commit": prov["git_commit"]})
    if finite_dirs:
        runs = finite
        alpha = sorted({a for r in runs for a in r.alphas})[0]
        pts = finite_size_points(runs, alpha)
        # the d -> infinity values: from the theory read (same problem and settings) where it holds that
        # alpha, otherwise solved now
        read = [p for p in theory if abs(p.alpha - alpha) < 1e-9] if theory_dir else []
        inf = {
            p.branch: p.test_error
            for p in (read or theory_points(erm.problem, [alpha], settings))
            if p.converged and abs(p.alpha - alpha) < 1e-9
        }
        write_json(out / "finite_size.json", {"alpha": alpha, "points": pts, "theory": inf, **prov})
        fig = plotting.figure_finite_size(pts, inf, alpha, erm.problem.omega)
        paths["finite_size"] = str(out / "finite_size.png")
        save_figure(fig, paths["finite_size"], {"git_commit": prov["git_commit"]})
        paths["finite_size_json"] = str(out / "finite_size.json")
    write_manifest(out, paths.values(), prov["parameters"], provenance_record=prov)
    return paths, table


def write_alpha_c_study(
    study: AlphaCStudy,
    out_dir: str | os.PathLike,
    command: str = "",
    extra: Mapping[str, Any] | None = None,
    theory_summaries: Sequence[ColumnSummary] | None = None,
) -> dict[str, str]:
    """crossings.csv, cells.csv, delta.csv, summary.json (with provenance) and the two figures; with
    ``theory_summaries`` (a phase diagram's, :func:`read_phase_summaries`) also ``headline.png``
    (:func:`dotattn.theory_vs_erm.plotting.figure_headline`)."""
    from dotattn.core.status import STATUS_CONVERGED
    from dotattn.core.validation import check_instance, check_out_dir
    from dotattn.theory_vs_erm import plotting

    check_instance("study", study, AlphaCStudy, "dotattn.theory_vs_erm.alpha_c.AlphaCStudy")
    out = Path(check_out_dir(out_dir, "out_dir"))
    if extra is not None and not isinstance(extra, Mapping):
        raise ParameterError(f"extra must be a mapping of parameters or None, got {type(extra).__name__}")
    params = {
        "problem": study.problem.to_dict(),
        "config": study.config.to_dict(),
        "command": command,
        "torch_threads": (extra or {}).get("threads"),
        **(extra or {}),
    }
    prov = provenance(params, seconds=study.seconds)
    comment = (
        f"dotattn erm-alpha-c {prov['dotattn_version']} commit {prov['git_commit']} {prov['created_utc']}; "
        "parameters in summary.json"
    )
    paths = {k: str(out / f"{k}.csv") for k in ("crossings", "cells", "delta")}
    write_csv(
        paths["crossings"],
        [x.to_row() for x in study.crossings],
        [f for f in SeedCrossing.__dataclass_fields__],
        comment=comment,
    )
    write_csv(
        paths["cells"],
        [s.to_row() for s in study.summaries],
        [f for f in CellSummary.__dataclass_fields__],
        comment=comment,
    )
    write_csv(
        paths["delta"], [r for c in study.cells for r in c.delta_rows(STATUS_CONVERGED)], DELTA_COLUMNS, comment=comment
    )
    if all(c.starts is not None for c in study.cells):
        from dotattn.theory_vs_erm.alpha_c_starts import starts_columns

        starts = [r for c in study.cells for r in (c.starts or ())]
        paths["starts"] = str(out / "starts.csv")
        write_csv(paths["starts"], starts, starts_columns(starts), comment=comment)
    if study.branch_crossings:
        paths["branch_crossings"] = str(out / "branch_crossings.csv")
        write_csv(
            paths["branch_crossings"],
            [x.to_row() for x in study.branch_crossings],
            [f for f in SeedCrossing.__dataclass_fields__],
            comment=comment,
        )
    summary = {
        **study.summary_dict(),
        "provenance": prov,
        "wall_seconds": round(study.seconds, 3),
        "cells_from_cache": study.from_cache,
        "cell_compute_seconds": {f"{c.omega:g}/{c.d}": round(c.seconds, 1) for c in study.cells},
        "theory_seconds": {f"{t.omega:g}": round(t.seconds, 1) for t in study.theory},
        "estimator": {
            "crossing": "first + to - sign change of e_t(sem) - e_t(pos) between consecutive valid "
            "grid points, linear interpolation",
            "valid": "both runs converged (relative stationarity <= tol) and in different minima "
            f"(overlaps differ by >= {SAME_MINIMUM_TOL:g})",
            "interval": f"percentile bootstrap of the mean over seeds, {study.config.n_boot} "
            f"replicas, level {study.config.level}",
            "extrapolation": "weighted least squares of per-d means against d^-nu, bootstrap over seeds within each d",
            **(
                {
                    "different_branch": "the same crossing, among the valid points where the two starts also "
                    "ended on different branches by their labels (starts.csv, dotattn.erm.records.run_branch)"
                }
                if study.branch_crossings
                else {}
            ),
        },
    }
    paths["summary"] = str(out / "summary.json")
    write_json(paths["summary"], summary)

    curves = mean_curves(study, STATUS_CONVERGED)
    scaling = []
    for w, th, fit in zip(study.config.omegas, study.theory, study.fits, strict=True):
        s_w = [s for s in study.summaries if abs(s.omega - w) < 1e-12]
        x_line = np.linspace(0.0, 1.0 / min(study.config.ds), 50)
        scaling.append(
            {
                "omega": w,
                "inv_d": np.array([1.0 / s.d for s in s_w]),
                "alpha_c": np.array([s.alpha_c for s in s_w]),
                "ci": np.array([[s.ci_lo, s.ci_hi] for s in s_w]).reshape(-1, 2),
                "fit_x": x_line,
                "fit_y": fit.alpha_inf + fit.slope * x_line**fit.nu,
                "fit_model": fit.model,
                "alpha_inf": fit.alpha_inf,
                "alpha_inf_ci": (fit.ci_lo, fit.ci_hi),
                "theory_alpha_c": th.alpha_c,
            }
        )
    meta = {
        "dotattn_version": prov["dotattn_version"],
        "git_commit": prov["git_commit"],
        "created_utc": prov["created_utc"],
    }
    figs = {
        "delta_et": plotting.figure_alpha_c_delta(curves, study.theory),
        "alpha_c_vs_d": plotting.figure_alpha_c_scaling(scaling),
    }
    if theory_summaries:
        figs["headline"] = plotting.figure_headline(theory_summaries, summary["omegas"])
    for name, fig in figs.items():
        paths[name] = str(out / f"{name}.png")
        save_figure(fig, paths[name], meta)
    write_manifest(out, paths.values(), params, provenance_record=prov, command=command or None)
    return paths


def read_alpha_c_part(folder: str | os.PathLike) -> StudyPart:
    """The cells of a committed ``erm-alpha-c`` folder, from its rows, verified and never trusted.

    The folder must pass :func:`dotattn.core.integrity.verify_folder` (its manifest, so a folder made
    before manifests must be sealed first with ``dotattn verify --seal``); then every cell is
    rebuilt from ``delta.csv`` (a full seed x α grid per cell, Δe_t = e_t(sem) − e_t(pos) and the
    ``valid`` flag as recomputed), and the per-seed crossings recomputed from it must be the rows of
    ``crossings.csv`` (outcome, crossing α to 1e-12, sign changes, valid points) and the seed
    counts those of ``cells.csv``. IntegrityError (one line) at the first mismatch.
    """
    folder = Path(folder)
    verify_folder(folder, kind="alpha-c")
    return alpha_c_rows(folder)


def write_variants(
    points: Sequence[VariantPoint],
    out_dir: str | os.PathLike,
    params: Mapping[str, Any],
    command: str = "",
    seconds: float | None = None,
) -> dict[str, str]:
    """variants.csv (the points), summary.json (the same rows, parameters, provenance), variants.png
    (:func:`dotattn.theory_vs_erm.plotting.figure_variants`) and the manifest, written last."""
    from dotattn.theory_vs_erm import plotting
    from dotattn.theory_vs_erm.variant_records import VARIANT_COLUMNS

    out = Path(out_dir)
    prov = provenance({**params, "command": command}, seconds=seconds)
    paths = {
        "variants": str(out / "variants.csv"),
        "summary": str(out / "summary.json"),
        "figure": str(out / "variants.png"),
    }
    write_csv(
        paths["variants"],
        [p.to_row() for p in points],
        VARIANT_COLUMNS,
        comment=f"dotattn variants {prov['dotattn_version']} commit {prov['git_commit']} "
        f"{prov['created_utc']}; parameters in summary.json",
    )
    write_json(paths["summary"], {"provenance": prov, "points": [p.to_row() for p in points]})
    save_figure(
        plotting.figure_variants(points, params["baseline"]),
        paths["figure"],
        {
            "dotattn_version": prov["dotattn_version"],
            "git_commit": prov["git_commit"],
            "created_utc": prov["created_utc"],
        },
    )
    write_manifest(out, paths.values(), params, provenance_record=prov, command=command or None)
    return paths
