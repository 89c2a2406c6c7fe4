"""The main job's speed: the default phase diagram and ``solve`` against one reference fixed point.

Three timings, as a new user meets them (the reference in a child process, the other two through the
public CLI in this process):

1. **the reference fixed point** (the yardstick of the machine's speed at this moment): a
   careful plain state-evolution solver of the toy model written out below with numpy only, so that no
   change to dotattn's solver moves it, run in its own process on one thread (OMP/OPENBLAS/MKL_NUM_THREADS
   = 1): α = 2, ω = 0.3 (σ = 0.5, λ = 0.01, the default A); tensor Gauss–Hermite with 10 nodes per axis
   in the four Gaussian variables (10^4 nodes); at every node the global prox from five starts (0, 0),
   (w₁, w₂), (w₁, w₁), (w₂, w₂), (−w₂, −w₁), each by damped Newton with backtracking to a gradient of
   1e-12 (at most 60 steps), the lowest objective kept; the hats by direct averages of the residuals f
   and g* (the envelope-theorem gradient form, no Stein integration by parts); the ridge prior in closed
   form; mixing new = 0.2 · update + 0.8 · old on (q, m, V, θ); stop when the largest change (V's
   relative to max(1, V)) is below 1e-8; start (q, m, V, θ) = (0.9, 2·10⁻⁴, 14.575, 0.3472). It lands on
   the semantic fixed point that ``solve`` reports (e_t = 0.0035905…); the script prints the differences
   from dotattn's solver on the same rule and from the row ``solve`` prints;
2. ``dotattn solve --alpha 2 --omega 0.3`` (catalogue of every start with RS stability);
3. ``dotattn phase-diagram --out TMP --quiet`` (the defaults: 10 ω × 25 α, refined α_c and α_lin,
   all cores), then the agreement of its summaries and records with the committed
   ``results/phase_diagram`` (:func:`dotattn.positional_semantic.output.disagreements`).

Printed and recorded: wall and CPU time of each, the two ratios on wall and on CPU time (lines starting
``RATIO``: phase diagram / reference, reference / solve; targets on wall time ≤ 3 and ≥ 8), the phase
diagram's CPU split by stage (summed over the columns from their cache units; the rest of the workers' CPU is process start-up, imports and pickling; the parent's
is imports, the pool and figure writing), fixed points solved, the load average before and after,
and provenance. Writes ``benchmarks/results/main_job.json`` (``--out``).

Measured from a clean clone at 9dbcb73 (``pip install .``, numba; 2-core machine shared at load 6.6-6.9):
reference 14.97 CPU-s, ``solve`` 1.40 CPU-s (10.7x), phase diagram 97.4 CPU-s (6.5x; CPU by stage:
refinement 27.5, follow 26.1, stability 20.3, two-sided walk 12.5, Brent 7.5, boundaries 2.0, figures 1.2).
The levers the issue names (common random numbers across the refinement rules, the two-sided walk only
where needed, the follow's prox reused by the stability) would each move committed records; what was
pulled instead (all bit-for-bit exact) and why those were not: ``benchmarks/README.md``, "The main job".

Usage::

    python benchmarks/main_job.py                 # all three (minutes)
    python benchmarks/main_job.py --omega 0.3     # one column only (no committed check of the rest)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
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
    """The prox objective at every node: ½ v |x − c|² + ℓ, ℓ = σ² (r_a² + r_b²) for L = 2, r = 1."""
    ra = expit(x1 * (x1 - x2)) - t1
    rb = expit(x2 * (x2 - x1)) - t2
    return 0.5 * v * ((x1 - c1) ** 2 + (x2 - c2) ** 2) + s2 * (ra * ra + rb * rb)


def _newton(x1, x2, c1, c2, t1, t2, v, s2, max_iter=60, gtol=1e-12):
    """Damped Newton at every node, at most ``max_iter`` steps: the Hessian's eigenvalues reflected and
    floored at 1e-8 of the largest (closed-form 2 × 2 eigendecomposition), Armijo backtracking that also
    demands a strict decrease. A node stops when its gradient is below ``gtol``, or when no step of
    length ≥ 2^-50 decreases its objective (it is then at the minimum to rounding)."""
    x1, x2 = x1.copy(), x2.copy()
    active = np.arange(len(x1))
    y1, y2, d1, d2, u1, u2 = x1, x2, c1, c2, t1, t2
    for _ in range(max_iter):
        sa, sb = expit(y1 * (y1 - y2)), expit(y2 * (y2 - y1))
        ra, rb = sa - u1, sb - u2
        da, db = sa * (1 - sa), sb * (1 - sb)
        ga, gb = 2 * s2 * ra * da, 2 * s2 * rb * db
        a1, a2, b1, b2 = 2 * y1 - y2, -y1, -y2, 2 * y2 - y1
        g1 = v * (y1 - d1) + ga * a1 + gb * b1
        g2 = v * (y2 - d2) + ga * a2 + gb * b2
        keep = np.maximum(np.abs(g1), np.abs(g2)) >= gtol
        if not np.any(keep):
            break
        if not np.all(keep):
            active, g1, g2 = active[keep], g1[keep], g2[keep]
            y1, y2, d1, d2, u1, u2, sa, sb, ra, rb, da, db, ga, gb = (
                z[keep] for z in (y1, y2, d1, d2, u1, u2, sa, sb, ra, rb, da, db, ga, gb)
            )
            a1, a2, b1, b2 = 2 * y1 - y2, -y1, -y2, 2 * y2 - y1
        haa = 2 * s2 * (da * da + ra * da * (1 - 2 * sa))
        hbb = 2 * s2 * (db * db + rb * db * (1 - 2 * sb))
        h11 = haa * a1 * a1 + hbb * b1 * b1 + 2 * ga + v
        h22 = haa * a2 * a2 + hbb * b2 * b2 + 2 * gb + v
        h12 = haa * a1 * a2 + hbb * b1 * b2 - ga - gb
        # eigendecomposition of [[h11, h12], [h12, h22]]: eigenvalues mean -+ half, unit eigenvector
        # (cos, sin) of the larger one
        mean, half = 0.5 * (h11 + h22), np.hypot(0.5 * (h11 - h22), h12)
        lo, hi = mean - half, mean + half
        angle = 0.5 * np.arctan2(2 * h12, h11 - h22)
        cs, sn = np.cos(angle), np.sin(angle)
        floor = 1e-8 * np.maximum(np.abs(lo), np.abs(hi))
        lo, hi = np.maximum(np.abs(lo), floor), np.maximum(np.abs(hi), floor)
        along, across = (cs * g1 + sn * g2) / hi, (-sn * g1 + cs * g2) / lo
        p1, p2 = -(cs * along - sn * across), -(sn * along + cs * across)
        f0 = _objective(y1, y2, d1, d2, u1, u2, v, s2)
        slope = g1 * p1 + g2 * p2
        t = np.ones_like(y1)
        todo = np.arange(len(y1))
        for _ in range(51):
            f1 = _objective(
                y1[todo] + t[todo] * p1[todo],
                y2[todo] + t[todo] * p2[todo],
                d1[todo],
                d2[todo],
                u1[todo],
                u2[todo],
                v,
                s2,
            )
            bad = (f1 > f0[todo] + 1e-4 * t[todo] * slope[todo]) | ~(f1 < f0[todo])
            todo = todo[bad]
            if todo.size == 0:
                break
            t[todo] *= 0.5
        moved = t >= 2.0**-50
        y1, y2 = y1 + t * p1, y2 + t * p2
        x1[active[moved]], x2[active[moved]] = y1[moved], y2[moved]
        if not np.all(moved):
            active, y1, y2, d1, d2, u1, u2 = (z[moved] for z in (active, y1, y2, d1, d2, u1, u2))
    return x1, x2


def prox(w1, w2, t1, t2, v, s2):
    """Global prox at every node: damped Newton from the five starts (0, 0), (w₁, w₂), (w₁, w₁),
    (w₂, w₂), (−w₂, −w₁) (w the student field's centre); the lowest objective kept."""
    zero = np.zeros_like(w1)
    starts = [(zero, zero), (w1, w2), (w1, w1), (w2, w2), (-w2, -w1)]
    best_h = best_v = None
    for s1, s2_ in starts:
        x1, x2 = _newton(s1, s2_, w1, w2, t1, t2, v, s2)
        val = _objective(x1, x2, w1, w2, t1, t2, v, s2)
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
    G=((1.0, -1.0), (-1.0, 1.0)),
    order=10,
    tol=1e-8,
    mix=0.2,
    max_iter=5000,
    init=(0.9, 2e-4, 14.575, 0.3472),
):
    """Plain state evolution of the toy model (L = 2, r = r_t = 1), numpy only, from ``init`` =
    (q, m, V, θ) with μ = m (1, −1):

    * fields ω_l = μ_l + √q ξ_l, h*_l = B ξ_l + D η_l with B = θ/√q, D = √(σ² − B²); the teacher's
      row-1 and row-2 attention t_1 = (1 − ω) σ(h*_1 (h*_1 − h*_2)) + ω A_11, t_2 likewise;
    * the global prox ĥ (:func:`prox`) at every node of the tensor Gauss–Hermite rule, f = (ĥ − ω)/V;
    * the hats as direct averages over the nodes of the residuals f and g* = ∂ℓ/∂h* at ĥ, by the
      envelope theorem (∂M/∂μ_l = −f_l, ∂M/∂V = −½ Σ f_l², ∂M/∂C = −Σ f_l ξ_l, ∂M/∂B = Σ ξ_l g*_l,
      ∂M/∂D = Σ g*_l η_l; docs/theory.md section 3, gradient form, no Gaussian integration by parts):
      μ̂ = α E[f], q̂ = α E[Σ f²], V̂ = 2α ∂E[M]/∂q, θ̂ = −α ∂E[M]/∂θ, chained through
      C = √q, B = θ/√q, D = √(σ² − B²);
    * the ridge prior's closed form K = λ + σ² V̂: V = σ²/K, q = σ² (σ² q̂ + σ⁴ θ̂² + μ̂ᵀGμ̂)/K²,
      θ = σ⁴ θ̂/K, μ = G μ̂/K;
    * mixing new = ``mix`` · update + (1 − ``mix``) · old on (q, m, V, θ), until the largest change
      (each relative to max(1, |x|): V's is relative, q, m, θ are below 1) is below ``tol``;
    * e_t = −Φ at the fixed point (SPEC section 3).
    """
    t0 = time.process_time()
    A, G = np.asarray(A), np.asarray(G)
    s2 = sigma**2
    nodes, w = gh_rule(order)
    xi, eta = nodes[:, :2], nodes[:, 2:]
    sign = np.array([1.0, -1.0])
    x = np.array(init, dtype=float)  # (q, m, V, theta)
    for it in range(1, max_iter + 1):
        q, m, V, th = x
        mu = m * sign
        C, B = np.sqrt(q), th / np.sqrt(q)
        D = np.sqrt(s2 - B * B)
        c = mu[None, :] + C * xi
        hs = B * xi + D * eta
        tau_a = expit(hs[:, 0] * (hs[:, 0] - hs[:, 1]))
        tau_b = expit(hs[:, 1] * (hs[:, 1] - hs[:, 0]))
        t1 = (1 - omega) * tau_a + omega * A[0, 0]
        t2 = (1 - omega) * tau_b + omega * A[1, 1]
        (h1, h2), M = prox(c[:, 0], c[:, 1], t1, t2, 1.0 / V, s2)
        f = np.stack([h1 - c[:, 0], h2 - c[:, 1]], axis=1) / V
        # g* = dl/dh* at the prox point: l = s2 (r_a^2 + r_b^2), r = softmax row - teacher row
        ra = expit(h1 * (h1 - h2)) - t1
        rb = expit(h2 * (h2 - h1)) - t2
        ka, kb = (1 - omega) * tau_a * (1 - tau_a), (1 - omega) * tau_b * (1 - tau_b)
        g_star = (
            -2
            * s2
            * np.stack(
                [
                    ra * ka * (2 * hs[:, 0] - hs[:, 1]) + rb * kb * (-hs[:, 1]),
                    ra * ka * (-hs[:, 0]) + rb * kb * (2 * hs[:, 1] - hs[:, 0]),
                ],
                axis=1,
            )
        )
        dM_dC = -(w @ np.sum(f * xi, axis=1))
        dM_dB = w @ np.sum(xi * g_star, axis=1)
        dM_dD = w @ np.sum(g_star * eta, axis=1)
        # (C, B, D) as functions of (q, theta)
        B_q, D_q = -th / (2 * q**1.5), -B * (-th / (2 * q**1.5)) / D
        B_th, D_th = 1 / np.sqrt(q), -B / (np.sqrt(q) * D)
        dM_dq = dM_dC / (2 * C) + dM_dB * B_q + dM_dD * D_q
        dM_dth = dM_dB * B_th + dM_dD * D_th
        q_hat = alpha * w @ np.sum(f * f, axis=1)
        mu_hat = alpha * w @ f
        V_hat = 2 * alpha * dM_dq
        th_hat = -alpha * dM_dth
        K = ridge + s2 * V_hat
        X = s2 * q_hat + s2**2 * th_hat**2 + mu_hat @ G @ mu_hat
        mu_new = (G @ mu_hat) / K
        new = np.array([s2 * X / K**2, mu_new[0], s2 / K, s2**2 * th_hat / K])
        change = np.max(np.abs(new - x) / np.maximum(1.0, np.abs(new)))
        if change < tol:
            phi = 0.5 * V_hat * q - 0.5 * q_hat * V - mu @ mu_hat - th * th_hat + 0.5 * X / K - alpha * (w @ M)
            return {
                "q": float(q),
                "m": float(m),
                "V": float(V),
                "theta": float(th),
                "train_loss": float(-phi),
                "iterations": it,
                "cpu_seconds": time.process_time() - t0,
            }
        x = mix * new + (1 - mix) * x
        if not (x[0] > 0 and x[2] > 0 and x[3] ** 2 / x[0] < s2):
            raise RuntimeError(f"reference fixed point: inadmissible state {x} at iteration {it}")
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


ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""The reference runs in its own process with one BLAS/OpenMP thread (a one-core yardstick)."""


def run_reference() -> dict:
    """The reference fixed point in a child process with :data:`ONE_THREAD`; its result with the wall and
    CPU seconds of the fixed point itself (measured in the child, without interpreter start-up)."""
    env = {**os.environ, **ONE_THREAD}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--reference-only"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _reference_only() -> None:
    """``--reference-only``: time the reference fixed point in this process and print it as one JSON line."""
    w0, (s0, _) = time.perf_counter(), _cpu()
    ref = reference_fixed_point()
    w1, (s1, _) = time.perf_counter(), _cpu()
    ref.pop("cpu_seconds")
    print(json.dumps({**ref, "wall_seconds": w1 - w0, "cpu_seconds": s1 - s0}))


def semantic_row(solve_text: str) -> dict:
    """q, m, θ, V and e_t of the semantic fixed point from the informed semantic start, read off the
    table that ``dotattn solve`` prints."""
    for line in solve_text.splitlines():
        cells = [c for c in line.strip().split("  ") if c.strip()]
        cells = [c.strip() for c in cells]
        if len(cells) >= 8 and cells[0] == "semantic" and cells[1] == "semantic (informed)":
            q, m, theta, V, e_t = (float(c) for c in cells[3:8])
            return {"q": q, "m": m, "theta": theta, "V": V, "train_loss": e_t}
    raise RuntimeError("dotattn solve printed no semantic fixed point from the informed semantic start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--omega", default=None, help="comma list of omega (default: the default grid)")
    ap.add_argument("--workers", type=int, default=None, help="phase-diagram workers (default: all cores)")
    ap.add_argument("--out", default=str(HERE / "results" / "main_job.json"))
    ap.add_argument("--reference-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reference_only:
        _reference_only()
        return
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
    ref = run_reference()
    ref_wall, ref_cpu = ref["wall_seconds"], ref["cpu_seconds"]
    print(
        f"reference fixed point (numpy, one thread, own process): {ref_wall:.2f} s wall, {ref_cpu:.2f} s CPU, "
        f"{ref['iterations']} iterations, e_t = {ref['train_loss']:.10f}, q = {ref['q']:.6f}, V = {ref['V']:.5f}, "
        f"theta = {ref['theta']:.6f}, m = {ref['m']:.1e}"
    )
    from dotattn.positional_semantic.overlaps import overlaps_from_scalars
    from dotattn.positional_semantic.problem import Problem
    from dotattn.positional_semantic.quadrature import gauss_hermite
    from dotattn.positional_semantic.state_evolution import iterate

    problem = Problem(omega=0.3)
    same = iterate(problem, 2.0, overlaps_from_scalars(problem, 0.9, 2e-4, 14.575, 0.3472), gauss_hermite(4, 10))
    ref_check = {
        "dotattn_same_rule": {
            "train_loss": same.train_loss,
            "V": float(same.overlaps.V[0, 0]),
            "q": float(same.overlaps.q[0, 0]),
            "theta": float(same.overlaps.theta[0, 0]),
        },
    }
    ref_check["dotattn_same_rule_differences"] = {k: ref[k] - v for k, v in ref_check["dotattn_same_rule"].items()}
    print(
        "  the same fixed point by dotattn's solver (same rule, same start): differences "
        + ", ".join(f"{k} {v:.1e}" for k, v in ref_check["dotattn_same_rule_differences"].items())
    )
    text, solve_wall, solve_cpu, _ = _timed(lambda: _cli(["solve", "--alpha", "2", "--omega", "0.3"]))
    print(f"dotattn solve --alpha 2 --omega 0.3: {solve_wall:.2f} s wall, {solve_cpu:.2f} s CPU")
    solved = semantic_row(text)
    ref_check["solve_semantic"] = solved
    ref_check["solve_semantic_differences"] = {k: ref[k] - v for k, v in solved.items() if k != "m"}
    print(
        "  against the semantic fixed point that solve reports (its own finer rule; printed digits): "
        + ", ".join(f"{k} {v:.1e}" for k, v in ref_check["solve_semantic_differences"].items())
    )

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
    cpu_pd, cpu_solve = pd_cpu / ref_cpu, ref_cpu / solve_cpu
    ok = {True: "met", False: "NOT met"}
    print(
        f"RATIO phase diagram / reference: {ratio_pd:.2f} wall, {cpu_pd:.2f} CPU "
        f"(target <= {TARGET_PHASE_DIAGRAM:g} on wall: {ok[ratio_pd <= TARGET_PHASE_DIAGRAM]})"
    )
    print(
        f"RATIO reference / solve: {ratio_solve:.2f} wall, {cpu_solve:.2f} CPU "
        f"(target >= {TARGET_SOLVE:g} on wall: {ok[ratio_solve >= TARGET_SOLVE]})"
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
            "cpu": {"phase_diagram_over_reference": cpu_pd, "reference_over_solve": cpu_solve},
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
