"""Markdown tables of the erm-restarts study (benchmarks/erm_restarts_study.sh): per folder and branch,
the spread of e_t over restarts, the distinct minima, D_ab over pairs (all pairs, and pairs of two
informed starts of the same kind), the lowest-e_t run per seed, and the theory-at-run-overlaps
diagnostic where present. Usage: python benchmarks/erm_restarts_tables.py FOLDER... (each an
erm-restarts output)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from dotattn.core.io import read_csv, read_json_if_valid
from dotattn.erm.restart_records import PairRecord, RestartRecord, summarise_restarts
from dotattn.theory_vs_erm.diagnostics import DiagnosticRecord


def _ms(x) -> str:
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return "–"
    return f"{a.mean():.5f} ± {a.std(ddof=1):.5f}" if a.size > 1 else f"{a.mean():.5f}"


def folder_rows(folder: Path, informed_only: bool = False) -> list[str]:
    """Table rows of one folder; ``informed_only``: only the runs from informed starts, and their pairs."""
    data = read_json_if_valid(folder / "summary.json")
    if data is None:
        return []
    runs = [RestartRecord.from_row(r) for r in data["runs"]]
    pairs = [PairRecord.from_row(r) for r in read_csv(folder / "pairs.csv")]
    if informed_only:
        keep = {(r.seed, r.restart) for r in runs if r.start != "random"}
        runs = [r for r in runs if (r.seed, r.restart) in keep]
        pairs = [p for p in pairs if (p.seed, p.a) in keep and (p.seed, p.b) in keep]
    diag = [DiagnosticRecord.from_row(r) for r in data.get("diagnostics", [])]
    sigma2 = data["provenance"]["parameters"]["problem"]["sigma"] ** 2
    summ = {(s.seed, s.branch): s for s in summarise_restarts(runs, pairs)}
    out = []
    for branch in sorted({r.branch for r in runs}):
        conv = [r for r in runs if r.branch == branch and r.status == "converged"]
        if not conv:
            continue
        start = {(r.seed, r.restart): r.start for r in runs}
        pb = [p for p in pairs if p.branch == branch]
        same = [p.distance for p in pb if start[(p.seed, p.a)] == start[(p.seed, p.b)] != "random"]
        seeds = sorted({r.seed for r in conv})
        per_seed_std = [
            np.std([r.train_loss for r in conv if r.seed == s], ddof=1)
            for s in seeds
            if sum(r.seed == s for r in conv) > 1
        ]
        best = [min((r for r in conv if r.seed == s), key=lambda r: r.train_loss) for s in seeds]
        th = [np.linalg.norm(r.theta) / sigma2 for r in conv]
        dg = [x for x in diag if x.branch == branch and x.status == "converged"]
        dcell = (
            f"{_ms([x.test_error_rel_diff * 100 for x in dg])} | {_ms([x.train_loss_rel_diff * 100 for x in dg])}"
            if dg
            else "– | –"
        )
        pooled = summ[(-1, branch)]
        out.append(
            f"| {folder.name} | {branch} | {len(conv)}/{sum(r.branch == branch for r in runs)} | {pooled.minima} | "
            f"{_ms([r.train_loss for r in conv])} | {np.mean(per_seed_std) if per_seed_std else float('nan'):.2e} | "
            f"{min(th):.3f}–{max(th):.3f} ({np.mean(th):.3f}) | {np.mean([np.trace(r.q) for r in conv]) / sigma2:.3f} | "
            f"{_ms([r.test_error for r in conv])} | "
            f"{np.mean([p.distance for p in pb]) if pb else float('nan'):.3f} / "
            f"{max([p.distance for p in pb]) if pb else float('nan'):.3f} | "
            f"{np.mean(same) if same else float('nan'):.3f} / {max(same) if same else float('nan'):.3f} | "
            + ", ".join(
                f"{b.train_loss:.6f} ({np.linalg.norm(b.theta) / sigma2:.3f}, {b.test_error:.5f})" for b in best
            )
            + f" | {dcell} |"
        )
    return out


HEADER = (
    "| folder | branch | conv./runs | minima | e_t mean ± std (all restarts) | e_t std within a seed (mean) | "
    "‖θ‖/σ² range (mean) | Tr q/σ² mean | ε_g mean ± std | D_ab mean / max | D_ab informed-informed mean / max | "
    "lowest e_t per seed (‖θ‖/σ², ε_g) | diag. Δε_g % | diag. Δe_t % |\n|" + "---|" * 14
)


def main(argv: list[str]) -> None:
    for informed in (False, True):
        print("\n" + ("Informed starts only" if informed else "All restarts") + "\n\n" + HEADER)
        for f in argv:
            for row in folder_rows(Path(f), informed):
                print(row)


if __name__ == "__main__":
    main(sys.argv[1:])
