"""Benchmark of converged fixed points and full catalogues (SPEC sections 3, 4 and 7).

At omega = 0.3 and alpha in {2, 1.25}, on the default rule (GH k = 12, coarse k = 6), tol 1e-8:

* per informed branch (positional, semantic):
  - ``solve(problem, alpha, inits=[(branch, informed init)], n_random=0)``: the public path,
    coarse-then-fine (the coarse and fine legs are also timed separately with ``iterate``);
  - ``iterate(problem, alpha, informed init, fine rule)``: straight on the fine rule;
* the full catalogue ``solve(problem, alpha)`` (informed, uninformative and 8 random starts),
  with every ``iterate`` call it makes logged (rule, iterations, seconds).

Targets: <= 2 s per fixed point, <= 10 s per catalogue. The reference approach (the authors'
solver) runs a general-purpose minimiser once per node per hat: a fixed point costs about
30 iterations x 4 hats x 20,736 nodes x (time per node), with the time per node re-measured
here exactly as in ``benchmarks/prox.py`` (scipy BFGS with analytic gradient, the fastest
reference variant, so the speed-up is a conservative one).

Usage::

    python benchmarks/fixed_point.py           # 3 repeats per branch, 1 catalogue per alpha (1.5-2.5 min)
    python benchmarks/fixed_point.py --quick   # alpha = 2 only, 1 repeat (20-45 s)

Writes ``benchmarks/results/fixed_point.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time
from pathlib import Path

import numpy as np

import dotattn.positional_semantic.catalogue as catalogue_module
from dotattn.core.io import provenance, write_json
from dotattn.positional_semantic.catalogue import QuadratureSpec, default_quadrature, initialisations, solve
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FP_TARGET_S, CATALOGUE_TARGET_S = 2.0, 10.0
REFERENCE_ITERATIONS = 30


def _bench_prox():
    """benchmarks/prox.py as a module (for the reference per-node timing)."""
    spec = importlib.util.spec_from_file_location("dotattn_bench_prox", HERE / "prox.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _fp_row(fp) -> dict:
    o = fp.overlaps
    return {
        "status": fp.status,
        "iterations": fp.iterations,
        "seconds": fp.seconds,
        "train_loss": fp.train_loss,
        "test_error": fp.test_error,
        "q": float(o.q[0, 0]),
        "m": float(o.m),
        "theta": float(o.theta[0, 0]),
        "V": float(o.V[0, 0]),
    }


def bench_branch(
    problem: Problem, alpha: float, branch: str, init, quad: QuadratureSpec, options: SolverOptions, repeats: int
) -> dict:
    D = problem.gaussian_dim
    rule, coarse = quad.rule(D), quad.coarse_rule(D)
    out: dict = {"alpha": alpha, "branch": branch}
    # public path
    times, cpu, cat = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        cat = solve(problem, alpha, quadrature=quad, n_random=0, options=options, inits=[(branch, init)])
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    e = cat.fixed_points[0]
    out["solve"] = {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "cpu_median_s": statistics.median(cpu),
        "repeats": repeats,
        "label": e.branch,
        **_fp_row(e.result),
    }
    # the same scheme, leg by leg
    legs = {"coarse": [], "fine": []}
    for _ in range(repeats):
        c = iterate(problem, alpha, init, coarse, options)
        f = iterate(problem, alpha, c.overlaps, rule, options)
        legs["coarse"].append(c)
        legs["fine"].append(f)
    for leg, fps in legs.items():
        s = [fp.seconds for fp in fps]
        out[f"{leg}_leg"] = {
            "median_s": statistics.median(s),
            "min_s": min(s),
            "nodes": (coarse if leg == "coarse" else rule).size,
            **{k: v for k, v in _fp_row(fps[-1]).items() if k != "seconds"},
        }
    # straight on the fine rule
    direct = [iterate(problem, alpha, init, rule, options) for _ in range(repeats)]
    s = [fp.seconds for fp in direct]
    out["direct_fine"] = {
        "median_s": statistics.median(s),
        "min_s": min(s),
        **{k: v for k, v in _fp_row(direct[-1]).items() if k != "seconds"},
    }
    return out


def bench_catalogue(
    problem: Problem, alpha: float, quad: QuadratureSpec, options: SolverOptions, n_random: int
) -> dict:
    log: list[dict] = []
    original = catalogue_module.iterate

    def logged(problem_, alpha_, init_, rule_, options_=options, warm=None):
        fp = original(problem_, alpha_, init_, rule_, options_, warm)
        log.append(
            {
                "nodes": rule_.size,
                "status": fp.status,
                "iterations": fp.iterations,
                "seconds": fp.seconds,
                "train_loss": fp.train_loss,
            }
        )
        return fp

    catalogue_module.iterate = logged  # instrumentation only; restored below
    try:
        t, c = time.perf_counter(), time.process_time()
        cat = solve(problem, alpha, quadrature=quad, n_random=n_random, options=options)
        wall = time.perf_counter() - t
        cpu = time.process_time() - c
    finally:
        catalogue_module.iterate = original
    fine_nodes = quad.rule(problem.gaussian_dim).size
    coarse_calls = [c for c in log if c["nodes"] != fine_nodes]
    fine_calls = [c for c in log if c["nodes"] == fine_nodes]
    return {
        "alpha": alpha,
        "n_random": n_random,
        "wall_s": wall,
        "cpu_s": cpu,
        "catalogue_seconds": cat.seconds,
        "coarse_calls": len(coarse_calls),
        "coarse_s": sum(c["seconds"] for c in coarse_calls),
        "coarse_iterations": sum(c["iterations"] for c in coarse_calls),
        "fine_calls": len(fine_calls),
        "fine_s": sum(c["seconds"] for c in fine_calls),
        "fine_iterations": sum(c["iterations"] for c in fine_calls),
        "fine_call_log": fine_calls,
        "entries": [
            {"init": e.init, "branch": e.branch, "selected": e.selected, **_fp_row(e.result)} for e in cat.fixed_points
        ],
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="alpha = 2 only, 1 repeat")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per branch (default 3; 1 with --quick)")
    ap.add_argument("--alphas", default=None, help="comma-separated (default 2,1.25; 2 with --quick)")
    ap.add_argument("--n-random", type=int, default=8, help="random starts of the catalogue (default 8)")
    ap.add_argument("--ref-nodes", type=int, default=500, help="nodes per state for the per-node reference timing")
    ap.add_argument("--out", default=str(RESULTS / "fixed_point.json"))
    args = ap.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    alphas = [float(a) for a in args.alphas.split(",")] if args.alphas else ([2.0] if args.quick else [2.0, 1.25])

    t_start = time.perf_counter()
    load_before = load_average()
    problem = Problem(omega=0.3)
    quad = default_quadrature(problem)
    options = SolverOptions(tol=1e-8)
    fine_nodes = quad.rule(problem.gaussian_dim).size
    inits = dict(initialisations(problem, 0))
    solve(
        problem,
        2.0,
        quadrature=QuadratureSpec("gauss-hermite", 4, None),
        n_random=0,
        inits=[("semantic", inits["semantic"])],
    )  # warm-up (imports, baseline cache)

    branches = [
        bench_branch(problem, a, b, inits[b], quad, options, repeats)
        for a in alphas
        for b in ("positional", "semantic")
    ]
    catalogues = [bench_catalogue(problem, a, quad, options, args.n_random) for a in alphas]

    bp = _bench_prox()
    ref = bp.reference_per_node(problem, args.ref_nodes, ("BFGS+jac",), quad.order)
    per_node = ref["BFGS+jac"]["per_node_s"]
    ref_iteration = per_node * fine_nodes * bp.N_HATS
    ref_fp = REFERENCE_ITERATIONS * ref_iteration
    load_after = load_average()
    seconds = time.perf_counter() - t_start

    # ---------------------------------------------------------------- tables
    print(
        f"dotattn fixed-point benchmark: omega=0.3, tol {options.tol:g}, rule GH k={quad.order} ({fine_nodes:,} nodes) "
        f"after coarse k={quad.coarse_order}; {repeats} repeats; load average before/after {load_before} / {load_after} "
        f"on {os.cpu_count()} cpus"
    )
    print()
    hdr = (
        f"{'alpha':>5} {'branch':<11}{'solve (c+f)':>12}{'min':>7}{'cpu':>7}{'coarse it/s':>14}{'fine it/s':>14}"
        f"{'direct it/s':>15}   {'e_t':>10} {'eps_g':>10}  target"
    )
    print(hdr)
    print("-" * len(hdr))
    for b in branches:
        s, c, f, d = b["solve"], b["coarse_leg"], b["fine_leg"], b["direct_fine"]
        print(
            f"{b['alpha']:>5g} {b['branch']:<11}{s['median_s']:>10.2f} s{s['min_s']:>6.2f}s{s['cpu_median_s']:>6.2f}s"
            f"{c['iterations']:>7d}/{c['median_s']:>5.2f}s{f['iterations']:>7d}/{f['median_s']:>5.2f}s"
            f"{d['iterations']:>8d}/{d['median_s']:>5.2f}s   {s['train_loss']:.8f} {s['test_error']:.8f}  "
            f"{'yes' if s['median_s'] <= FP_TARGET_S else 'NO'} (<= {FP_TARGET_S:g} s)"
        )
    print(
        "(solve = coarse-then-fine public path, wall median and min, cpu = process time; coarse/fine = the two legs "
        "run separately, direct = iterate from the informed init on the fine rule only)"
    )
    print()
    for c in catalogues:
        print(
            f"catalogue alpha={c['alpha']:g} ({3 + c['n_random']} starts): {c['wall_s']:.1f} s wall, {c['cpu_s']:.1f} s cpu "
            f"({'yes' if c['wall_s'] <= CATALOGUE_TARGET_S else 'NO'}, target <= {CATALOGUE_TARGET_S:g} s); "
            f"coarse pass {c['coarse_calls']} runs / {c['coarse_iterations']} iterations / {c['coarse_s']:.1f} s, "
            f"fine pass {c['fine_calls']} runs / {c['fine_iterations']} iterations / {c['fine_s']:.1f} s"
        )
        print(
            "   fine runs (iterations, s): "
            + ", ".join(f"{r['iterations']}/{r['seconds']:.1f}" for r in c["fine_call_log"])
        )
        for e in c["entries"]:
            print(
                f"   {e['init']:<14}{e['branch']:<14}{e['status']:<10}{e['iterations']:>4d} it {e['seconds']:>5.2f} s  "
                f"q={e['q']:.5f} m={e['m']:+.5f} theta={e['theta']:+.5f} V={e['V']:.3f}  e_t={e['train_loss']:.8f} "
                f"eps_g={e['test_error']:.8f}{'  <- selected' if e['selected'] else ''}"
            )
    print()
    fp_med = float(np.median([b["solve"]["median_s"] for b in branches]))
    it_time = float(np.median([b["fine_leg"]["median_s"] / b["fine_leg"]["iterations"] for b in branches]))
    print(
        f"reference (authors' approach): scipy BFGS+jac per node {1e3 * per_node:.3f} ms x {fine_nodes:,} nodes x "
        f"{bp.N_HATS} hats = {ref_iteration:.0f} s per iteration; x {REFERENCE_ITERATIONS} iterations = "
        f"{ref_fp:.0f} s ({ref_fp / 60:.0f} min) per fixed point"
    )
    print(
        f"dotattn: {fp_med:.2f} s per fixed point (median over branches, solve), "
        f"{1e3 * it_time:.0f} ms per fine iteration -> speed-up {ref_fp / fp_med:.0f}x per fixed point, "
        f"{ref_iteration / it_time:.0f}x per iteration"
    )
    print(f"total {seconds:.1f} s")

    result = {
        "provenance": provenance(
            {
                "problem": problem.to_dict(),
                "quadrature": {**quad.to_dict(), "nodes": fine_nodes},
                "tol": options.tol,
                "repeats": repeats,
                "alphas": alphas,
                "n_random": args.n_random,
            },
            seconds,
        ),
        "load_average": {"before": load_before, "after": load_after},
        "targets": {"fixed_point_s": FP_TARGET_S, "catalogue_s": CATALOGUE_TARGET_S},
        "branches": branches,
        "catalogues": catalogues,
        "reference": {
            "method": "scipy.optimize.minimize BFGS with analytic gradient, one start per node",
            "per_node_s": per_node,
            "by_state": ref["BFGS+jac"]["by_state"],
            "hats": bp.N_HATS,
            "iterations": REFERENCE_ITERATIONS,
            "per_iteration_s": ref_iteration,
            "per_fixed_point_s": ref_fp,
        },
        "summary": {
            "fixed_point_median_s": fp_med,
            "fine_iteration_s": it_time,
            "speedup_per_fixed_point": ref_fp / fp_med,
            "speedup_per_iteration": ref_iteration / it_time,
            "catalogue_s": {str(c["alpha"]): c["wall_s"] for c in catalogues},
        },
    }
    write_json(args.out, result)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
