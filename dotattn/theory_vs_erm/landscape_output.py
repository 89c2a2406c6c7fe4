"""Reading the ``erm-restarts`` folders of a best-of-K study and writing its output folder (``dotattn landscape``).

Inputs: one or more roots laid out as ``ROOT/d{d}/alpha{α}/informed`` (the noise-free informed positional and
semantic start of every seed) and ``ROOT/d{d}/alpha{α}/restarts`` (noisy copies of each informed start, and
random starts), each an ``erm-restarts`` folder. :func:`plan_inputs` reads what each folder was made for and
refuses (ParameterError, one line) folders that do not belong to one study; :func:`read_best` then verifies
every folder (:func:`dotattn.core.integrity.verify_folder`, kind ``restarts``) before it reads its runs, and
reduces each point to its best-of-K rows (:func:`dotattn.theory_vs_erm.landscape.best_from_runs`).

Output (:func:`write_landscape`): ``study_runs.csv`` (every run: point, role, start, status, branch, e_t, ε_g), ``best.csv``, ``crossings.csv``, ``crossing_by_k.csv``, ``summary.json`` (with
provenance), ``crossing_vs_K.png`` and ``manifest.json``; the folder kind ``landscape`` is registered in
:mod:`dotattn.theory_vs_erm.integrity`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dotattn.core.integrity import first_difference, meta_parameters, read_records, verify_folder
from dotattn.core.io import IntegrityError, provenance, save_figure, write_csv, write_json, write_manifest
from dotattn.core.validation import ParameterError
from dotattn.erm import integrity as _erm_integrity  # noqa: F401  (registers the restarts kind)
from dotattn.erm.restart_records import RestartRecord
from dotattn.positional_semantic.problem import Problem
from dotattn.theory_vs_erm import integrity as _integrity  # noqa: F401  (registers the landscape kind)
from dotattn.theory_vs_erm.landscape import (
    BRANCHES,
    ROLES,
    STUDY_RUN_COLUMNS,
    BestOfK,
    KCrossing,
    KSummary,
    LandscapeStudy,
    StudyRun,
    best_from_runs,
    k_max_of,
)

__all__ = [
    "SHARED_SETTINGS",
    "BEST_COLUMNS",
    "CROSSING_COLUMNS",
    "BY_K_COLUMNS",
    "InputFolder",
    "InputPlan",
    "plan_inputs",
    "References",
    "read_references",
    "headline_landscape",
    "read_runs",
    "read_best",
    "replica_alpha_c",
    "write_landscape",
]

SHARED_SETTINGS: tuple[str, ...] = (
    "steps",
    "tol",
    "teacher",
    "optimizer",
    "sector",
    "dtype",
    "lr",
    "positional_m0",
)
"""Settings of ``erm-restarts`` every input folder must share (with the problem, ω included): what the runs
minimise and when a run counts as converged. Start counts, noise, random scale and test samples may differ
between the informed and the restarts folders."""
BEST_COLUMNS = tuple(BestOfK.__dataclass_fields__)
CROSSING_COLUMNS = tuple(KCrossing.__dataclass_fields__)
BY_K_COLUMNS = tuple(KSummary.__dataclass_fields__)
_D = re.compile(r"^d(\d+)$")
_ALPHA = re.compile(r"^alpha(\d+(?:\.\d*)?)$")


@dataclass(frozen=True)
class InputFolder:
    """One ``erm-restarts`` folder of the study: its ``role`` (informed / restarts), where it sits (d, α) and
    what its summary.json says it was made for (``params``)."""

    path: Path
    role: str
    d: int
    alpha: float
    params: dict[str, Any]

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.params.get("restarts") or {})

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.config.get("seeds") or ())


@dataclass(frozen=True)
class InputPlan:
    """The input folders in pairs (informed, restarts) per (d, α) and root, the problem, the shared settings
    and K_max per d (the largest power of two <= 1 + the fewest noisy copies of an informed start at that d)."""

    pairs: tuple[tuple[InputFolder, InputFolder], ...]
    problem: Problem
    settings: dict[str, Any]
    k_max: dict[int, int]

    @property
    def folders(self) -> tuple[InputFolder, ...]:
        return tuple(f for pair in self.pairs for f in pair)


def _discover(root: Path) -> list[tuple[int, float, Path]]:
    if not root.is_dir():
        raise ParameterError(f"--runs {str(root)!r}: not a folder")
    cells = []
    for ddir in sorted(root.iterdir()):
        md = _D.match(ddir.name)
        if md is None or not ddir.is_dir():
            continue
        for adir in sorted(ddir.iterdir()):
            ma = _ALPHA.match(adir.name)
            if ma is not None and adir.is_dir():
                cells.append((int(md.group(1)), float(ma.group(1)), adir))
    if not cells:
        raise ParameterError(f"--runs {str(root)!r}: no d*/alpha*/ folders (the layout of an erm-restarts study)")
    return cells


def _folder(path: Path, role: str, d: int, alpha: float) -> InputFolder:
    if not (path / "summary.json").is_file() or not (path / "manifest.json").is_file():
        raise ParameterError(
            f"--runs: {path} has no finished erm-restarts output (summary.json and manifest.json); every "
            f"d*/alpha*/ folder needs informed/ and restarts/"
        )
    try:
        params = meta_parameters(path / "summary.json")
    except IntegrityError as err:
        raise ParameterError(f"--runs: {err}") from None
    cfg = params.get("restarts")
    if (
        params.get("command") != "erm-restarts"
        or not isinstance(cfg, dict)
        or not isinstance(params.get("problem"), dict)
    ):
        raise ParameterError(
            f"--runs: {path} is not an erm-restarts folder (its summary.json has no restarts settings)"
        )
    try:
        fd, fa = int(cfg["d"]), float(cfg["alpha"])
    except (KeyError, TypeError, ValueError):
        raise ParameterError(f"--runs: {path / 'summary.json'} has no readable d and alpha") from None
    if fd != d or abs(fa - alpha) > 1e-9:
        raise ParameterError(
            f"--runs: {path} holds runs at d = {fd}, alpha = {fa:g} but sits under d{d}/alpha{alpha:g}"
        )
    return InputFolder(path, role, d, alpha, params)


def plan_inputs(roots: Sequence[str | os.PathLike]) -> InputPlan:
    """Every (d, α) folder pair under ``roots``, checked against each other before anything is read or computed.

    Refused (ParameterError, one line): a root without the layout; a (d, α) without finished ``informed`` and
    ``restarts`` folders; folders made for another problem (ω included) or another of :data:`SHARED_SETTINGS`;
    an informed folder whose informed noise is not 0 or that does not hold exactly one semantic and one
    positional start; a restarts folder without a noisy copy of each informed start; the two folders of a
    (d, α) holding other seeds; a (d, α, seed) point in two roots; a d whose seeds do not all cover the same
    α grid."""
    if not roots:
        raise ParameterError("--runs: give at least one folder")
    pairs: list[tuple[InputFolder, InputFolder]] = []
    for root in roots:
        for d, alpha, adir in _discover(Path(root)):
            pairs.append(
                (_folder(adir / "informed", "informed", d, alpha), _folder(adir / "restarts", "restarts", d, alpha))
            )
    first = pairs[0][0]
    problem_ref = first.params["problem"]
    settings = {k: first.config.get(k) for k in SHARED_SETTINGS}
    points: dict[tuple[int, float, int], Path] = {}
    copies: dict[int, int] = {}
    for informed, restarts in pairs:
        for f in (informed, restarts):
            diff = first_difference(problem_ref, f.params["problem"]) or first_difference(
                f.params["problem"], problem_ref
            )
            if diff is not None:
                raise ParameterError(
                    f"--runs: {f.path} was made for another problem: {diff[0]} = {diff[2]} there, {diff[1]} in "
                    f"{first.path}"
                )
            mine = {k: f.config.get(k) for k in SHARED_SETTINGS}
            diff = first_difference(settings, mine)
            if diff is not None:
                raise ParameterError(
                    f"--runs: {f.path} has another {diff[0]}: {diff[2]} there, {diff[1]} in {first.path}"
                )
        noise = float(informed.config.get("informed_noise", math.nan))
        starts = sorted(str(s) for s in informed.config.get("starts") or ())
        if noise != 0.0:
            raise ParameterError(
                f"--runs: {informed.path} is an informed folder with informed_noise = {noise:g}, not 0"
            )
        if starts != ["positional", "semantic"]:
            raise ParameterError(
                f"--runs: {informed.path} must hold exactly one semantic and one positional start, holds {starts}"
            )
        rstarts = [str(s) for s in restarts.config.get("starts") or ()]
        fewest = min(rstarts.count(b) for b in BRANCHES)
        if fewest < 1:
            raise ParameterError(
                f"--runs: {restarts.path} holds no noisy copy of one informed start (semantic "
                f"{rstarts.count('semantic')}, positional {rstarts.count('positional')}); at least one of each is needed"
            )
        copies[informed.d] = min(copies.get(informed.d, fewest), fewest)
        if informed.seeds != restarts.seeds:
            raise ParameterError(
                f"--runs: {informed.path} holds seeds {list(informed.seeds)}, {restarts.path} {list(restarts.seeds)}; "
                f"the two folders of a point need the same seeds"
            )
        for s in informed.seeds:
            key = (informed.d, round(informed.alpha, 9), s)
            if key in points:
                raise ParameterError(
                    f"--runs: d = {informed.d}, alpha = {informed.alpha:g}, seed {s} is both in {points[key]} and "
                    f"{informed.path} (each point once)"
                )
            points[key] = informed.path
    grids: dict[int, dict[int, set[float]]] = {}
    for d, a, s in points:
        grids.setdefault(d, {}).setdefault(s, set()).add(a)
    for d, by_seed in sorted(grids.items()):
        grid = set().union(*by_seed.values())
        for s, have in sorted(by_seed.items()):
            if have != grid:
                missing = min(grid - have)
                raise ParameterError(
                    f"--runs: d = {d}: seed {s} has no runs at alpha = {missing:g} (every seed of a d needs the "
                    f"whole alpha grid of that d, {len(grid)} values)"
                )
        if len(grid) < 2:
            raise ParameterError(f"--runs: d = {d} has {len(grid)} alpha value; a crossing needs at least 2")
    try:
        problem = Problem.from_dict(problem_ref)
    except (ParameterError, TypeError, KeyError) as err:
        raise ParameterError(f"--runs: {first.path / 'summary.json'}: no readable problem ({err})") from None
    pairs.sort(key=lambda p: (p[0].d, p[0].alpha, p[0].seeds))
    return InputPlan(tuple(pairs), problem, settings, {d: k_max_of(c) for d, c in sorted(copies.items())})


def _runs(folder: InputFolder) -> list[RestartRecord]:
    """The verified rows of one folder, checked to be exactly its seeds x starts (start kind by restart index)."""
    verify_folder(folder.path, kind="restarts")
    runs = read_records(folder.path / "runs.csv", RestartRecord)
    starts = [str(s) for s in folder.config.get("starts") or ()]
    want = {(s, j) for s in folder.seeds for j in range(len(starts))}
    seen = set()
    for i, r in enumerate(runs, start=1):
        key = (r.seed, r.restart)
        if key not in want or key in seen or r.start != starts[r.restart] or r.d != folder.d:
            raise IntegrityError(
                f"{folder.path / 'runs.csv'}: row {i} (seed {r.seed}, restart {r.restart}, start {r.start}) is not "
                f"one of the folder's seeds x starts, or repeats one"
            )
        if abs(r.alpha - folder.alpha) > 1e-9:
            raise IntegrityError(f"{folder.path / 'runs.csv'}: row {i} has alpha = {r.alpha:g}, not {folder.alpha:g}")
        seen.add(key)
    if seen != want:
        s, j = min(want - seen)
        raise IntegrityError(f"{folder.path / 'runs.csv'}: no row for seed {s}, restart {j}")
    return runs


def read_runs(plan: InputPlan, done: Callable[[int], None] | None = None) -> list[StudyRun]:
    """Verify and read every folder of ``plan`` (IntegrityError, one line, at the first that fails) and return every
    run as a :class:`StudyRun` (role ``informed`` or ``restarts``); ``done(1)`` after each folder."""
    out: list[StudyRun] = []
    for pair in plan.pairs:
        for role, folder in zip(ROLES, pair, strict=True):
            out.extend(
                StudyRun(
                    d=folder.d,
                    alpha=folder.alpha,
                    seed=r.seed,
                    role=role,
                    restart=r.restart,
                    start=r.start,
                    status=r.status,
                    branch=r.branch,
                    train_loss=r.train_loss,
                    test_error=r.test_error,
                )
                for r in _runs(folder)
            )
            if done:
                done(1)
    return out


def read_best(plan: InputPlan, done: Callable[[int], None] | None = None) -> tuple[list[StudyRun], list[BestOfK]]:
    """Every run of ``plan`` (:func:`read_runs`) and the best-of-K rows of every point
    (:func:`dotattn.theory_vs_erm.landscape.best_from_runs` with the plan's K_max per d)."""
    runs = read_runs(plan, done)
    return runs, best_from_runs(runs, plan.k_max)


def replica_alpha_c(folder: str | os.PathLike, problem: Problem) -> tuple[float, float]:
    """(α_c, its error) of the replica theory at ``problem``'s ω, read from a verified phase-diagram folder made
    for the same problem (:func:`dotattn.theory_vs_erm.output.theory_from_phase_diagram`); ParameterError when
    it has none at that ω."""
    from dotattn.theory_vs_erm.output import theory_from_phase_diagram

    try:
        column = theory_from_phase_diagram(folder, problem, [problem.omega], [])[0]
    except ParameterError as err:  # IntegrityError too
        raise ParameterError(f"--phase-diagram: {err}") from None
    if column.alpha_c is None:
        raise ParameterError(f"--phase-diagram: {folder} has no alpha_c at omega = {problem.omega:g}")
    error = column.alpha_c_error
    return float(column.alpha_c), math.nan if error is None else float(error)


@dataclass(frozen=True)
class References:
    """What a landscape study is reported beside, read from verified folders of the same problem: ``erm_omegas``,
    the informed-start crossings of an ``erm-alpha-c`` folder (its summary.json ``omegas`` entries, every ω), and
    ``rsb``, the 1RSB crossings of a ``complexity`` folder (``alpha_threshold`` and ``alpha_equilibrium``: value and
    uncertainty). Either may be empty."""

    erm_omegas: tuple[dict[str, Any], ...] = ()
    rsb: Mapping[str, Any] | None = None
    folders: Mapping[str, str] | None = None

    def as_dict(self, omega: float) -> dict[str, Any]:
        """The references at ``omega``, as summary.json records them."""
        out: dict[str, Any] = {"folders": dict(self.folders or {})}
        here = [o for o in self.erm_omegas if abs(float(o["omega"]) - omega) < 1e-9]
        if here:
            out["informed_start"] = {"by_d": here[0]["by_d"], "extrapolated": here[0].get("extrapolated")}
        if self.rsb:
            out["rsb"] = dict(self.rsb)
        return out


def _same_problem(name: str, folder: str | os.PathLike, have: Mapping[str, Any], problem: Problem) -> None:
    want = {k: v for k, v in problem.to_dict().items() if k != "omega"}
    got = {k: v for k, v in (have or {}).items() if k != "omega" and k in want}
    diff = first_difference(got, {k: want[k] for k in got})
    if diff is not None or not got:
        raise ParameterError(
            f"{name}: {folder} was not made for this study's problem ({diff or 'no problem recorded'})"
        )


def read_references(alpha_c_dir: str | None, rsb_dir: str | None, problem: Problem) -> References:
    """The :class:`References` of a study of ``problem``: ``alpha_c_dir`` an ``erm-alpha-c`` folder (verified, same
    problem, ω aside), ``rsb_dir`` a ``complexity`` folder (verified, same problem and ω). ParameterError (one line)
    for a folder that fails its verification or was made for another problem."""
    from dotattn.core.integrity import read_verified_json

    folders: dict[str, str] = {}
    erm: tuple[dict[str, Any], ...] = ()
    rsb: dict[str, Any] | None = None
    if alpha_c_dir is not None:
        try:
            verify_folder(alpha_c_dir, kind="alpha-c")
            summary = read_verified_json(Path(alpha_c_dir) / "summary.json")
        except (IntegrityError, OSError) as err:
            raise ParameterError(f"--alpha-c: {err}") from None
        _same_problem("--alpha-c", alpha_c_dir, summary["provenance"]["parameters"].get("problem"), problem)
        erm = tuple(summary["omegas"])
        folders["alpha_c"] = str(alpha_c_dir)
    if rsb_dir is not None:
        try:
            verify_folder(rsb_dir, kind="complexity")
            summary = read_verified_json(Path(rsb_dir) / "summary.json")
        except (IntegrityError, OSError) as err:
            raise ParameterError(f"--rsb: {err}") from None
        params = summary.get("parameters") or {}
        _same_problem("--rsb", rsb_dir, params.get("problem") or params, problem)
        omega = (params.get("problem") or params).get("omega")
        if omega is None or abs(float(omega) - problem.omega) > 1e-9:
            raise ParameterError(f"--rsb: {rsb_dir} is at omega = {omega}, the runs at {problem.omega:g}")
        rsb = {
            key: {"value": summary[key]["value"], "uncertainty": summary[key]["uncertainty"]}
            for key in ("alpha_threshold", "alpha_equilibrium")
        }
        folders["rsb"] = str(rsb_dir)
    return References(erm, rsb, folders)


def headline_landscape(study: LandscapeStudy, references: References, omega: float) -> dict[str, Any]:
    """What the headline figure draws of a landscape study at ``omega`` (records only): per d the best-of-K
    crossing of search ``both`` at K_max (mean, se, n), the d → ∞, K → ∞ estimate with its interval, and the 1RSB
    crossings where ``references`` has them."""
    summary = study.summary_dict()
    points = []
    for d in study.ds:
        cell = summary["crossing_by_K"][str(d)]["both"][str(study.k_max(d))]
        points.append({"d": d, "k_max": study.k_max(d), "mean": cell["mean"], "se": cell["se"], "n": cell["n"]})
    limit = summary["d_infinity"].get("both") or {}
    return {"omega": omega, "points": points, "limit": limit, "rsb": dict(references.rsb or {})}


def made_for(plan: InputPlan, phase_dir: str, alpha_c: float, alpha_c_error: float) -> dict[str, Any]:
    """What a landscape folder is made for: the problem, the shared settings, K_max per d, every input folder
    (its path and the commit and time its manifest records), the phase diagram and the α_c read from it."""
    import json

    inputs = []
    for f in plan.folders:
        man = json.loads((f.path / "manifest.json").read_text())
        inputs.append(
            {
                "path": str(f.path),
                "role": f.role,
                "d": f.d,
                "alpha": f.alpha,
                "seeds": list(f.seeds),
                "git_commit": man.get("git_commit"),
                "created_utc": man.get("created_utc"),
            }
        )
    return {
        "problem": plan.problem.to_dict(),
        "settings": dict(plan.settings),
        "k_max": {str(d): k for d, k in plan.k_max.items()},
        "inputs": inputs,
        "phase_diagram": str(phase_dir),
        "replica_alpha_c": alpha_c,
        "replica_alpha_c_error": alpha_c_error,
    }


def write_landscape(
    study: LandscapeStudy,
    runs: Sequence[StudyRun],
    out: str | os.PathLike,
    params: Mapping[str, Any],
    command: str = "",
    seconds: float = 0.0,
    references: References | None = None,
    theory: Sequence[Any] = (),
) -> dict[str, str]:
    """study_runs.csv (every run of the study: ``runs``), best.csv, crossings.csv, crossing_by_k.csv, summary.json (provenance, :meth:`LandscapeStudy.summary_dict`),
    crossing_vs_K.png (:func:`dotattn.theory_vs_erm.landscape_plotting.figure_crossing_vs_k`) and the manifest,
    written last. ``params``: what the folder is made for (:func:`made_for`)."""
    from dotattn.theory_vs_erm.landscape_plotting import figure_crossing_vs_k

    folder = Path(out)
    prov = provenance({**params, "command": command}, seconds=seconds)
    comment = (
        f"dotattn landscape {prov['dotattn_version']} commit {prov['git_commit']} {prov['created_utc']}; "
        "parameters in summary.json"
    )
    paths = {name: str(folder / f"{name}.csv") for name in ("study_runs", "best", "crossings", "crossing_by_k")}
    write_csv(paths["study_runs"], [r.to_row() for r in runs], STUDY_RUN_COLUMNS, comment=comment)
    write_csv(paths["best"], [r.to_row() for r in study.best], BEST_COLUMNS, comment=comment)
    write_csv(paths["crossings"], [x.to_row() for x in study.crossings], CROSSING_COLUMNS, comment=comment)
    write_csv(paths["crossing_by_k"], [s.to_row() for s in study.summaries], BY_K_COLUMNS, comment=comment)
    paths["summary"] = str(folder / "summary.json")
    refs = references or References()
    omega = float(params["problem"]["omega"])
    write_json(paths["summary"], {"provenance": prov, **study.summary_dict(), "references": refs.as_dict(omega)})
    paths["figure"] = str(folder / "crossing_vs_K.png")
    fig = figure_crossing_vs_k(panels(study), study.alpha_c, study.alpha_c_error)
    meta = {k: prov[k] for k in ("dotattn_version", "git_commit", "created_utc")}
    save_figure(fig, paths["figure"], meta)
    if refs.erm_omegas and theory:  # the headline: replica alpha_c(omega), informed-start and best-of-K crossings
        from dotattn.theory_vs_erm.plotting import figure_headline

        paths["headline"] = str(folder / "headline.png")
        landscape = headline_landscape(study, refs, omega)
        save_figure(figure_headline(theory, list(refs.erm_omegas), landscape), paths["headline"], meta)
    write_manifest(folder, paths.values(), params, provenance_record=prov, command=command or None)
    return paths


def panels(study: LandscapeStudy) -> list[dict[str, Any]]:
    """What the figure draws, per (search, d): the K values, every seed's crossing per K (NaN: none), the
    per-K mean and se, the every-start mean and se, and the K → ∞ line c_inf + slope/ln K with its interval."""
    import numpy as np

    from dotattn.theory_vs_erm.landscape import EVERY_START, SEARCHES

    out = []
    for search in SEARCHES:
        for d in study.ds:
            ks = tuple(sorted({x.k for x in study.crossings if x.d == d and x.k != EVERY_START}))
            seeds = sorted({x.seed for x in study.crossings if x.d == d})
            X = np.full((len(seeds), len(ks)), np.nan)
            for x in study.crossings:
                if x.d == d and x.search == search and x.k in ks:
                    X[seeds.index(x.seed), ks.index(x.k)] = x.alpha_c
            summ = {s.k: s for s in study.summaries if s.d == d and s.search == search}
            fit = next(f for f in study.k_fits if f.d == d and f.search == search)
            every = summ[EVERY_START]
            out.append(
                {
                    "search": search,
                    "d": d,
                    "k": np.array(ks, dtype=float),
                    "seeds": X,
                    "mean": np.array([summ[k].mean for k in ks]),
                    "se": np.array([summ[k].se for k in ks]),
                    "every_mean": every.mean,
                    "every_se": every.se,
                    "c_inf": fit.c_inf,
                    "slope": fit.slope,
                    "ci": (fit.ci_lo, fit.ci_hi),
                }
            )
    return out
