"""Speed levers of the solver, one by one: what each costs and what it changes.

Levers, cumulative, at omega = 0.3 on the default rule (GH k = 12 after coarse k = 6), tol 1e-8:

* ``plain``   : the solver before these levers (generic batched Newton prox, every node of the rule);
* ``kernel``  : + the toy-model Newton kernel on coordinate columns (``prox._newton_toy``);
* ``symmetry``: + the token symmetry folding the rule (``SolverOptions.symmetry``, the default);
* ``secant``  : + a secant prediction of the next alpha's start along a branch
  (:func:`dotattn.positional_semantic.state_evolution.predict_start`; ``Branch.secant``, off by default: it does not
  pay on whole columns, see ``--column``).

Measured for each lever: one fixed point per informed branch at alpha in {2, 1.25} by the public
path (coarse then fine), the full catalogue ``solve(problem, 2)``, and continuation along a
branch (alpha = 2.5, 2.4, ..., 0.6, warm-started from the previous point, as the phase diagram
does). Times are CPU (process) seconds, which a shared machine distorts less than wall time;
both are recorded. The change of every fixed point against ``plain`` is reported (max over the
overlaps and e_t), so a lever that moves a result is visible.

``--column``: one whole default omega column (``omega_column``: both branches along the default
alpha grid, spinodals, alpha_c and alpha_lin by Brent) with the continuation start as it was
(``warm``: the neighbouring fixed point), with the secant in ``Branch.follow`` and the spinodal
bisection (``secant``), and also in ``Branch.at`` (``secant-at``: each side's neighbour and the
next point beyond it); CPU time, fixed points, iterations, alpha_c and alpha_lin per variant.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/levers.py            # about 1-2 min
    OMP_NUM_THREADS=1 python benchmarks/levers.py --quick    # catalogue and continuation skipped
    OMP_NUM_THREADS=1 python benchmarks/levers.py --column   # whole columns at omega 0.1, 0.3 (~1 min)

Writes ``benchmarks/results/levers.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

import dotattn.positional_semantic.prox as prox_module
from dotattn.core.io import provenance, write_json
from dotattn.positional_semantic.catalogue import default_quadrature, initialisations, solve
from dotattn.positional_semantic.problem import Problem
from dotattn.positional_semantic.state_evolution import SolverOptions, iterate, predict_start

HERE = Path(__file__).resolve().parent
LEVERS = ("plain", "kernel", "symmetry", "secant")
CONTINUATION = [round(2.5 - 0.1 * i, 10) for i in range(20)]  # 2.5 ... 0.6


@contextmanager
def generic_newton(on: bool):
    """Route the toy model's prox through the generic Newton (the solver before the kernel)."""
    original = prox_module._newton_toy
    if on:

        def generic(h0, centre, target, v, s2, max_iter, gtol):
            loss = prox_module.AttentionPointLoss(generic.problem)
            return prox_module._newton(h0, centre, target, np.array([[v]]), loss, max_iter, gtol)

        generic.problem = None
        prox_module._newton_toy = generic
    try:
        yield prox_module._newton_toy
    finally:
        prox_module._newton_toy = original


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def fixed_points(problem, quad, options) -> list[dict]:
    D = problem.gaussian_dim
    rule, coarse = quad.rule(D), quad.coarse_rule(D)
    inits = dict(initialisations(problem, 0))
    rows = []
    for alpha in (2.0, 1.25):
        for branch in ("positional", "semantic"):

            def run(alpha=alpha, branch=branch):
                c = iterate(problem, alpha, inits[branch], coarse, options)
                return c, iterate(problem, alpha, c.overlaps, rule, options)

            (c, f), wall, cpu = timed(run)
            rows.append(
                {
                    "alpha": alpha,
                    "branch": branch,
                    "wall_s": wall,
                    "cpu_s": cpu,
                    "coarse_iterations": c.iterations,
                    "fine_iterations": f.iterations,
                    "fine_cpu_per_iteration_s": None,
                    "status": f.status,
                    "train_loss": f.train_loss,
                    "test_error": f.test_error,
                    "overlaps": f.overlaps.vector().tolist(),
                }
            )
    return rows


def continuation(problem, quad, options, secant: bool) -> dict:
    rule = quad.rule(problem.gaussian_dim)
    inits = dict(initialisations(problem, 0))
    out = {}
    for branch in ("positional", "semantic"):
        pts = [iterate(problem, CONTINUATION[0], inits[branch], rule, options)]
        its, wall, cpu = [], 0.0, 0.0
        for alpha in CONTINUATION[1:]:
            prev = pts[-1]
            start, warm = predict_start(problem, alpha, prev, pts[-2] if secant and len(pts) >= 2 else None)
            fp, w, c = timed(
                lambda alpha=alpha, start=start, warm=warm: iterate(problem, alpha, start, rule, options, warm=warm)
            )
            wall, cpu = wall + w, cpu + c
            its.append(fp.iterations)
            pts.append(fp)
        out[branch] = {
            "iterations": its,
            "total_iterations": int(sum(its)),
            "wall_s": wall,
            "cpu_s": cpu,
            "statuses": [p.status for p in pts],
            "train_loss": [p.train_loss for p in pts],
            "overlaps": [p.overlaps.vector().tolist() for p in pts],
        }
    return out


COLUMN_VARIANTS = {"warm": (False, False), "secant": (True, False), "secant-at": (True, True)}


def columns(omegas: list[float]) -> dict:
    """One default column per omega and per start variant (Branch.secant, Branch.secant_at)."""
    import dotattn.positional_semantic.branch as branch_module
    from dotattn.positional_semantic.phase_diagram import DEFAULT_ALPHAS, SweepSettings, omega_column

    original = branch_module.iterate
    stats = {"iterations": 0}

    def counted(*a, **k):
        fp = original(*a, **k)
        stats["iterations"] += fp.iterations
        return fp

    out: dict = {}
    defaults = branch_module.Branch.secant, branch_module.Branch.secant_at
    branch_module.iterate = counted
    try:
        for omega in omegas:
            problem = Problem(omega=omega)
            settings = SweepSettings(default_quadrature(problem)).to_dict()
            for name, (secant, secant_at) in COLUMN_VARIANTS.items():
                branch_module.Branch.secant, branch_module.Branch.secant_at = secant, secant_at
                stats["iterations"] = 0
                col, wall, cpu = timed(
                    lambda problem=problem, omega=omega, settings=settings: omega_column(
                        problem.to_dict(), omega, list(DEFAULT_ALPHAS), settings
                    )
                )
                s = col["summary"]
                rows = {(r["alpha"], r["branch"]): r for r in col["rows"]}
                out[f"{omega}/{name}"] = {
                    "omega": omega,
                    "variant": name,
                    "cpu_s": cpu,
                    "wall_s": wall,
                    "fixed_points": col["fixed_points"],
                    "iterations": stats["iterations"],
                    "alpha_c": s["alpha_c"],
                    "alpha_lin": s["alpha_lin"],
                    "train_loss": {f"{a}/{b}": r["train_loss"] for (a, b), r in rows.items()},
                }
                r = out[f"{omega}/{name}"]
                base = out[f"{omega}/warm"]
                de = max(abs((x or 0) - (base["train_loss"].get(k) or 0)) for k, x in r["train_loss"].items())
                r["max_abs_train_loss_change_vs_warm"] = de
                print(
                    f"column omega={omega:<5g} {name:<10}: {cpu:6.2f} s cpu {wall:6.2f} s wall, "
                    f"{r['fixed_points']} fixed points, {r['iterations']} iterations, alpha_c {s['alpha_c']:.6f}, "
                    f"alpha_lin {s['alpha_lin'] if s['alpha_lin'] is None else round(s['alpha_lin'], 6)}, "
                    f"max |de_t| vs warm {de:.1e}",
                    flush=True,
                )
    finally:
        branch_module.iterate = original
        branch_module.Branch.secant, branch_module.Branch.secant_at = defaults
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fixed points only")
    ap.add_argument(
        "--column",
        default=None,
        metavar="OMEGAS",
        help="only the whole-column comparison at these omega (comma list, e.g. 0.1,0.3)",
    )
    ap.add_argument(
        "--out", default=None, help="default results/levers.json (results/levers_column.json with --column)"
    )
    args = ap.parse_args(argv)
    if args.column is not None:
        t0 = time.perf_counter()
        load_before = [round(x, 2) for x in os.getloadavg()]
        omegas = [float(w) for w in args.column.split(",")]
        res = columns(omegas)
        out = {
            "provenance": provenance({"omegas": omegas, "variants": COLUMN_VARIANTS}, time.perf_counter() - t0),
            "load_average": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "columns": res,
        }
        path = args.out or str(HERE / "results" / "levers_column.json")
        write_json(path, out)
        print(f"wrote {path}")
        return out
    args.out = args.out or str(HERE / "results" / "levers.json")
    t0 = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    problem = Problem(omega=0.3)
    quad = default_quadrature(problem)
    base = SolverOptions(tol=1e-8)
    solve(problem, 2.0, n_random=0)  # warm-up: imports, rule construction
    results: dict = {}
    for lever in LEVERS:
        options = base if lever != "plain" and lever != "kernel" else replace(base, symmetry=False)
        with generic_newton(lever == "plain") as kern:
            if lever == "plain":
                kern.problem = problem
            res: dict = {}
            if lever != "secant":
                res["fixed_points"] = fixed_points(problem, quad, options)
                if not args.quick:
                    cat, wall, cpu = timed(lambda options=options: solve(problem, 2.0, options=options))
                    res["catalogue"] = {
                        "alpha": 2.0,
                        "wall_s": wall,
                        "cpu_s": cpu,
                        "fixed_points": [
                            {
                                "init": e.init,
                                "branch": e.branch,
                                "selected": e.selected,
                                "iterations": e.result.iterations,
                                "train_loss": e.train_loss,
                            }
                            for e in cat.fixed_points
                        ],
                    }
            if not args.quick and lever in ("plain", "symmetry", "secant"):
                res["continuation"] = continuation(problem, quad, options, secant=lever == "secant")
        results[lever] = res
        print(f"{lever}: done ({time.perf_counter() - t0:.0f} s)", flush=True)

    # ------------------------------------------------------------------ table
    ref = results["plain"]
    print()
    print(
        f"{'lever':<10}{'alpha':>6} {'branch':<11}{'cpu s':>7}{'wall s':>8}{'coarse it':>10}{'fine it':>8}"
        f"{'max |dx|':>11}{'|de_t|':>10}"
    )
    for lever in LEVERS:
        for row, r0 in zip(results[lever].get("fixed_points", []), ref["fixed_points"], strict=False):
            dx = float(np.max(np.abs(np.array(row["overlaps"]) - np.array(r0["overlaps"]))))
            de = abs(row["train_loss"] - r0["train_loss"])
            row["change_vs_plain"] = {"overlaps": dx, "train_loss": de}
            print(
                f"{lever:<10}{row['alpha']:>6g} {row['branch']:<11}{row['cpu_s']:>7.3f}{row['wall_s']:>8.3f}"
                f"{row['coarse_iterations']:>10d}{row['fine_iterations']:>8d}{dx:>11.1e}{de:>10.1e}"
            )
    if not args.quick:
        print()
        for lever in LEVERS:
            c = results[lever].get("catalogue")
            if c:
                print(
                    f"catalogue alpha=2, {lever:<9}: {c['cpu_s']:.2f} s cpu, {c['wall_s']:.2f} s wall, "
                    + ", ".join(f"{e['init']}:{e['branch']}/{e['iterations']}" for e in c["fixed_points"])
                )
        print()
        for lever in ("plain", "symmetry", "secant"):
            cont = results[lever]["continuation"]
            for b, c in cont.items():
                r0 = ref["continuation"][b]
                dx = max(
                    float(np.max(np.abs(np.array(x) - np.array(y))))
                    for x, y in zip(c["overlaps"], r0["overlaps"], strict=True)
                )
                de = max(abs(x - y) for x, y in zip(c["train_loss"], r0["train_loss"], strict=True))
                c["change_vs_plain"] = {"overlaps": dx, "train_loss": de}
                n = len(c["iterations"])
                print(
                    f"continuation {b:<11}{lever:<9}: {c['total_iterations']:>4d} it ({c['total_iterations'] / n:.1f}/point), "
                    f"{c['cpu_s']:.2f} s cpu ({c['cpu_s'] / n:.3f}/point), {c['wall_s']:.2f} s wall; "
                    f"max |dx| {dx:.1e}, |de_t| {de:.1e} vs plain"
                )
    seconds = time.perf_counter() - t0
    out = {
        "provenance": provenance(
            {
                "problem": problem.to_dict(),
                "quadrature": quad.to_dict(),
                "tol": base.tol,
                "continuation_alphas": CONTINUATION,
                "quick": args.quick,
            },
            seconds,
        ),
        "load_average": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "levers": results,
    }
    write_json(args.out, out)
    print(f"total {seconds:.0f} s; wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
