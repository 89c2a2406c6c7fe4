"""The ERM α_c of each architecture variant beside the tied baseline, from verified rows.

    python results/variants/table.py VARIANT_FOLDER [VARIANT_FOLDER ...]

For every (ω, d) cell of each erm-alpha-c folder (read through the package's verifying reader:
manifest, delta.csv -> crossings recomputed and compared): the mean of the per-seed crossings, its
standard error over seeds, the seeds with a crossing, and the per-seed difference from the tied study
``results/alpha_c_erm`` on the seeds both have a crossing for (same seed = same teacher and, except
for correlated tokens, the same data), with its standard error. Writes nothing.
"""

import sys

import numpy as np

from dotattn.core.status import STATUS_CONVERGED
from dotattn.theory_vs_erm.alpha_c import cell_crossings
from dotattn.theory_vs_erm.output import read_alpha_c_part

TIED = "results/alpha_c_erm"


def per_seed(folder: str) -> dict[tuple[float, int], dict[int, float]]:
    """{(ω, d): {seed: α_c (NaN without a crossing)}} of one verified folder."""
    part = read_alpha_c_part(folder)
    return {(round(c.omega, 12), c.d): {x.seed: x.alpha_c for x in cell_crossings(c, STATUS_CONVERGED)}
            for c in part.cells}


def mean_se(values: np.ndarray) -> tuple[float, float]:
    v = values[np.isfinite(values)]
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


def main(folders: list[str]) -> None:
    tied = per_seed(TIED)
    print("variant | omega | d | seeds crossing | alpha_c (mean +- se) | tied, same seeds | variant - tied (paired, +- se)")
    for folder in folders:
        for (w, d), seeds in sorted(per_seed(folder).items()):
            a = np.array(list(seeds.values()))
            m, se = mean_se(a)
            line = f"{folder} | {w:g} | {d} | {np.isfinite(a).sum()}/{a.size} | {m:.3f} +- {se:.3f}"
            base = tied.get((w, d))
            if base is not None:
                common = [s for s in seeds if s in base and np.isfinite(seeds[s]) and np.isfinite(base[s])]
                diff = np.array([seeds[s] - base[s] for s in common])
                tm, tse = mean_se(np.array([base[s] for s in common]))
                line += (f" | {tm:.3f} +- {tse:.3f} ({len(common)}) | {diff.mean():+.3f} +- "
                         f"{diff.std(ddof=1) / np.sqrt(diff.size):.3f}")
            print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
