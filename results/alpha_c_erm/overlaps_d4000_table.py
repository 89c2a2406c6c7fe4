"""The d = 4000 minima of overlaps_d4000/alpha*/ beside the theory, from verified rows (run from the
repository root; writes nothing, prints a markdown table):

    python results/alpha_c_erm/overlaps_d4000_table.py

Per α and branch: the RS fixed point of results/phase_diagram (the one the theory's α_c uses), the
fixed point of `solve` from the informed start when it differs, and every ERM run with its overlaps,
its e_t, and E = the RS training loss at the run's own overlaps with the d -> inf teacher (rho = σ²,
nu = 0; dotattn.theory_vs_erm.diagnostics.train_loss_at), minus the phase-diagram fixed point's e_t:
how far above the RS minimum of its branch the run's overlaps lie in the RS landscape.
"""

from pathlib import Path

import numpy as np

from dotattn.core.integrity import read_records
from dotattn.erm.restart_records import RestartRecord
from dotattn.positional_semantic.catalogue import default_quadrature, solve
from dotattn.positional_semantic.output import read_phase_diagram
from dotattn.positional_semantic.problem import Problem
from dotattn.theory_vs_erm.diagnostics import train_loss_at
from dotattn.verify import verify_folder

ROOT = Path("results/alpha_c_erm/overlaps_d4000")
pb = Problem(omega=0.1)
s2 = pb.sigma**2
rule = default_quadrature(pb).rule(pb.gaussian_dim)
phase = read_phase_diagram("results/phase_diagram", omega=0.1)


def row(alpha, branch, who, m, theta, q, e_t, E, ref):
    e = "" if E is None else f"{E * 1e3:.5f} | {(E - ref) * 1e6:+.2f}"
    return (
        f"| {alpha:g} | {branch} | {who} | {abs(m):.4f} | {abs(theta) / s2:.4f} | {q / s2:.4f} | "
        f"{e_t * 1e3:.5f} | {e or '— | —'} |"
    )


print("| α | branch | state | m | ‖θ‖/σ² | q/σ² | e_t (×1e-3) | E at its overlaps (×1e-3) | E − e_t(RS) (×1e-6) |")
print("|---|---|---|---|---|---|---|---|---|")
for folder in sorted(ROOT.glob("alpha*")):
    verify_folder(folder)
    runs = read_records(folder / "runs.csv", RestartRecord)
    alpha = runs[0].alpha
    fps = {e.branch: e for e in solve(pb, alpha, n_random=0, stability=False).fixed_points if e.converged}
    for branch in ("semantic", "positional"):
        ref = next(p for p in phase if abs(p.alpha - alpha) < 1e-9 and p.branch == branch and p.status == "converged")
        print(
            row(
                alpha,
                branch,
                "RS, phase diagram",
                ref.mu[0, 0],
                ref.theta[0, 0],
                ref.q[0, 0],
                ref.train_loss,
                ref.train_loss,
                ref.train_loss,
            )
        )
        o = fps[branch].overlaps
        if abs(fps[branch].result.train_loss - ref.train_loss) > 1e-9:
            print(
                row(
                    alpha,
                    branch,
                    "RS, informed start",
                    o.mu[0, 0],
                    o.theta[0, 0],
                    o.q[0, 0],
                    fps[branch].result.train_loss,
                    fps[branch].result.train_loss,
                    ref.train_loss,
                )
            )
        for r in (r for r in runs if r.start == branch):
            at = train_loss_at(pb, alpha, r.q, r.theta, r.mu, np.array([[s2]]), np.zeros((1, pb.L)), rule)
            print(
                row(
                    alpha,
                    branch,
                    f"ERM seed {r.seed} ({r.status})",
                    r.mu[0, 0],
                    r.theta[0, 0],
                    r.q[0, 0],
                    r.train_loss,
                    at.train_loss,
                    ref.train_loss,
                )
            )
