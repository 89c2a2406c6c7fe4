"""Every d -> inf law of this folder's README, from the verified rows of an erm-alpha-c folder.

    python results/alpha_c_erm/refit.py FOLDER [OMEGA THEORY_ALPHA_C]

Reads FOLDER through the package's verifying reader (manifest, delta.csv -> crossings recomputed and
compared), then per ω prints: the primary law (1/d over every d), 1/sqrt(d) over every d, 1/d over
d >= 1000 only, each with α_c(∞), its 95 % bootstrap interval, slope, χ², dof and the χ² p-value, and
the largest d's cell alone (mean, standard error and, given THEORY_ALPHA_C, its offset in standard
errors). The same estimator as erm-alpha-c (dotattn.theory_vs_erm.crossing.fit_finite_size: weights
1/se², 4000 bootstrap replicas, seeded). Writes nothing.
"""

import sys

import numpy as np
from scipy.stats import chi2

from dotattn.core.status import STATUS_CONVERGED
from dotattn.theory_vs_erm.alpha_c import cell_crossings
from dotattn.theory_vs_erm.crossing import fit_finite_size
from dotattn.theory_vs_erm.output import read_alpha_c_part

LAWS = (
    ("primary: 1/d, every d", "1/d", 0),
    ("S1: 1/sqrt(d), every d", "1/sqrt(d)", 0),
    ("S2: 1/d, d >= 1000", "1/d", 1000),
)


def main(folder: str, omega: float | None = None, theory: float | None = None) -> None:
    part = read_alpha_c_part(folder)
    omegas = sorted({c.omega for c in part.cells}) if omega is None else [omega]
    for w in omegas:
        cells = sorted((c for c in part.cells if abs(c.omega - w) < 1e-12), key=lambda c: c.d)
        per_d = {c.d: np.array([x.alpha_c for x in cell_crossings(c, STATUS_CONVERGED)]) for c in cells}
        print(
            f"omega = {w:g}: d = {', '.join(f'{d} ({np.isfinite(v).sum()}/{v.size} seeds cross)' for d, v in per_d.items())}"
        )
        for name, model, dmin in LAWS:
            ds = [d for d in per_d if d >= dmin]
            fit = fit_finite_size(ds, [per_d[d] for d in ds], model)
            p = chi2.sf(fit.chi2, fit.dof) if fit.dof > 0 else float("nan")
            print(
                f"  {name:24s} alpha_c(inf) = {fit.alpha_inf:.4f} [{fit.ci_lo:.4f}, {fit.ci_hi:.4f}]  "
                f"slope {fit.slope:+.4g}  chi2 = {fit.chi2:.2f} for {fit.dof} dof (p = {p:.3f})"
            )
        d = max(per_d)
        v = per_d[d][np.isfinite(per_d[d])]
        se = v.std(ddof=1) / np.sqrt(v.size)
        line = f"  S3: d = {d} alone        alpha_c = {v.mean():.4f}  se {se:.4f}  ({v.size} seeds)"
        if theory is not None:
            line += f"  offset {v.mean() - theory:+.4f} = {(v.mean() - theory) / se:+.2f} se"
        print(line)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], float(args[1]) if len(args) > 1 else None, float(args[2]) if len(args) > 2 else None)
