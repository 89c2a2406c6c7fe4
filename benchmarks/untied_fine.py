"""Tables of the untied ω = 0.3 study with its fine grid (results/variants/untied_omega0.3_fine), by the rule of
its README: the primary estimator (E1) on the committed grid, the secondary (E2: only points where the two
starts ended on different branches) on the whole grid, their 1/d fits and verdicts, the check that the runs on
the committed grid are those of results/variants/untied_d500_2000, and the seeds with several sign changes.

Usage: python benchmarks/untied_fine.py [STUDY] [COMMITTED] [THEORY] (defaults: the committed folders).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from scipy.stats import chi2 as chi2_dist

from dotattn.core.integrity import read_verified_json
from dotattn.core.status import STATUS_CONVERGED
from dotattn.theory_vs_erm.alpha_c import CellRuns, cell_crossings
from dotattn.theory_vs_erm.alpha_c_starts import branch_grid
from dotattn.theory_vs_erm.crossing import fit_finite_size, summarise_cell
from dotattn.theory_vs_erm.output import read_alpha_c_part

OMEGA = 0.3
STUDY = "results/variants/untied_omega0.3_fine/d500_2000"
COMMITTED = "results/variants/untied_d500_2000"
THEORY = "results/variants/theory_untied"
P_MIN = 0.01  # the rule's acceptable-fit threshold (χ² p-value)
REPRO_RTOL = 1e-10  # the rule's reproduction tolerance on e_t (runs batched with other α values)


def _theory(folder: str) -> tuple[float, float]:
    col = next(c for c in read_verified_json(Path(folder) / "summary.json")["omegas"] if abs(c["omega"] - OMEGA) < 1e-9)
    return float(col["alpha_c"]), float(col["alpha_c_error"])


def _estimate(name: str, cells: list[CellRuns], by_branch: bool, theory: float, level: float, n_boot: int) -> dict:
    rows, per_d, ds = [], [], []
    for c in cells:
        xs = cell_crossings(c, STATUS_CONVERGED, by_branch=by_branch)
        s = summarise_cell(c.omega, c.d, xs, level=level, n_boot=n_boot)
        rows.append(s)
        per_d.append(np.array([x.alpha_c for x in xs]))
        ds.append(c.d)
    fit = fit_finite_size(ds, per_d, "1/d", level, n_boot)
    p = float(chi2_dist.sf(fit.chi2, fit.dof)) if fit.dof > 0 else math.nan
    last = rows[-1]
    inside = fit.ci_lo <= theory <= fit.ci_hi
    side = np.sign(fit.alpha_inf - theory)
    far = (last.alpha_c - theory) * side > 2 * last.se
    verdict = (
        "confirmed" if p >= P_MIN and inside else "refuted" if p >= P_MIN and not inside and far else "not decided"
    )
    print(f"\n### {name}\n")
    print("| d | seeds | crossings | no crossing | several | α_c ± se | 95 % interval |")
    print("|---|---|---|---|---|---|---|")
    for s in rows:
        print(
            f"| {s.d} | {s.seeds} | {s.crossings} | {s.no_crossing} | {s.several} | {s.alpha_c:.3f} ± {s.se:.3f} "
            f"| [{s.ci_lo:.3f}, {s.ci_hi:.3f}] |"
        )
    print(
        f"\n1/d fit: α_c(∞) = {fit.alpha_inf:.3f} [{fit.ci_lo:.3f}, {fit.ci_hi:.3f}], slope {fit.slope:.1f}, "
        f"χ² = {fit.chi2:.2f} ({fit.dof} dof, p = {p:.3f}); theory {theory:.4f} "
        f"{'inside' if inside else 'outside'}; d = {last.d} mean {(last.alpha_c - theory) / last.se:+.1f} se from "
        f"it. **Verdict: {verdict}.**"
    )
    return {"fit": fit, "p": p, "verdict": verdict, "rows": rows}


def _reproduction(new: list[CellRuns], old: list[CellRuns], grid: tuple[float, ...]) -> None:
    print("\n### Reproduction of the committed runs on the committed grid\n")
    print("| d | seeds | max relative difference of e_t | statuses, same_minimum | E1 crossings |")
    print("|---|---|---|---|---|")
    for c in new:
        o = next((x for x in old if x.omega == c.omega and x.d == c.d), None)
        if o is None:
            print(f"| {c.d} | {len(c.seeds)} | not in the committed study | | |")
            continue
        sub = c.on_alphas(grid)
        assert sub.seeds == o.seeds and len(sub.alphas) == len(o.alphas)
        rel = max(
            float(np.max(np.abs(sub.et_sem - o.et_sem) / np.abs(o.et_sem))),
            float(np.max(np.abs(sub.et_pos - o.et_pos) / np.abs(o.et_pos))),
        )
        flags = (
            np.array_equal(sub.status_sem, o.status_sem)
            and np.array_equal(sub.status_pos, o.status_pos)
            and np.array_equal(sub.same, o.same)
        )
        xa, xb = cell_crossings(sub, STATUS_CONVERGED), cell_crossings(o, STATUS_CONVERGED)
        same_x = sum(
            a.outcome == b.outcome
            and a.changes == b.changes
            and (
                a.alpha_c == b.alpha_c
                or abs(a.alpha_c - b.alpha_c) < 1e-9
                or (np.isnan(a.alpha_c) and np.isnan(b.alpha_c))
            )
            for a, b in zip(xa, xb, strict=True)
        )
        ok = rel <= REPRO_RTOL and flags and same_x == len(xa)
        print(
            f"| {c.d} | {len(c.seeds)} | {rel:.1e}{'' if rel <= REPRO_RTOL else ' (FAILS)'} | "
            f"{'identical' if flags else 'DIFFER'} | {same_x} of {len(xa)} equal{'' if ok else ' (FAILS)'} |"
        )


def _overlaps(c: CellRuns) -> dict:
    out = {}
    for r in c.starts or ():
        th = float(np.linalg.norm(np.asarray(_m(r["theta_over_sigma2"]))))
        out[(int(r["seed"]), round(float(r["alpha"]), 9), r["init"])] = (float(r["m"]), th)
    return out


def _m(x):
    import json

    return json.loads(x) if isinstance(x, str) else x


def _diagnose(cells: list[CellRuns], grid: tuple[float, ...]) -> None:
    print("\n### Seeds with several sign changes\n")
    print(
        "Per seed: E1's changes on the committed grid / the whole grid; then, at every α up to the E2 crossing's "
        "upper point, the branch labels (sem start / pos start; P positional, S semantic, N none, M mixed), "
        "m and ‖θ‖/σ² of both starts, and Δe_t.\n"
    )
    short = {"positional": "P", "semantic": "S", "none": "N", "mixed": "M"}
    for c in cells:
        coarse = {x.seed: x for x in cell_crossings(c.on_alphas(grid), STATUS_CONVERGED)}
        fine = {x.seed: x for x in cell_crossings(c, STATUS_CONVERGED)}
        second = {x.seed: x for x in cell_crossings(c, STATUS_CONVERGED, by_branch=True)}
        lab_s, lab_p = branch_grid(c.starts or (), c.seeds, c.alphas)
        ov = _overlaps(c)
        multi = [s for s in c.seeds if coarse[s].changes > 1 or fine[s].changes > 1]
        print(f"\n**d = {c.d}: {len(multi)} of {len(c.seeds)} seeds** with several changes.\n")
        if not multi:
            continue
        print(
            "| seed | changes coarse / fine (fine, between same-branch points) | E1 α_c coarse / fine | E2 α_c "
            "| labels up to E2 (α: sem/pos, = same minimum) | label changes of each start |"
        )
        print("|---|---|---|---|---|---|")
        valid = c.valid(STATUS_CONVERGED)
        for s in multi:
            k = c.seeds.index(s)
            hi = second[s].hi if np.isfinite(second[s].hi) else c.alphas[-1]
            cols = [j for j, a in enumerate(c.alphas) if a <= hi + 1e-9]
            labs = " ".join(
                f"{c.alphas[j]:g}:{short.get(lab_s[k, j], '?')}/{short.get(lab_p[k, j], '?')}"
                + ("=" if c.same[k, j] else "")
                for j in cols
            )
            pts = [j for j in range(len(c.alphas)) if valid[k, j]]
            same_branch = sum(
                bool((c.delta[k, i] > 0) != (c.delta[k, j] > 0))
                and lab_s[k, i] == lab_p[k, i]
                and lab_s[k, j] == lab_p[k, j]
                for i, j in zip(pts[:-1], pts[1:], strict=True)
            )
            jumps = []
            for name, lab in (("sem", lab_s), ("pos", lab_p)):
                ch = [
                    f"{short.get(lab[k, j - 1], '?')}→{short.get(lab[k, j], '?')}@{c.alphas[j]:g}"
                    for j in range(1, len(c.alphas))
                    if lab[k, j] != lab[k, j - 1]
                ]
                jumps.append(f"{name}: {', '.join(ch) if ch else 'none'}")
            print(
                f"| {s} | {coarse[s].changes} / {fine[s].changes} ({same_branch}) | "
                f"{coarse[s].alpha_c:.3f} / {fine[s].alpha_c:.3f} | {second[s].alpha_c:.3f} | {labs} | "
                f"{'; '.join(jumps)} |"
            )
        print("\nOverlaps (m, ‖θ‖/σ²) of the semantic start | of the positional start, and Δe_t, at the E1 points:\n")
        for s in multi:
            k = c.seeds.index(s)
            hi = second[s].hi if np.isfinite(second[s].hi) else c.alphas[-1]
            parts = []
            for j, a in enumerate(c.alphas):
                if a > hi + 1e-9:
                    break
                ms, ts = ov[(s, round(a, 9), "semantic")]
                mp, tp = ov[(s, round(a, 9), "positional")]
                parts.append(f"{a:g}: ({ms:.3f}, {ts:.3f}) | ({mp:.3f}, {tp:.3f}), Δ = {c.delta[k, j]:.1e}")
            print(f"* seed {s}: " + "; ".join(parts))


def main(argv: list[str]) -> None:
    study = argv[0] if argv else STUDY
    committed = argv[1] if len(argv) > 1 else COMMITTED
    theory, theory_se = _theory(argv[2] if len(argv) > 2 else THEORY)
    part = read_alpha_c_part(study)
    old = [c for c in read_alpha_c_part(committed).cells if abs(c.omega - OMEGA) < 1e-9]
    cells = sorted((c for c in part.cells if abs(c.omega - OMEGA) < 1e-9), key=lambda c: c.d)
    grid = old[0].alphas
    level, n_boot = part.config.level, part.config.n_boot
    print(f"Theory α_c = {theory:.4f} ± {theory_se:.4f} ({THEORY}). Committed grid: {len(grid)} points.")
    _estimate(
        "E1 (primary): the committed estimator on the committed grid",
        [c.on_alphas(grid) for c in cells],
        False,
        theory,
        level,
        n_boot,
    )
    _estimate("E2 (secondary): different branches, whole grid", cells, True, theory, level, n_boot)
    _estimate("E1's estimator on the whole grid (reported, not in the verdict)", cells, False, theory, level, n_boot)
    _reproduction(cells, old, grid)
    _diagnose(cells, grid)


if __name__ == "__main__":
    main(sys.argv[1:])
