"""Timing and accuracy of the AIM state evolution: one core.

* CPU time of one fixed point and of a 50-point MMSE(α) curve, softmax and hardmax (ρ = 0.5, T = 2;
  wall time beside it: the machine is shared);
* convergence of the MMSE in the prior nodes (softmax) and the hardmax q̂ nodes (hardmax);
* the hardmax curve with the public script's output function (φ₂/Φ₂ for both partials of log Φ₂)
  against the gradient, per α and ρ.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/aim_state_evolution.py --out benchmarks/results/aim_state_evolution.json
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dotattn.aim.state_evolution import solve_curve, solve_point
from dotattn.core.io import provenance, write_json


def timing(channel: str, rho: float, repeats: int = 5) -> dict:
    """CPU seconds of this process (the machine is shared: wall time is reported beside it)."""
    one, one_wall = [], []
    for _ in range(repeats):
        t, w = time.process_time(), time.perf_counter()
        solve_point(channel, 0.1, rho, 2)
        one.append(time.process_time() - t)
        one_wall.append(time.perf_counter() - w)
    grid = np.geomspace(0.005, 2.0 if channel == "softmax" else 10.0, 50)
    t, w = time.process_time(), time.perf_counter()
    pts = solve_curve(channel, grid, rho, 2)
    curve, curve_wall = time.process_time() - t, time.perf_counter() - w
    return {
        "point_cpu_seconds_median": float(np.median(one)),
        "point_cpu_seconds_max": float(max(one)),
        "point_wall_seconds_median": float(np.median(one_wall)),
        "curve_50_cpu_seconds": curve,
        "curve_50_wall_seconds": curve_wall,
        "curve_statuses": sorted({p.status for p in pts}),
        "curve_uncertainty_max": float(np.nanmax([p.uncertainty for p in pts])),
    }


def convergence() -> dict:
    out = {"softmax_prior_nodes": [], "hardmax_nodes": []}
    for rho, alpha in ((0.1, 0.01), (0.5, 0.05), (1.0, 0.1), (2.0, 0.2)):
        ref = solve_point("softmax", alpha, rho, 2, nodes=256).mmse
        out["softmax_prior_nodes"].append(
            {
                "rho": rho,
                "alpha": alpha,
                "mmse_256": ref,
                "change": {
                    n: solve_point("softmax", alpha, rho, 2, nodes=n).mmse - ref
                    for n in (8, 12, 16, 24, 32, 48, 64, 128)
                },
            }
        )
    for rho, alpha in ((0.1, 0.1), (0.5, 0.5), (2.0, 3.0)):
        ref = solve_point("hardmax", alpha, rho, 2, nodes=128, hardmax_nodes=192).mmse
        out["hardmax_nodes"].append(
            {
                "rho": rho,
                "alpha": alpha,
                "mmse_ref": ref,
                "change": {
                    n: solve_point("hardmax", alpha, rho, 2, hardmax_nodes=n).mmse - ref
                    for n in (16, 24, 32, 48, 64, 96)
                },
            }
        )
    return out


def published_derivative() -> list[dict]:
    rows = []
    for rho in (0.1, 0.5, 2.0):
        for alpha in (0.02, 0.1, 0.5, 1.0, 5.0, 10.0):
            g = solve_point("hardmax", alpha, rho, 2)
            p = solve_point("hardmax", alpha, rho, 2, hardmax_derivative="published")
            rows.append(
                {
                    "rho": rho,
                    "alpha": alpha,
                    "mmse_gradient": g.mmse,
                    "mmse_published_derivative": p.mmse,
                    "difference": p.mmse - g.mmse,
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = {"timing": {c: timing(c, 0.5) for c in ("softmax", "hardmax")}}
    for c, v in res["timing"].items():
        print(
            f"{c}: one point {v['point_cpu_seconds_median']:.3f} s CPU (max {v['point_cpu_seconds_max']:.3f}; wall "
            f"{v['point_wall_seconds_median']:.3f}), 50 points {v['curve_50_cpu_seconds']:.1f} s CPU "
            f"({v['curve_50_wall_seconds']:.1f} wall), statuses {v['curve_statuses']}"
        )
    res["convergence"] = convergence()
    for e in res["convergence"]["softmax_prior_nodes"]:
        print("softmax", e["rho"], e["alpha"], {k: f"{v:.1e}" for k, v in e["change"].items()})
    for e in res["convergence"]["hardmax_nodes"]:
        print("hardmax", e["rho"], e["alpha"], {k: f"{v:.1e}" for k, v in e["change"].items()})
    res["published_derivative"] = published_derivative()
    for r in res["published_derivative"]:
        print(
            f"rho={r['rho']:g} alpha={r['alpha']:g}: gradient {r['mmse_gradient']:.5f}, published "
            f"{r['mmse_published_derivative']:.5f}"
        )
    res["provenance"] = provenance({"script": "benchmarks/aim_state_evolution.py"}, seconds=time.perf_counter() - t0)
    if args.out:
        write_json(args.out, res)


if __name__ == "__main__":
    main()
