#!/usr/bin/env bash
# The ERM restarts and larger-d study. Sizes and seeds were fixed
# before any outcome was looked at (d = 2000 for alpha = 1.5 and the two ridge controls was
# first left out for compute time, and run once the other folders had finished). Run from the repository root on a
# clean committed tree:
#   bash benchmarks/erm_restarts_study.sh A   # stream A: (2,1,2) at larger d, orthonormal restarts
#   bash benchmarks/erm_restarts_study.sh B   # stream B: Gaussian-teacher restarts at alpha = 2
#   bash benchmarks/erm_restarts_study.sh C   # stream C: toy model, then Gaussian-teacher restarts at alpha = 1.5
# (the streams can run at once). A folder that already holds summary.json is skipped. Each
# command's wall time is written to its folder's wall.txt (also in summary.json's provenance).
set -euo pipefail
DOT=${DOT:-.venv/bin/dotattn}
R2=results/general/L2_r1_rt2
TOY=results/general/toy_restarts
common=(--threads 1 --quiet --steps 20000 --tol 1e-7)
run() {  # run OUT ARGS...: one command, its wall time next to its output
  local out=$1; shift
  [ -f "$out/summary.json" ] && return 0
  local t0=$(date +%s)
  "$DOT" erm-restarts "$@" "${common[@]}" --out "$out"
  echo "$(( $(date +%s) - t0 )) s: dotattn erm-restarts $* ${common[*]} --out $out" > "$out/wall.txt"
}
restarts212() {  # restarts212 TEACHER ALPHA D: (2,1,2) semantic sector, 12 random + 12 semantic, 2 seeds
  local diag=(); [ "$3" = 1000 ] && diag=(--diagnose)
  run $R2/restarts/${1}_alpha${2}_d${3} --d $3 --alpha $2 --teacher-rank 2 --teacher $1 --sector semantic \
      --seeds 2 --random 12 --semantic 12 "${diag[@]}"
}
toy() {  # toy LAMBDA D: toy model, alpha = 2, omega = 0.3, free, 8 random + 8 semantic + 8 positional, 2 seeds
  local diag=(); [ "$2" = 1000 ] && diag=(--diagnose)
  run $TOY/lambda${1}_d${2} --d $2 --alpha 2 --lambda $1 --seeds 2 --random 8 --semantic 8 --positional 8 "${diag[@]}"
}
case "${1:-}" in
A)
  # item 3: (2,1,2), orthonormal teacher, semantic start (Q = Q*[:,0]), 8 seeds, theory at each run's overlaps
  for a in 2 1.5; do for d in 1000 2000; do
    run $R2/large_d/alpha${a}_d${d} --d $d --alpha $a --teacher-rank 2 --teacher orthonormal --seeds 8 \
        --random 0 --semantic 1 --informed-noise 0 --test-samples 20000 --diagnose
  done; done
  for d in 250 500 1000 2000; do restarts212 orthonormal 2 $d; done
  for d in 250 500 1000 2000; do restarts212 orthonormal 1.5 $d; done ;;
B)
  for d in 250 500 1000 2000; do restarts212 gaussian 2 $d; done ;;
C)
  for d in 250 500 1000 2000; do toy 0.01 $d; done
  for d in 250 500 1000 2000; do toy 1 $d; done
  for d in 250 500 1000 2000; do toy 0.1 $d; done
  for d in 250 500 1000 2000; do restarts212 gaussian 1.5 $d; done ;;
*) echo "usage: $0 A|B|C" >&2; exit 2 ;;
esac
