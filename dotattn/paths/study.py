"""The Markov-task study: theory and GP per width and network, the sampler's results, head scores,
pruning and alignments; written as CSV + JSON + PNG with provenance.

``run_theory_study`` computes; ``write_theory_study`` writes; ``write_sample_run`` /
``read_sample_run`` carry one sampling run (``dotattn paths sample``) into the study.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.io import IntegrityError, provenance, save_figure, write_csv, write_json, write_manifest
from dotattn.core.rows import read_float
from dotattn.core.status import CONVERGED
from dotattn.core.validation import ParameterError, check_instance, check_int
from dotattn.paths.analysis import (
    POINT_COLUMNS,
    PathsPoint,
    alignment,
    evaluate,
    head_scores,
    path_alignments,
    prune_head,
)
from dotattn.paths.data import PathData, markov_path_data, subset_heads
from dotattn.paths.finite_n import COORDINATES, laplace_mean
from dotattn.paths.network import OutputKernels
from dotattn.paths.task import SUMMARY_ORDER, MarkovTask
from dotattn.paths.theory import (
    PathsModel,
    TheoryResult,
    gp_order_parameters,
    kernel,
    minimise_action,
    output_labels,
)

__all__ = [
    "StudyConfig",
    "Study",
    "run_theory_study",
    "write_theory_study",
    "write_sample_run",
    "sample_parameters",
    "read_sample_run",
    "summary_order",
    "in_summary_order",
    "SAMPLE_FILE",
]

SAMPLE_FILE = "sample.json"


@dataclass(frozen=True)
class StudyConfig:
    """Task, widths, temperature, prior variance and the networks (head subsets) to solve."""

    task: MarkovTask
    widths: tuple[float, ...]
    temperature: float = 0.01
    sigma2: float = 1.0
    subsets: tuple[str, ...] = ("all", "good", "good+denoising")
    heatmap_widths: tuple[float, ...] = (10.0, 100.0, 1000.0)
    outputs: int = 1
    """M: 1 (the label ±1) or 2 (one-hot targets of the two classes, argmax accuracy; docs/attention_paths.md §16)."""

    def __post_init__(self) -> None:
        if not isinstance(self.task, MarkovTask):
            raise ParameterError(f"task must be a dotattn.paths.task.MarkovTask, got {type(self.task).__name__}")
        for name in ("widths", "subsets", "heatmap_widths"):
            if isinstance(getattr(self, name), (str, bytes)) or not hasattr(getattr(self, name), "__iter__"):
                raise ParameterError(f"{name} must be a sequence, got {type(getattr(self, name)).__name__}")
        if not self.widths:
            raise ParameterError("N grid is empty; give at least one width")
        object.__setattr__(self, "outputs", check_int("outputs (M: 1 or 2 for the two classes)", self.outputs, 1, 2))
        for N in self.widths:  # validates N, temperature, sigma2
            PathsModel(N=N, temperature=self.temperature, sigma2=self.sigma2)
        for s in self.subsets:
            subset_heads(self.task, s)
        if len(set(self.subsets)) != len(self.subsets):
            raise ParameterError(f"subsets must name each network once, got {list(self.subsets)}")
        if "all" not in self.subsets:
            raise ParameterError("subsets must include 'all' (the network whose U is reported)")

    def model(self, N: float, heads: tuple[int, ...]) -> PathsModel:
        return PathsModel(N=N, temperature=self.temperature, sigma2=self.sigma2, heads=heads, outputs=self.outputs)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "task": "markov",
            **self.task.to_dict(),
            "N": list(self.widths),
            "temperature": self.temperature,
            "sigma2": self.sigma2,
            "subsets": list(self.subsets),
        }
        if self.outputs != 1:  # one output: the record of every earlier run, unchanged
            out["outputs"] = self.outputs
        return out


def one_hot(y: np.ndarray) -> np.ndarray:
    """The targets of two outputs for labels ±1: (1, 0) for +1, (0, 1) for −1."""
    return np.stack([(y > 0).astype(float), (y < 0).astype(float)], axis=1)


def extended_names(names: Sequence[str], outputs: int) -> tuple[str, ...]:
    """Names of the extended paths (path, output) of M outputs, the output least significant ('good:2');
    the path names themselves for one output."""
    if outputs == 1:
        return tuple(names)
    return tuple(f"{n}:{m + 1}" for n in names for m in range(outputs))


def extended_order(order: Sequence[int], outputs: int) -> list[int]:
    """A path order carried to the extended paths (each path's outputs stay together, in order)."""
    return [i * outputs + m for i in order for m in range(outputs)]


@dataclass
class Study:
    config: StudyConfig
    data: PathData
    points: list[PathsPoint] = field(default_factory=list)
    results: dict[float, TheoryResult] = field(default_factory=dict)
    samples: dict[float, dict[str, Any]] = field(default_factory=dict)
    collapsed: dict[float, dict[str, Any]] = field(default_factory=dict)
    means: dict[float, Any] = field(default_factory=dict)
    heads: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def summary_order(data: PathData, variant: str) -> list[int]:
    """Indices of the paths good, denoising, adversarial 1, adversarial 2 in the code's order."""
    return [data.path_keys.index(k) for k in SUMMARY_ORDER[variant]]


def _point(
    subset: str,
    method: str,
    N: float,
    U: np.ndarray,
    data: PathData,
    model: PathsModel,
    res: TheoryResult | None = None,
) -> PathsPoint:
    ev = evaluate(U, data, model)
    return PathsPoint(
        subset=subset,
        method=method,
        N=N,
        temperature=model.temperature,
        accuracy=ev.accuracy,
        loss=ev.loss,
        variance=ev.variance,
        status=res.status if res else CONVERGED,
        stationarity=res.stationarity if res else 0.0,
        iterations=res.iterations if res else 0,
        seconds=res.seconds if res else 0.0,
        paths=extended_names(data.path_names, model.outputs),
        U=U,
    )


def run_theory_study(
    config: StudyConfig, samples: Sequence[dict[str, Any]] = (), progress: Callable[[str], None] | None = None
) -> Study:
    """Theory (saddle point) for each width and network, GP limits, head scores and pruning."""
    check_instance("config", config, StudyConfig, "dotattn.paths.study.StudyConfig")
    t0 = time.perf_counter()
    if samples and config.outputs != 1:
        raise ParameterError("--sampled runs have one output; give them with outputs (M) = 1")
    data = markov_path_data(config.task)
    if config.outputs == 2:
        data = replace(data, y_train=one_hot(data.y_train), y_test=one_hot(data.y_test))
    study = Study(config=config, data=data)
    for subset in config.subsets:
        sub = data.restrict(subset_heads(config.task, subset))
        gp_model = config.model(1e12, sub.heads)  # N only labels the model; U is the GP value
        study.points.append(_point(subset, "gp", float("nan"), gp_order_parameters(gp_model)[0], sub, gp_model))
        start = None
        for N in sorted(config.widths):
            model = config.model(N, sub.heads)
            res = minimise_action(sub.C_train, sub.y_train, model, start=start)
            start = res.levels if res.converged else None
            study.points.append(_point(subset, "theory", N, res.U, sub, model, res))
            if subset == "all":
                study.results[N] = res
                for l, sc in enumerate(head_scores(res.U, sub)):
                    for h, s in enumerate(sc):
                        pr = prune_head(res.U, sub, model, l, h)
                        study.heads.append(
                            {
                                "N": N,
                                "layer": l + 1,
                                "head": sub.head_names[l][h],
                                "score": s,
                                "accuracy_pruned": pr.accuracy,
                                "loss_pruned": pr.loss,
                            }
                        )
            if progress:
                progress(
                    f"{subset:>15s} N={N:<8g} {res.status:>13s} it={res.iterations:<4d} "
                    f"stat={res.stationarity:.1e} acc={study.points[-1].accuracy:.3f} ({res.seconds:.2f} s)"
                )
    for N, res in study.results.items():
        if config.outputs == 1:  # the first-order mean is derived for one output
            study.means[N] = laplace_mean(res, data.C_train, data.y_train, config.model(N, data.heads))
    for s in samples:
        N = float(s["N"])
        collapsed = s.get("parameters", {}).get("method") == "collapsed"
        (study.collapsed if collapsed else study.samples)[N] = s
        study.points.append(
            PathsPoint(
                subset="all",
                method="collapsed" if collapsed else "sampled",
                N=N,
                temperature=config.temperature,
                accuracy=read_float(s["accuracy_sampled"]),
                accuracy_error=read_float(s["accuracy_error"]),  # null (NaN): one chain
                loss=read_float(s["loss_sampled"]),
                loss_error=read_float(s["loss_error"]),
                variance=float("nan"),
                status=s["status"],
                stationarity=float("nan"),
                iterations=s["draws_total"],
                seconds=s["seconds"],
                paths=data.path_names,
                U=np.asarray(s["U_sampled_code_order"]),
            )
        )
    study.seconds = time.perf_counter() - t0
    return study


def _check_sample_matches(config: StudyConfig, s: dict[str, Any]) -> None:
    p = s.get("parameters", {})
    want = config.task.to_dict()
    got = {k: p.get("task_parameters", {}).get(k) for k in want}
    if got != want or p.get("temperature") != config.temperature or p.get("sigma2") != config.sigma2:
        raise ParameterError("a --sampled run has other task, temperature or sigma2 parameters than this study")


def read_sample_run(folder: str | Path, config: StudyConfig) -> dict[str, Any]:
    """The summary of one sampling run written by :func:`write_sample_run` (its folder verified,
    :func:`dotattn.core.integrity.verify_folder`, and checked against ``config``)."""
    from dotattn.core.integrity import read_verified_json, verify_folder
    from dotattn.paths import integrity as _integrity  # noqa: F401  (registers this package's kinds)

    folder = Path(folder)
    if not (folder / SAMPLE_FILE).is_file():
        raise ParameterError(f"--sampled {str(folder)!r} holds no {SAMPLE_FILE}")
    verify_folder(folder, kind="paths-sample")
    s = read_verified_json(folder / SAMPLE_FILE)
    if "accuracy_sampled" not in s:
        raise IntegrityError(f"{folder / SAMPLE_FILE}: no accuracy_sampled")
    _check_sample_matches(config, s)
    return s


def _reorder(U: np.ndarray, order: Sequence[int]) -> np.ndarray:
    U = np.asarray(U)
    return U[np.ix_(order, order)]


def in_summary_order(point: PathsPoint, names: Sequence[str]) -> PathsPoint:
    """``point`` with its paths (and the rows and columns of U) in the summary order ``names`` (good,
    denoising, adversarial 1, adversarial 2), the one order of every file a study writes. A subset's
    point keeps its paths only, in that order. Folders written before this held points.csv in the code's
    order; each row names its paths (column ``paths``), so either is read correctly."""
    perm = sorted(range(len(point.paths)), key=lambda i: list(names).index(point.paths[i]))
    U = np.asarray(point.U)
    return replace(point, paths=tuple(point.paths[i] for i in perm), U=U[np.ix_(perm, perm)])


def write_theory_study(study: Study, folder: str | Path, command: str) -> dict[str, Any]:
    """points.csv, heads.csv, alignment.csv, summary.json and the figures, all with provenance."""
    from dotattn.paths import plotting

    folder = Path(folder)
    cfg, data = study.config, study.data
    M = cfg.outputs
    path_order = summary_order(data, cfg.task.variant)
    order = extended_order(path_order, M)  # of U's rows: the paths, or (path, output) for M outputs
    prov = provenance({**cfg.to_dict(), "command": command}, seconds=study.seconds)
    comment = "dotattn paths theory; provenance: " + json.dumps(prov, separators=(",", ":"))
    names = list(extended_names([data.path_names[i] for i in path_order], M))
    C_all = data.C_train if M == 1 else OutputKernels(data.C_train, M)
    y_all = output_labels(data.y_train, M)
    write_csv(
        folder / "points.csv",
        [in_summary_order(p, names).to_row() for p in study.points],
        POINT_COLUMNS,
        comment=comment,
    )
    write_csv(
        folder / "heads.csv",
        study.heads,
        ["N", "layer", "head", "score", "accuracy_pruned", "loss_pruned"],
        comment=comment,
    )
    gp_all = next(p for p in study.points if p.subset == "all" and p.method == "gp")
    gp_model = cfg.model(1e12, data.heads)
    align_rows = [{"N": "gp", "alignment": alignment(kernel(gp_all.U, C_all, gp_model.kernel_scale), y_all)}]
    for N, res in sorted(study.results.items()):
        align_rows.append({"N": N, "alignment": alignment(kernel(res.U, C_all, gp_model.kernel_scale), y_all)})
    pa = path_alignments(data)
    write_csv(folder / "alignment.csv", align_rows, ["N", "alignment"], comment=comment)
    per_N = {}
    for N, res in sorted(study.results.items()):
        theory = next(p for p in study.points if p.subset == "all" and p.method == "theory" and p.N == N)
        entry = {
            "accuracy_theory": theory.accuracy,
            "loss_theory": theory.loss,
            "accuracy_gp": gp_all.accuracy,
            "loss_gp": gp_all.loss,
            "status": res.status,
            "stationarity": res.stationarity,
            "iterations": res.iterations,
            "U": _reorder(res.U, order),
        }
        for subset in cfg.subsets:
            if subset != "all":
                for method in ("theory", "gp"):
                    pt = next(
                        p
                        for p in study.points
                        if p.subset == subset and p.method == method and (method == "gp" or p.N == N)
                    )
                    entry[f"accuracy_{method}_{subset}"] = pt.accuracy
        mean = study.means.get(N)
        if mean is not None:
            entry.update(
                {
                    "U_mean_1overN": _reorder(mean.U_mean, order),
                    "U_mean_1overN_status": mean.status,
                    "U_mean_1overN_note": mean.message
                    or f"Laplace posterior mean to O(1/N), coordinates: "
                    f"{COORDINATES}; needs N >= max d_k and N >> d_k (docs/attention_paths.md)",
                }
            )
        if N in study.collapsed:
            s = study.collapsed[N]
            entry.update(
                {
                    "accuracy_collapsed": s["accuracy_sampled"],
                    "accuracy_collapsed_error": s["accuracy_error"],
                    "loss_collapsed": s["loss_sampled"],
                    "loss_collapsed_error": s["loss_error"],
                    "U_collapsed": s["U_sampled"],
                    "U_collapsed_mcse": s.get("U_mcse"),
                    "collapsed_status": s["status"],
                    "collapsed_diagnostics": s["diagnostics"],
                }
            )
        if N in study.samples:
            s = study.samples[N]
            entry.update(
                {
                    "accuracy_sampled": s["accuracy_sampled"],
                    "accuracy_sampled_error": s["accuracy_error"],
                    "loss_sampled": s["loss_sampled"],
                    "loss_sampled_error": s["loss_error"],
                    "U_sampled": s["U_sampled"],
                    "U_sampled_mcse": s.get("U_mcse"),
                    "sampled_status": s["status"],
                    "U_zscores": s["U_zscores"],
                    "sampler_diagnostics": s["diagnostics"],
                }
            )
        per_N[f"{N:g}"] = entry
    summary: dict[str, Any] = {
        "provenance": prov,
        "paths": names,
        **({} if M == 1 else {"outputs": M, "targets": "one-hot (1, 0) for +1, (0, 1) for -1; accuracy of the argmax"}),
        "head_names": [list(h) for h in data.head_names],
        "per_N": per_N,
        "path_alignment": _reorder(pa, path_order),
        "heads": study.heads,
        "files": [
            "points.csv",
            "heads.csv",
            "alignment.csv",
            "summary.json",
            "accuracy_loss.png",
            "U_heatmaps.png",
            "path_kernels.png",
            "alignment.png",
            "head_scores.png",
        ],
    }
    if study.collapsed:
        summary["saddle_point_gap"] = saddle_gap_fit(per_N)
        summary["files"] += ["U_vs_N.png", "gap_vs_N.png"]
    write_json(folder / "summary.json", summary)
    meta = {"command": command, "git_commit": prov["git_commit"]}
    if study.collapsed:
        save_figure(plotting.figure_U_vs_N(per_N, summary["paths"]), folder / "U_vs_N.png", meta)
        save_figure(plotting.figure_gap_vs_N(summary["saddle_point_gap"]), folder / "gap_vs_N.png", meta)
    save_figure(plotting.figure_accuracy_loss(study.points, cfg.subsets), folder / "accuracy_loss.png", meta)
    heat = {
        N: _reorder(res.U, order)
        for N, res in study.results.items()
        if any(abs(N - w) < 1e-9 for w in cfg.heatmap_widths)
    } or {N: _reorder(res.U, order) for N, res in list(sorted(study.results.items()))[:3]}
    save_figure(plotting.figure_U_heatmaps(heat, names), folder / "U_heatmaps.png", meta)
    labels = data if M == 1 else replace(data, y_train=np.where(data.y_train[:, 0] > 0, 1.0, -1.0))
    save_figure(plotting.figure_path_kernels(labels, path_order), folder / "path_kernels.png", meta)
    path_names = [data.path_names[i] for i in path_order]
    save_figure(
        plotting.figure_alignment(_reorder(pa, path_order), path_names, align_rows), folder / "alignment.png", meta
    )
    save_figure(plotting.figure_head_scores(study.heads), folder / "head_scores.png", meta)
    write_manifest(folder, summary["files"], prov["parameters"], command=command, provenance_record=prov)
    return summary


def sample_parameters(model: PathsModel, task: MarkovTask, config: Any) -> dict[str, Any]:
    """The settings a sampling run is made for (its manifest's ``made_for``, less the library versions
    and the command line)."""
    return {
        "task": "markov",
        "task_parameters": task.to_dict(),
        "N": model.N,
        "temperature": model.temperature,
        "sigma2": model.sigma2,
        "heads": list(model.heads),
        "sampler": config.to_dict(),
    }


GAP_ENTRIES: tuple[tuple[int, int], ...] = ((0, 0), (1, 1), (0, 1))
"""The large entries whose saddle-point gap is fitted: good, denoising diagonals and their covariance
(summary order)."""


def saddle_gap_fit(per_N: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Relative gap g(N) = (E[U] − U*)/U* of the large entries (collapsed mean E[U] against the saddle point
    U*), with its Monte-Carlo error, and two weighted least-squares fits on all widths (weights 1/se², every
    width with a converged collapsed run, no other selection): the power law g = A N^{−p} (O(1/N) means
    p ≈ 1) and the series g = a/N + b/N² (:func:`series_fit`: a is the 1/N coefficient, b the next order)."""
    from scipy import optimize

    rows = []
    for key, e in sorted(per_N.items(), key=lambda kv: float(kv[0])):
        if "U_collapsed" not in e:
            continue
        Uc, se, Ut = (np.asarray(e[k], dtype=float) for k in ("U_collapsed", "U_collapsed_mcse", "U"))
        for i, j in GAP_ENTRIES:
            if i < Ut.shape[0] and j < Ut.shape[0]:
                rows.append(
                    {
                        "N": float(key),
                        "entry": [i, j],
                        "gap": (Uc[i, j] - Ut[i, j]) / Ut[i, j],
                        "gap_error": se[i, j] / abs(Ut[i, j]),
                        "status": e.get("collapsed_status"),
                    }
                )
    fits: dict[str, dict[str, Any]] = {}
    for i, j in GAP_ENTRIES:
        pts = [r for r in rows if r["entry"] == [i, j] and r["status"] == CONVERGED]
        if len(pts) < 3:
            continue
        Ns = np.array([r["N"] for r in pts])
        g = np.array([r["gap"] for r in pts])
        w = np.array([max(r["gap_error"], 1e-12) for r in pts])
        try:
            popt, pcov = optimize.curve_fit(
                lambda n, a, p: a * n ** (-p), Ns, g, p0=(g[0] * Ns[0], 1.0), sigma=w, absolute_sigma=True, maxfev=10000
            )
            fits[f"{i},{j}"] = {
                "A": float(popt[0]),
                "p": float(popt[1]),
                "p_error": float(np.sqrt(pcov[1, 1])),
                "chi2": float(np.sum(((g - popt[0] * Ns ** (-popt[1])) / w) ** 2)),
                "points": len(pts),
            }
        except (RuntimeError, ValueError) as err:
            fits[f"{i},{j}"] = {"error": str(err)}
        fits.setdefault(f"{i},{j}", {}).update(series_fit(Ns, g, w))
    return {
        "rows": rows,
        "fits": fits,
        "definition": "gap = (collapsed posterior mean - saddle point) / saddle point; fits gap = A N^-p and "
        "gap = a/N + b/N^2, weights 1/se^2 over all widths with a converged collapsed run",
    }


def series_fit(N: np.ndarray, g: np.ndarray, se: np.ndarray) -> dict[str, float]:
    """Weighted linear least squares of g = a/N + b/N² (N, g, se: (m,), m ≥ 3): a, b, their standard errors
    (from the covariance (XᵀWX)⁻¹, W = diag(1/se²)) and χ² on m − 2 degrees of freedom."""
    N, g, se = (np.asarray(v, dtype=float) for v in (N, g, se))
    X = np.stack([1.0 / N, 1.0 / N**2], axis=1) / se[:, None]
    coef, *_ = np.linalg.lstsq(X, g / se, rcond=None)
    cov = np.linalg.inv(X.T @ X)
    chi2 = float(np.sum((X @ coef - g / se) ** 2))
    return {
        "a_1overN": float(coef[0]),
        "a_error": float(np.sqrt(cov[0, 0])),
        "b_1overN2": float(coef[1]),
        "b_error": float(np.sqrt(cov[1, 1])),
        "chi2_series": chi2,
        "dof_series": int(N.size - 2),
    }


def write_sample_run(
    folder: str | Path,
    result: Any,
    data: PathData,
    model: PathsModel,
    task: MarkovTask,
    config: Any,
    theory: TheoryResult,
    sampled: Any,
    command: str,
) -> dict[str, Any]:
    """sample.json (diagnostics, U sampled / theory / z-scores, accuracy and loss), U_draws.csv and a figure."""
    from dotattn.paths import plotting
    from dotattn.paths.analysis import evaluate as _evaluate

    folder = Path(folder)
    ev, acc_err, loss_err = sampled
    th_ev = _evaluate(theory.U, data, model)
    order = summary_order(data, task.variant)
    mean, mcse = result.U_mean, result.U_mcse
    z = (mean - theory.U) / mcse
    params = {
        **sample_parameters(model, task, config),
        "method": getattr(result, "method", "weights"),
        "sampler_library": _library_versions(),
        "command": command,
    }
    prov = provenance(params, seconds=result.seconds)
    converged = result.rhat_max < 1.01 and result.divergences == 0 and result.ess_min >= 100
    s = {
        "parameters": prov["parameters"],
        "provenance": prov,
        "N": model.N,
        "paths": [data.path_names[i] for i in order],
        "status": CONVERGED if converged else "not_converged",
        "accuracy_sampled": ev.accuracy,
        "accuracy_error": acc_err,
        "loss_sampled": ev.loss,
        "loss_error": loss_err,
        "accuracy_theory": th_ev.accuracy,
        "loss_theory": th_ev.loss,
        "U_sampled": _reorder(mean, order),
        "U_mcse": _reorder(mcse, order),
        "U_theory": _reorder(theory.U, order),
        "U_zscores": _reorder(z, order),
        "U_sampled_code_order": mean,
        "theory_status": theory.status,
        "draws_total": int(result.U.shape[0] * result.U.shape[1]),
        "seconds": result.seconds,
        "diagnostics": result.diagnostics(),
        "convergence_rule": "converged when max split R-hat over U entries < 1.01, no divergences, min bulk ESS >= 100",
    }
    s["diagnostics"]["rhat_U"] = _reorder(result.rhat, order)
    s["diagnostics"]["ess_U"] = _reorder(result.ess, order)
    comment = "dotattn paths sample; provenance: " + json.dumps(prov, separators=(",", ":"))
    n = model.n_paths
    rows = []
    for c in range(result.U.shape[0]):
        for d in range(result.U.shape[1]):
            U = _reorder(result.U[c, d], order)
            rows.append({"chain": c, "draw": d, **{f"U_{i}_{j}": U[i, j] for i in range(n) for j in range(i, n)}})
    cols = ["chain", "draw"] + [f"U_{i}_{j}" for i in range(n) for j in range(i, n)]
    write_csv(folder / "U_draws.csv", rows, cols, comment=comment)
    write_json(folder / SAMPLE_FILE, s)
    save_figure(
        plotting.figure_sample(
            result.U[..., order, :][..., order], theory.U[np.ix_(order, order)], _reorder(z, order), s["paths"], model.N
        ),
        folder / "sample.png",
        {"command": command, "git_commit": prov["git_commit"]},
    )
    write_manifest(
        folder, (SAMPLE_FILE, "U_draws.csv", "sample.png"), prov["parameters"], command=command, provenance_record=prov
    )
    return s


def _library_versions() -> dict[str, str]:
    """The sampler's library versions, read from the installed packages' metadata (without importing JAX
    into this process: the sampler runs in a process of its own)."""
    from importlib.metadata import version

    return {"numpyro": version("numpyro"), "jax": version("jax"), "kernel": "NUTS", "dtype": "float64"}
