#!/usr/bin/env bash
# The restarts and larger-d study of issue 14 (items 1-3, ERM side). Sizes and seeds were fixed
# before any outcome was looked at. Run from the repository root on a clean committed tree:
#   bash benchmarks/erm_restarts_study.sh A   # stream A: (2,1,2) at larger d, orthonormal restarts
#   bash benchmarks/erm_restarts_study.sh B   # stream B: (2,1,2) Gaussian-teacher restarts, toy model
# (the two streams can run at once). Each command's wall time is appended to its folder's wall.txt.
set -euo pipefail
DOT=${DOT:-.venv/bin/dotattn}
R2=results/general/L2_r1_rt2
TOY=results/general/toy_restarts
common=(--threads 1 --quiet --steps 20000 --tol 1e-7)
run() {  # run OUT ARGS...: one command, its wall time next to its output
  local out=$1; shift
  local t0=$(date +%s)
  "$DOT" erm-restarts "$@" "${common[@]}" --out "$out"
  echo "$(( $(date +%s) - t0 )) s: dotattn erm-restarts $* ${common[*]} --out $out" > "$out/wall.txt"
}
case "${1:-}" in
A)
  # item 3: (2,1,2), orthonormal teacher, semantic start (Q = Q*[:,0]), 8 seeds, theory at each run's overlaps
  for a in 2 1.5; do for d in 1000 2000; do
    run $R2/large_d/alpha${a}_d${d} --d $d --alpha $a --teacher-rank 2 --teacher orthonormal --seeds 8 \
        --random 0 --semantic 1 --informed-noise 0 --test-samples 20000 --diagnose
  done; done
  # item 2 (i): (2,1,2) semantic sector (mu = 0), orthonormal teacher, 12 random + 12 semantic restarts, 2 seeds
  for a in 2 1.5; do for d in 250 500 1000 2000; do
    diag=(); [ $d = 1000 ] && diag=(--diagnose)
    run $R2/restarts/orthonormal_alpha${a}_d${d} --d $d --alpha $a --teacher-rank 2 --teacher orthonormal \
        --sector semantic --seeds 2 --random 12 --semantic 12 "${diag[@]}"
  done; done ;;
B)
  # item 2 (i): the same with the Gaussian teacher
  for a in 2 1.5; do for d in 250 500 1000 2000; do
    diag=(); [ $d = 1000 ] && diag=(--diagnose)
    run $R2/restarts/gaussian_alpha${a}_d${d} --d $d --alpha $a --teacher-rank 2 --teacher gaussian \
        --sector semantic --seeds 2 --random 12 --semantic 12 "${diag[@]}"
  done; done
  # item 2 (ii), (iii): toy model (2,1,1), alpha = 2, omega = 0.3, free, 8 random + 8 semantic + 8 positional
  for lam in 0.01 1 0.1; do for d in 250 500 1000 2000; do
    diag=(); [ $d = 1000 ] && diag=(--diagnose)
    run $TOY/lambda${lam}_d${d} --d $d --alpha 2 --lambda $lam --seeds 2 --random 8 --semantic 8 --positional 8 \
        "${diag[@]}"
  done; done ;;
*) echo "usage: $0 A|B" >&2; exit 2 ;;
esac
