#!/usr/bin/env bash
# The image claims over many trained networks (the rule, fixed before the runs, is in
# results/paths/omniglot_networks/README.md). Run from a clean committed tree (a worktree of its own), as many
# streams at once as there are cores to spare:
#   bash benchmarks/paths_networks_study.sh OUT     # one stream; start it again (in another shell) for a second
# OUT is a scratch folder outside the repository. The networks (width 32 seeds 0-7, then width 64 seeds 0-2, then
# width 128 seeds 0-2) form one queue: a stream claims a network by creating OUT/claims/w{width}_seed{seed}
# (atomic mkdir) and skips networks claimed by another stream or finished (summary.json present). After an
# interruption, remove OUT/claims and rerun: a finished training is reused, an interrupted one resumes.
set -euo pipefail
DOT=${DOT:-.venv/bin/dotattn}
OMNIGLOT=${OMNIGLOT:-../shared/data/omniglot}
OUT=${1:?usage: $0 OUT}
common=(--omniglot "$OMNIGLOT" --P 600 --P-validation 1000 --P-test 1000 --P-ood 1000
  --temperatures 0.01,0.03,0.1,0.3,1,3 --sample-N 0 --seed 0 --split-seed 0 --quiet)
network() {  # network WIDTH QK_DIM SEED
  local out=$OUT/w$1/seed$3
  [ -f "$out/summary.json" ] && return 0
  mkdir -p "$OUT/claims"
  mkdir "$OUT/claims/w$1_seed$3" 2>/dev/null || return 0
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$DOT" paths images "${common[@]}" --gd-width "$1" --qk-dim "$2" \
    --train-seed "$3" --out "$out"
}
for s in 0 1 2 3 4 5 6 7; do network 32 16 "$s"; done
for s in 0 1 2; do network 64 32 "$s"; done
for s in 0 1 2; do network 128 64 "$s"; done
