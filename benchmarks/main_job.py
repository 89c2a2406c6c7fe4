"""The main job's speed: the default phase diagram and ``solve`` against one reference fixed point.

One process, three timings, as a new user meets them (each through the public CLI, in this process):

1. **the reference fixed point** (the yardstick of the machine's speed at this moment): a plain
   state-evolution solver of the toy model written out below with numpy only (so that no change to
   dotattn's solver moves it): tensor Gauss–Hermite 10 per axis (10^4 nodes), the global prox (damped
   Newton from the five canonical starts) at every node on every iteration, the Stein form of the
   hats (SPEC section 3), the ridge channel's closed form, plain damping 0.5, tol 1e-8 on the relative
   change of (q, V, θ, μ), cold from the informed semantic start (q, m, V, θ) = (0.9, 0, 15, 0.35), at
   α = 2, ω = 0.3 (the default problem);
2. ``dotattn solve --alpha 2 --omega 0.3`` (catalogue of every start with RS stability);
3. ``dotattn phase-diagram --out TMP --quiet`` (the defaults: 10 ω × 25 α, refined α_c and α_lin,
   all cores), then the agreement of its summaries and records with the committed
   ``results/phase_diagram`` (:func:`dotattn.positional_semantic.output.disagreements`).

Printed and recorded: wall and CPU time of each, the two ratios (phase diagram / reference, reference
/ solve; targets ≤ 3 and ≥ 8), the phase diagram's CPU split by stage (summed over the columns from
their cache units; the rest of the workers' CPU is process start-up, imports and pickling; the parent's
is imports, the pool and figure writing), fixed points solved, the load average before and after,
and provenance. Writes ``benchmarks/results/main_job.json`` (``--out``).

Usage::

    python benchmarks/main_job.py                 # all three (minutes)
    python benchmarks/main_job.py --omega 0.3     # one column only (no committed check of the rest)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.special import expit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TARGET_PHASE_DIAGRAM, TARGET_SOLVE = 3.0, 8.0


def gh_rule(order, dim=4):
    x, w = hermegauss(order)
    w = w / w.sum()
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    weights = np.prod(np.meshgrid(*([w] * dim), indexing="ij"), axis=0)
    return np.stack([g.ravel() for g in grids], axis=1), weights.ravel()


def _objective(x1, x2, c1, c2, t1, t2, v, s2):
    ra = expit(x1 * (x1 - x2)) - t1
    rb = expit(x2 * (x2 - x1)) - t2
    return 0.5 * v * ((x1 - c1) ** 2 + (x2 - c2) ** 2) + s2 * (ra * ra + rb * rb)


def _newton(x1, x2, c1, c2, t1, t2, v, s2, max_iter=100, gtol=1e-11):
    """Damped Newton at every node (eigenvalue-floored Hessian, Armijo backtracking); a node stops
    when its gradient is below ``gtol``."""
    x1, x2 = x1.copy(), x2.copy()
    active = np.arange(len(x1))
    for _ in range(max_iter):
        y1, y2, d1, d2, u1, u2 = x1[active], x2[active], c1[active], c2[active], t1[active], t2[active]
        sa, sb = expit(y1 * (y1 - y2)), expit(y2 * (y2 - y1))
        ra, rb = sa - u1, sb - u2
        da, db = sa * (1 - sa), sb * (1 - sb)
        ga, gb = 2 * s2 * ra * da, 2 * s2 * rb * db
        a1, a2, b1, b2 = 2 * y1 - y2, -y1, -y2, 2 * y2 - y1
        g = np.stack([v * (y1 - d1) + ga * a1 + gb * b1, v * (y2 - d2) + ga * a2 + gb * b2], axis=1)
        keep = np.max(np.abs(g), axis=1) >= gtol
        if not np.any(keep):
            break
        active, g = active[keep], g[keep]
        y1, y2, d1, d2, u1, u2 = (z[keep] for z in (y1, y2, d1, d2, u1, u2))
        sa, sb, ra, rb, da, db, ga, gb, a1, a2, b1, b2 = (
            z[keep] for z in (sa, sb, ra, rb, da, db, ga, gb, a1, a2, b1, b2)
        )
        haa = 2 * s2 * (da * da + ra * da * (1 - 2 * sa))
        hbb = 2 * s2 * (db * db + rb * db * (1 - 2 * sb))
        H = np.empty((len(y1), 2, 2))
        H[:, 0, 0] = haa * a1 * a1 + hbb * b1 * b1 + 2 * ga + v
        H[:, 1, 1] = haa * a2 * a2 + hbb * b2 * b2 + 2 * gb + v
        H[:, 0, 1] = H[:, 1, 0] = haa * a1 * a2 + hbb * b1 * b2 - ga - gb
        lam, U = np.linalg.eigh(H)
        lam = np.maximum(np.abs(lam), 1e-8)
        p = -np.einsum("nij,nj->ni", U / lam[:, None, :], np.einsum("nji,nj->ni", U, g))
        f0 = _objective(y1, y2, d1, d2, u1, u2, v, s2)
        slope = np.sum(g * p, axis=1)
        t = np.ones_like(y1)
        todo = np.arange(len(y1))
        for _ in range(60):
            f1 = _objective(
                y1[todo] + t[todo] * p[todo, 0],
                y2[todo] + t[todo] * p[todo, 1],
                d1[todo],
                d2[todo],
                u1[todo],
                u2[todo],
                v,
                s2,
            )
            bad = f1 > f0[todo] + 1e-4 * t[todo] * slope[todo]
            todo = todo[bad]
            if todo.size == 0:
                break
            t[todo] *= 0.5
        stalled = t < 2.0**-50
        x1[active] = y1 + np.where(stalled, 0.0, t * p[:, 0])
        x2[active] = y2 + np.where(stalled, 0.0, t * p[:, 1])
        active = active[~stalled]
    return x1, x2


def prox(c1, c2, t1, t2, v, s2):
    """Global prox at every node: Newton from the five canonical starts c, 0, -c, swap(c), -swap(c);
    the lowest value kept."""
    starts = [(c1, c2), (0 * c1, 0 * c2), (-c1, -c2), (c2, c1), (-c2, -c1)]
    best_h = best_v = None
    for s1, s2_ in starts:
        x1, x2 = _newton(s1, s2_, c1, c2, t1, t2, v, s2)
        val = _objective(x1, x2, c1, c2, t1, t2, v, s2)
        if best_v is None:
            best_h, best_v = (x1, x2), val
        else:
            better = val < best_v
            best_h = (np.where(better, x1, best_h[0]), np.where(better, x2, best_h[1]))
            best_v = np.where(better, val, best_v)
    return best_h, best_v


def reference_fixed_point(
    alpha=2.0,
    omega=0.3,
    sigma=0.5,
    ridge=0.01,
    A=((0.6, 0.4), (0.4, 0.6)),
    G=None,
    order=10,
    tol=1e-8,
    damping=0.5,
    max_iter=2000,
    init=(0.9, 0.0, 15.0, 0.35),
):
    """Damped state evolution (Stein hats, every prox global) from an informed start, cold."""
    t0 = time.process_time()
    A = np.asarray(A)
    G = np.eye(2) if G is None else np.asarray(G)
    s2 = sigma**2
    nodes, w = gh_rule(order)
    xi, eta = nodes[:, :2], nodes[:, 2:]
    q, m, V, th = init
    x = np.array([q, V, th, m, -m])  # (q, V, theta, mu_1, mu_2)
    for it in range(1, max_iter + 1):
        q, V, th, mu = x[0], x[1], x[2], x[3:]
        C, B = np.sqrt(q), th / np.sqrt(q)
        D = np.sqrt(s2 - B * B)
        c = mu[None, :] + C * xi
        hs = B * xi + D * eta
        t1 = (1 - omega) * expit(hs[:, 0] * (hs[:, 0] - hs[:, 1])) + omega * A[0, 0]
        t2 = (1 - omega) * expit(hs[:, 1] * (hs[:, 1] - hs[:, 0])) + omega * A[1, 1]
        (h1, h2), M = prox(c[:, 0], c[:, 1], t1, t2, 1.0 / V, s2)
        f = np.stack([h1 - c[:, 0], h2 - c[:, 1]], axis=1) / V
        q_hat = alpha * w @ np.sum(f * f, axis=1)
        mu_hat = alpha * w @ f
        th_hat = alpha * w @ np.sum(f * eta, axis=1) / D
        V_hat = -alpha * w @ np.sum(f * xi, axis=1) / np.sqrt(q) + th * th_hat / q
        K = ridge + s2 * V_hat
        X = s2 * q_hat + s2**2 * th_hat**2 + mu_hat @ G @ mu_hat
        new = np.concatenate([[s2 * X / K**2, s2 / K, s2**2 * th_hat / K], (G @ mu_hat) / K])
        change = np.max(np.abs(new - x) / np.maximum(1.0, np.abs(new)))
        if change < tol:
            phi = 0.5 * V_hat * q - 0.5 * q_hat * V - mu @ mu_hat - th * th_hat + 0.5 * X / K - alpha * (w @ M)
            return {
                "q": q,
                "V": V,
                "theta": th,
                "mu": mu.tolist(),
                "train_loss": -phi,
                "iterations": it,
                "cpu_seconds": time.process_time() - t0,
            }
        x = damping * x + (1 - damping) * new
    raise RuntimeError("reference fixed point: no convergence")


def _cpu() -> tuple[float, float]:
    """(this process, its waited-for children) CPU seconds, user + system."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def _timed(fn):
    """(result, wall s, CPU s of this process, CPU s of children) of fn()."""
    w0, (s0, c0) = time.perf_counter(), _cpu()
    out = fn()
    w1, (s1, c1) = time.perf_counter(), _cpu()
    return out, w1 - w0, s1 - s0, c1 - c0


def _cli(args: list[str]) -> str:
    """Run ``dotattn ARGS`` in this process; its stdout (stderr passes through)."""
    from dotattn.cli.main import cli

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            cli.main(args=args, prog_name="dotattn", standalone_mode=False)
        except SystemExit as exc:
            if exc.code:
                raise
    return buf.getvalue()


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--omega", default=None, help="comma list of omega (default: the default grid)")
    ap.add_argument("--workers", type=int, default=None, help="phase-diagram workers (default: all cores)")
    ap.add_argument("--out", default=str(HERE / "results" / "main_job.json"))
    args = ap.parse_args()
    from dotattn.core.io import provenance, read_checked_json, write_json
    from dotattn.positional_semantic import compiled
    from dotattn.positional_semantic import output as ps_output
    from dotattn.positional_semantic.output import disagreements

    kernel = "vectorised numpy"
    if compiled.AVAILABLE:
        import numba

        kernel = f"compiled (numba {numba.__version__})"
    print(f"prox Newton kernel of the toy model: {kernel}")
    load_before = load_average()
    ref, ref_wall, ref_cpu, _ = _timed(reference_fixed_point)
    print(
        f"reference fixed point: {ref_wall:.2f} s wall, {ref_cpu:.2f} s CPU, {ref['iterations']} iterations, "
        f"e_t = {ref['train_loss']:.9f}"
    )
    from dotattn.positional_semantic.overlaps import overlaps_from_scalars
    from dotattn.positional_semantic.problem import Problem
    from dotattn.positional_semantic.quadrature import gauss_hermite
    from dotattn.positional_semantic.state_evolution import SolverOptions, iterate

    problem = Problem(omega=0.3)
    same = iterate(
        problem,
        2.0,
        overlaps_from_scalars(problem, 0.9, 0.0, 15.0, 0.35),
        gauss_hermite(4, 10),
        SolverOptions(hat_form="stein", symmetry=False),
    )
    ref_check = {
        "dotattn_train_loss": same.train_loss,
        "difference": ref["train_loss"] - same.train_loss,
        "dotattn_V": float(same.overlaps.V[0, 0]),
        "V_difference": ref["V"] - float(same.overlaps.V[0, 0]),
    }
    print(
        f"  the same fixed point by dotattn (same rule, Stein hats): e_t differs by {ref_check['difference']:.1e}, "
        f"V by {ref_check['V_difference']:.1e}"
    )
    text, solve_wall, solve_cpu, _ = _timed(lambda: _cli(["solve", "--alpha", "2", "--omega", "0.3"]))
    print(f"dotattn solve --alpha 2 --omega 0.3: {solve_wall:.2f} s wall, {solve_cpu:.2f} s CPU")

    figures = {"cpu": 0.0, "wall": 0.0}
    write = ps_output.write_phase_diagram

    def timed_write(*a, **k):
        out, wall, cpu, _ = _timed(lambda: write(*a, **k))
        figures.update(cpu=cpu, wall=wall)
        return out

    ps_output.write_phase_diagram = timed_write
    with tempfile.TemporaryDirectory() as tmp:
        pd_args = ["phase-diagram", "--out", tmp, "--quiet"]
        if args.omega:
            pd_args += ["--omega", args.omega]
        if args.workers:
            pd_args += ["--workers", str(args.workers)]
        _, pd_wall, pd_cpu_self, pd_cpu_children = _timed(lambda: _cli(pd_args))
        units = [read_checked_json(p)[0]["result"] for p in sorted(Path(tmp, "cache").glob("omega_*.json"))]
        from dotattn.positional_semantic.output import read_phase_diagram, read_phase_summaries

        found = disagreements(read_phase_summaries(tmp), read_phase_diagram(tmp), ROOT / "results" / "phase_diagram")
    ps_output.write_phase_diagram = write
    stages: dict[str, float] = {}
    for u in units:
        for k, v in (u.get("cpu_seconds") or {}).items():
            stages[k] = stages.get(k, 0.0) + v
    columns_cpu = sum(stages.values())
    pd_cpu = pd_cpu_self + pd_cpu_children
    in_parent = pd_cpu_children < 0.5 * columns_cpu  # one worker: the columns ran in this process
    if not in_parent:
        stages["start-up, imports, pickling (workers)"] = pd_cpu_children - columns_cpu
    stages["figures and files (parent)"] = figures["cpu"]
    stages["parent: imports, pool, progress"] = pd_cpu_self - figures["cpu"] - (columns_cpu if in_parent else 0.0)
    fixed_points = sum(int(u.get("fixed_points", 0)) for u in units)
    ratio_pd, ratio_solve = pd_wall / ref_wall, ref_wall / solve_wall
    load_after = load_average()
    print(
        f"dotattn {' '.join(pd_args[:1])} ({len(units)} columns, {fixed_points} fixed points): {pd_wall:.1f} s wall, "
        f"{pd_cpu:.1f} s CPU (workers {pd_cpu_children:.1f}, parent {pd_cpu_self:.1f})"
    )
    print("  CPU by stage: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(stages.items(), key=lambda kv: -kv[1])))
    print(
        f"phase diagram / reference fixed point: {ratio_pd:.2f} (target <= {TARGET_PHASE_DIAGRAM:g}); "
        f"reference / solve: {ratio_solve:.2f} (target >= {TARGET_SOLVE:g}); CPU ratios "
        f"{pd_cpu / ref_cpu:.2f} and {ref_cpu / solve_cpu:.2f}"
    )
    print(f"load average before {load_before}, after {load_after} on {os.cpu_count()} cores")
    print(
        "committed results/phase_diagram: "
        + (
            "agrees (every checked quantity within its tolerance)"
            if not found
            else f"{len(found)} disagreements:\n  " + "\n  ".join(found[:40])
        )
    )
    result = {
        "reference": {
            **{k: v for k, v in ref.items() if k != "cpu_seconds"},
            "wall_seconds": ref_wall,
            "cpu_seconds": ref_cpu,
            "check": ref_check,
        },
        "solve": {
            "command": "dotattn solve --alpha 2 --omega 0.3",
            "wall_seconds": solve_wall,
            "cpu_seconds": solve_cpu,
        },
        "phase_diagram": {
            "command": "dotattn " + " ".join(pd_args),
            "columns": len(units),
            "fixed_points": fixed_points,
            "wall_seconds": pd_wall,
            "cpu_seconds": pd_cpu,
            "cpu_seconds_by_stage": stages,
            "column_seconds": {str(u["omega"]): u["summary"]["seconds"] for u in units},
        },
        "ratios": {
            "phase_diagram_over_reference": ratio_pd,
            "reference_over_solve": ratio_solve,
            "targets": {
                "phase_diagram_over_reference": f"<= {TARGET_PHASE_DIAGRAM:g}",
                "reference_over_solve": f">= {TARGET_SOLVE:g}",
            },
        },
        "committed_agreement": {"disagreements": found, "agrees": not found},
        "kernel": kernel,
        "load_average": {"before": load_before, "after": load_after, "cores": os.cpu_count()},
        **provenance({"command": "python benchmarks/main_job.py " + " ".join(sys.argv[1:])}),
    }
    write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
