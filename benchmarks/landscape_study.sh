#!/usr/bin/env bash
# Which minimum does training find? Best-of-K restarts at omega = 0.1 (the rule, fixed before the runs, is in
# results/landscape/README.md). Run from a clean committed tree (a worktree of its own, so that commits
# elsewhere do not change the code under the runs), as many streams at once as there are cores to spare:
#   bash benchmarks/landscape_study.sh OUT     # one stream; start it again (in another shell) for a second
# OUT is a scratch folder outside the repository (writing into the tree would mark the later runs' provenance as
# modified); the folders are copied into results/landscape/runs/ afterwards. The cells (d = 500, then 1000, then
# 2000, alpha ascending) form one queue: a stream claims a cell by creating OUT/claims/d{d}_alpha{alpha}
# (atomic mkdir) and skips cells claimed by another stream or finished (both folders hold summary.json). After an
# interruption, remove OUT/claims and rerun: finished folders are kept. Per (d, alpha) two erm-restarts folders:
#   informed: the informed positional and semantic starts without noise (the runs of erm-alpha-c);
#   restarts: K_max - 1 noisy copies of each informed start (entry noise 0.3) and a few random starts.
set -euo pipefail
DOT=${DOT:-.venv/bin/dotattn}
OUT=${1:?usage: $0 OUT}
common=(--omega 0.1 --seeds 16 --first-seed 0 --steps 3000 --tol 1e-7 --test-samples 2000 --threads 1 --quiet)
ALPHAS=(0.46 0.50 0.54 0.58 0.62 0.66 0.70 0.74 0.78 0.82 0.86 0.90 0.94 0.98)
cell() {  # cell D ALPHA NOISY RANDOM: the two folders of one (d, alpha)
  local base=$OUT/d$1/alpha$2
  [ -f "$base/informed/summary.json" ] && [ -f "$base/restarts/summary.json" ] && return 0
  mkdir -p "$OUT/claims"
  mkdir "$OUT/claims/d$1_alpha$2" 2>/dev/null || return 0
  [ -f "$base/informed/summary.json" ] ||
    "$DOT" erm-restarts "${common[@]}" --d "$1" --alpha "$2" --random 0 --semantic 1 --positional 1 \
      --informed-noise 0 --out "$base/informed"
  [ -f "$base/restarts/summary.json" ] ||
    "$DOT" erm-restarts "${common[@]}" --d "$1" --alpha "$2" --random "$4" --semantic "$3" --positional "$3" \
      --informed-noise 0.3 --random-scale 0.1 --out "$base/restarts"
}
for a in "${ALPHAS[@]}"; do cell 500 "$a" 63 8; done
for a in "${ALPHAS[@]}"; do cell 1000 "$a" 63 8; done
for a in "${ALPHAS[@]}"; do cell 2000 "$a" 15 2; done
