"""Theory against finite-size ERM: the theory at the ERM's (ω, α), and the table comparing them.

The theory is the informed branches followed along the ERM's α grid (:func:`theory_points`,
computed on the fly) or the records of a phase-diagram or earlier comparison output (read by
:mod:`dotattn.theory_vs_erm.output`, which also reads the ERM runs and writes every output). Overlaps are compared through invariants that do not depend on the
student's rotation gauge (Q → QU) or the teacher's (Q* → Q*R), so they mean the same for every
(L, r, r_t):

* ``m_norm`` = ‖μ_1‖ (the toy model's |m|),
* ``theta_norm`` = ‖θ‖_F / σ² (the semantic overlap of the normalised teacher),
* ``q_trace`` = Tr q / σ².

ERM runs are grouped by their informed initialisation and the branch they ended on (their
label in ``runs.csv``), and each group is compared with the theory's fixed point on that branch
(e.g. a student of rank 2 started on the positional direction that also learns the semantic
one is compared with the mixed fixed point); the table reports how many runs each group has. Plotting lives in
:mod:`dotattn.positional_semantic.plotting`; this module only assembles numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dotattn.core.rows import read_bool, read_float, read_int, read_text
from dotattn.erm.config import INFORMED
from dotattn.erm.records import RunRecord
from dotattn.positional_semantic.catalogue import default_quadrature
from dotattn.positional_semantic.phase_diagram import SweepSettings, branch_points
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.records import BranchPoint

__all__ = [
    "ErmRun",
    "ComparisonRow",
    "theory_points",
    "comparison_table",
    "overlap_invariants",
    "theory_curves",
    "finite_size_points",
    "linear_baseline_points",
    "COMPARE_COLUMNS",
    "COMPARED",
    "QUANTITIES",
    "DEFAULT_TOLERANCE",
    "NEAR_ZERO",
    "RELATIVE",
    "ABSOLUTE",
    "quantity_scales",
]

QUANTITIES = ("test_error", "train_loss", "m_norm", "theta_norm", "q_trace")
COMPARED = {
    "positional": ("test_error", "m_norm", "q_trace"),
    "semantic": ("test_error", "theta_norm", "q_trace"),
    "mixed": ("test_error", "m_norm", "theta_norm", "q_trace"),
}
"""What must agree on each branch: ε_g and the overlaps that are not zero on it."""
DEFAULT_TOLERANCE = 0.05
NEAR_ZERO = 1e-2
"""A theory value counts as ≈ 0 when |value| < NEAR_ZERO × the quantity's scale (the largest |value|
of that quantity over the converged theory points at the comparison's ω). Such a quantity is
compared by its absolute difference (``diff_kind`` "absolute", agreeing when |ERM − theory| <=
tolerance × scale); a relative difference against ≈ 0 would be meaningless."""
RELATIVE, ABSOLUTE = "relative", "absolute"
COMPARE_COLUMNS = (
    ["alpha", "init", "branch", "d", "erm_runs", "erm_runs_on_branch"]
    + [
        f"{p}{k}{s}"
        for k in QUANTITIES
        for p, s in (
            ("theory_", ""),
            ("erm_", "_mean"),
            ("erm_", "_std"),
            ("", "_rel_diff"),
            ("", "_abs_diff"),
            ("", "_diff_kind"),
        )
    ]
    + ["max_rel_diff", "agrees"]
)


@dataclass(frozen=True)
class ComparisonRow:
    """One row of the comparison table: an (α, informed init, branch the runs ended on) group.

    ``theory``, ``erm_mean``, ``erm_std``, ``rel_diff``, ``abs_diff`` (ERM mean − theory),
    ``diff_kind`` (:data:`RELATIVE`, or :data:`ABSOLUTE` where the theory is ≈ 0, see
    :data:`NEAR_ZERO`; rel_diff is NaN there): quantity (:data:`QUANTITIES`) -> value (std NaN
    for one run); ``max_rel_diff`` (over the relative ones, NaN if none) and ``agrees`` over the
    quantities :data:`COMPARED` on the branch.
    """

    alpha: float
    init: str
    branch: str
    d: int
    erm_runs: int
    erm_runs_on_branch: int
    theory: dict
    erm_mean: dict
    erm_std: dict
    rel_diff: dict
    max_rel_diff: float
    agrees: bool
    abs_diff: dict = field(default_factory=dict)
    diff_kind: dict = field(default_factory=dict)

    def max_rel_quantity(self) -> str | None:
        """The compared quantity whose relative difference is ``max_rel_diff`` (None if none is relative)."""
        rel = [
            k
            for k in COMPARED.get(self.branch, ())
            if self.diff_kind.get(k, RELATIVE) == RELATIVE and self.rel_diff[k] == self.rel_diff[k]
        ]
        return max(rel, key=lambda k: abs(self.rel_diff[k])) if rel else None

    def near_zero(self) -> list[str]:
        """The compared quantities whose theory value is ≈ 0 (compared by absolute difference)."""
        return [k for k in COMPARED.get(self.branch, ()) if self.diff_kind.get(k) == ABSOLUTE]

    def to_row(self) -> dict[str, Any]:
        """The flat row (columns :data:`COMPARE_COLUMNS`)."""
        row: dict[str, Any] = {
            "alpha": self.alpha,
            "init": self.init,
            "branch": self.branch,
            "d": self.d,
            "erm_runs": self.erm_runs,
            "erm_runs_on_branch": self.erm_runs_on_branch,
        }
        for k in QUANTITIES:
            row.update(
                {
                    f"theory_{k}": self.theory[k],
                    f"erm_{k}_mean": self.erm_mean[k],
                    f"erm_{k}_std": self.erm_std[k],
                    f"{k}_rel_diff": self.rel_diff[k],
                    f"{k}_abs_diff": self.abs_diff.get(k, self.erm_mean[k] - self.theory[k]),
                    f"{k}_diff_kind": self.diff_kind.get(k, RELATIVE),
                }
            )
        return {**row, "max_rel_diff": self.max_rel_diff, "agrees": self.agrees}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ComparisonRow:
        """Inverse of :meth:`to_row` (JSON or CSV cells; files written before ``abs_diff`` and
        ``diff_kind`` existed read as ERM mean − theory and "relative")."""
        q: dict[str, dict[str, Any]] = {
            name: {k: read_float(row[pat.format(k)]) for k in QUANTITIES}
            for name, pat in (
                ("theory", "theory_{}"),
                ("erm_mean", "erm_{}_mean"),
                ("erm_std", "erm_{}_std"),
                ("rel_diff", "{}_rel_diff"),
            )
        }
        q["abs_diff"] = {
            k: read_float(row[f"{k}_abs_diff"]) if f"{k}_abs_diff" in row else q["erm_mean"][k] - q["theory"][k]
            for k in QUANTITIES
        }
        q["diff_kind"] = {k: read_text(row.get(f"{k}_diff_kind") or RELATIVE) for k in QUANTITIES}
        return cls(
            alpha=read_float(row["alpha"]),
            init=read_text(row["init"]),
            branch=read_text(row["branch"]),
            d=read_int(row["d"]),
            erm_runs=read_int(row["erm_runs"]),
            erm_runs_on_branch=read_int(row["erm_runs_on_branch"]),
            **q,
            max_rel_diff=read_float(row["max_rel_diff"]),
            agrees=read_bool(row["agrees"]),
        )


@dataclass(frozen=True)
class ErmRun:
    """A train-erm output: its problem, d and runs (read by :func:`dotattn.theory_vs_erm.output.load_erm`)."""

    path: Path | None
    problem: Problem
    d: int
    runs: tuple[RunRecord, ...]

    @property
    def alphas(self) -> list[float]:
        return sorted({r.alpha for r in self.runs})


def theory_points(problem: Problem, alphas: list[float], settings: SweepSettings | None = None) -> list[BranchPoint]:
    """The informed branches followed along ``alphas`` at the problem's ω (computed now)."""
    settings = settings or SweepSettings(default_quadrature(problem))
    return branch_points(problem.to_dict(), problem.omega, sorted(alphas), settings.to_dict())


def overlap_invariants(q: np.ndarray, theta: np.ndarray, mu: np.ndarray, sigma: float) -> dict[str, float]:
    """Gauge-invariant overlaps of q (r×r), θ (r×r_t), μ (L×r): ``m_norm`` = ‖μ_1‖,
    ``theta_norm`` = ‖θ‖_F/σ², ``q_trace`` = Tr q/σ²."""
    s2 = sigma**2
    return {
        "m_norm": float(np.linalg.norm(np.asarray(mu, dtype=float)[0])),
        "theta_norm": float(np.linalg.norm(np.asarray(theta, dtype=float))) / s2,
        "q_trace": float(np.trace(np.asarray(q, dtype=float))) / s2,
    }


def _values(x: BranchPoint | RunRecord, sigma: float) -> dict[str, float]:
    """The compared quantities of a theory point or an ERM run (a converged point: it has its overlaps)."""
    if x.q is None or x.theta is None or x.mu is None:
        raise ValueError(f"the {x.branch} point at alpha = {x.alpha:g} has no overlaps (q, theta, mu)")
    return {"test_error": x.test_error, "train_loss": x.train_loss, **overlap_invariants(x.q, x.theta, x.mu, sigma)}


def comparison_table(
    erm: ErmRun, theory: Sequence[BranchPoint], tolerance: float = DEFAULT_TOLERANCE
) -> list[ComparisonRow]:
    """One row per (α, informed initialisation, branch the ERM runs ended on) with a converged
    theory point on that branch: theory value, ERM mean ± std over those runs, relative
    differences, and whether ε_g and the branch's overlaps (:data:`COMPARED`) all agree within
    ``tolerance``. Runs that ended on a branch the theory did not follow are counted in
    ``erm_runs`` only."""
    sigma = erm.problem.sigma
    th = {(round(p.alpha, 9), p.branch): p for p in theory if p.converged}
    scale = quantity_scales([_values(p, sigma) for p in th.values()])
    out = []
    for a in erm.alphas:
        for init in INFORMED[::-1]:  # positional, semantic
            started = [r for r in erm.runs if r.init == init and abs(r.alpha - a) < 1e-9]
            ended = sorted({r.branch for r in started}, key=lambda b: (b != init, b))
            for branch in ended:
                t = th.get((round(a, 9), branch))
                if t is None or branch not in COMPARED:
                    continue
                stayed = [_values(r, sigma) for r in started if r.branch == branch]
                out.append(
                    _compare_row(a, init, branch, erm.d, len(started), stayed, _values(t, sigma), tolerance, scale)
                )
    return out


def quantity_scales(values: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per quantity, the largest |value| over ``values`` (the theory points): the scale against which
    a theory value counts as ≈ 0 (:data:`NEAR_ZERO`)."""
    return {k: max((abs(v[k]) for v in values if np.isfinite(v[k])), default=0.0) for k in QUANTITIES}


def _compare_row(
    alpha: float,
    init: str,
    branch: str,
    d: int,
    n_started: int,
    runs: list[dict[str, float]],
    theory_vals: dict[str, float],
    tolerance: float,
    scale: dict[str, float],
) -> ComparisonRow:
    mean, std, rel, absd, kind = {}, {}, {}, {}, {}
    for k in QUANTITIES:
        vals = np.array([v[k] for v in runs])
        mean[k] = float(vals.mean())
        std[k] = float(vals.std(ddof=1)) if vals.size > 1 else float("nan")
        absd[k] = mean[k] - theory_vals[k]
        zero = abs(theory_vals[k]) < NEAR_ZERO * scale[k] or abs(theory_vals[k]) < 1e-12
        kind[k] = ABSOLUTE if zero else RELATIVE
        rel[k] = float("nan") if zero else absd[k] / abs(theory_vals[k])
    compared = COMPARED[branch]
    ok = [abs(rel[k]) <= tolerance if kind[k] == RELATIVE else abs(absd[k]) <= tolerance * scale[k] for k in compared]
    rels = [abs(rel[k]) for k in compared if kind[k] == RELATIVE]
    return ComparisonRow(
        alpha=alpha,
        init=init,
        branch=branch,
        d=d,
        erm_runs=n_started,
        erm_runs_on_branch=len(runs),
        theory={k: theory_vals[k] for k in QUANTITIES},
        erm_mean=mean,
        erm_std=std,
        rel_diff=rel,
        max_rel_diff=max(rels) if rels else float("nan"),
        agrees=all(ok),
        abs_diff=absd,
        diff_kind=kind,
    )


def theory_curves(theory: Sequence[BranchPoint], omega: float, sigma: float) -> dict[str, dict[str, np.ndarray]]:
    """Per branch, the converged theory points at ω sorted by α: arrays ``alpha``, ``test_error``,
    ``train_loss``, the invariants ``m_norm``, ``theta_norm``, ``q_trace`` and ``rs`` (the RS
    verdict of each point, :attr:`dotattn.positional_semantic.records.Stability.label`; "unknown" where the rows carry
    no stability) (for plotting)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for b in sorted({p.branch for p in theory}):
        pts = sorted(
            (p for p in theory if p.branch == b and p.converged and abs(p.omega - omega) < 1e-9), key=lambda p: p.alpha
        )
        if pts:
            vals = [_values(p, sigma) for p in pts]
            out[b] = {
                "alpha": np.array([p.alpha for p in pts]),
                **{k: np.array([v[k] for v in vals]) for k in QUANTITIES},
                "rs": np.array([p.stability.label if p.stability is not None else "unknown" for p in pts]),
            }
    return out


def _mean_std(x: Sequence[float]) -> tuple[float, float]:
    a = np.array(x, dtype=float)
    return float(a.mean()), (float(a.std(ddof=1)) if a.size > 1 else float("nan"))


def finite_size_points(runs: Sequence[ErmRun], alpha: float) -> list[dict[str, Any]]:
    """(branch = informed init, d, mean, std over seeds) of the ERM test error at ``alpha`` per run folder."""
    pts = []
    for run in runs:
        for init in INFORMED:
            vals = [r.test_error for r in run.runs if r.init == init and abs(r.alpha - alpha) < 1e-9]
            if vals:
                mean, std = _mean_std(vals)
                pts.append({"branch": init, "d": run.d, "mean": mean, "std": std})
    return pts


def linear_baseline_points(erm: ErmRun) -> list[dict[str, float]]:
    """(alpha, mean, std over seeds) of the ERM linear baseline's test error (one informed init's runs:
    the baseline does not depend on the init)."""
    out = []
    for a in erm.alphas:
        for init in INFORMED:
            vals = [r.linear_test_error for r in erm.runs if r.init == init and abs(r.alpha - a) < 1e-9]
            if vals:
                mean, std = _mean_std(vals)
                out.append({"alpha": a, "mean": mean, "std": std})
                break
    return out
