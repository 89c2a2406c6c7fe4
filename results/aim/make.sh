#!/usr/bin/env bash
# The results of results/aim, from a clean tree, by part:
#   OMP_NUM_THREADS=1 bash results/aim/make.sh se            # state-evolution folders (about 5 CPU-min)
#   OMP_NUM_THREADS=1 bash results/aim/make.sh gd [T ...]    # gradient descent, d = 100, T = 2 3 4 6 by default
#   OMP_NUM_THREADS=1 bash results/aim/make.sh gd200         # gradient descent, d = 200, T = 2, alpha_bar <= 0.3
#   OMP_NUM_THREADS=1 bash results/aim/make.sh amp [WHICH ...]  # AMP, d = 100: t2 (T = 2, rho = 0.5), 3, 4
#   OMP_NUM_THREADS=1 bash results/aim/make.sh free-entropy  # free entropy, both starts, Bayes-optimal test error
#   OMP_NUM_THREADS=1 bash results/aim/make.sh figures       # every figure, from the committed folders
# Every folder records its own command (manifest.json, summary.json, the CSV comment).
set -euo pipefail
cd "$(dirname "$0")/../.."
R=results/aim
PART=${1:-all}
shift || true
geom() { python -c "import numpy as np; print(','.join(f'{x:.6g}' for x in np.geomspace($1, $2, $3)))"; }
lin() { python -c "import numpy as np; print(','.join(f'{x:.6g}' for x in np.linspace($1, $2, $3)))"; }
# alpha = alpha_bar/(T^2 + T - 2) for the alpha_bar grid of the algorithms (rho = 0.5: perfect recovery at 0.75)
ABAR="0.1 0.2 0.3 0.45 0.6 0.7"
alphas_for() { python -c "print(','.join(f'{a/($1*$1+$1-2):.6g}' for a in [float(x) for x in '$ABAR'.split()]))"; }

if [[ $PART == se || $PART == all ]]; then

# softmax, T = 2, several rho (alpha up to past every perfect-recovery threshold)
for rho in 0.1 0.5 1 2; do
  dotattn aim state-evolution --channel softmax --rho $rho --tokens 2 --alpha "$(lin 0.001 0.3 120)" \
    --out $R/se_softmax_T2_rho$rho --quiet
done
# softmax collapse over T at rho = 0.5: alpha_bar in (0, 1]
for T in 3 4 6; do
  dotattn aim state-evolution --channel softmax --rho 0.5 --tokens $T \
    --alpha "$(python -c "import numpy as np; c=$T*$T+$T-2; print(','.join(f'{x:.6g}' for x in np.linspace(0.004, 1, 60)/c))")" \
    --out $R/se_softmax_T${T}_rho0.5 --quiet
done
# hardmax, T = 2: the gradient of log Z_out, and the public script's phi2/Phi2 for comparison
for rho in 0.1 0.5 1 2; do
  dotattn aim state-evolution --channel hardmax --rho $rho --alpha "$(geom 0.002 10 50)" \
    --out $R/se_hardmax_rho$rho --quiet
  dotattn aim state-evolution --channel hardmax --rho $rho --alpha "$(geom 0.002 10 50)" \
    --hardmax-derivative published --out $R/se_hardmax_published_rho$rho --quiet
done
# small rho: weak recovery at alpha/rho -> 1/(2 F0) (hardmax) and alpha_bar/rho -> 1 (softmax)
for rho in 0.01 0.001 0.0001; do
  dotattn aim state-evolution --channel hardmax --rho $rho --alpha "$(python -c "import numpy as np; print(','.join(f'{x:.6g}' for x in np.linspace(0.05, 1.5, 40)*$rho))")" \
    --out $R/se_hardmax_small_rho$rho --quiet
  dotattn aim state-evolution --channel softmax --rho $rho --tokens 2 --alpha "$(python -c "import numpy as np; print(','.join(f'{x:.6g}' for x in np.linspace(0.05, 0.6, 40)*$rho))")" \
    --out $R/se_softmax_small_rho$rho --quiet
done
fi

if [[ $PART == gd || $PART == all ]]; then
  # gradient descent (Adam, lr 0.1 as the published script, 500 full-batch steps: half its 1000, for the CPU
  # at hand; docs/aim_algorithms.md section 8 gives the change from 500 to 1000 steps) from 16 initialisations
  # per data set, batched; 4 data sets per alpha (seeds 0-3: each its own teacher, tokens and initialisations);
  # d = 100, rho = 0.5; test error on 2000 fresh samples (cost: docs/aim_algorithms.md section 5)
  for T in ${@:-2 3 4 6}; do
    dotattn aim gd --d 100 --rho 0.5 --tokens $T --alpha "$(alphas_for $T)" --seeds 4 --inits 16 --steps 500 \
      --lr 0.1 --device cpu --out $R/gd_softmax_d100_rho0.5_T$T
  done
fi

if [[ $PART == gd200 || $PART == all ]]; then
  # the same at d = 200 (the published figure's size), T = 2, one data set, on the first three alpha_bar points
  # only (the cost is proportional to alpha_bar: about 1.3 CPU-min per 0.1 of alpha_bar at d = 200)
  dotattn aim gd --d 200 --rho 0.5 --tokens 2 --alpha "$(ABAR="0.1 0.2 0.3" alphas_for 2)" --seeds 1 --inits 16 \
    --steps 500 --lr 0.1 --device cpu --out $R/gd_softmax_d200_rho0.5_T2
fi

if [[ $PART == amp || $PART == all ]]; then
  # AMP (damping 0.5, at most 300 iterations), softmax, d = 100, test error of the plug-in predictor on 2000
  # fresh samples. t2: T = 2, rho = 0.5 over alpha, 8 data sets; 3, 4: T = 3 and 4 on the alpha_bar points of
  # gd, 4 data sets. (amp_softmax_d100_rho1_T2 and amp_hardmax_d100_rho0.5_T2 were made by the commands in
  # their manifests, before the test error was recorded.)
  for which in ${@:-t2 3 4}; do
    if [[ $which == t2 ]]; then
      dotattn aim amp --d 100 --rho 0.5 --tokens 2 --channel softmax --alpha 0.05,0.075,0.1,0.125,0.15,0.175,0.2,0.25,0.3 \
        --seeds 8 --out $R/amp_softmax_d100_rho0.5_T2
    else
      dotattn aim amp --d 100 --rho 0.5 --tokens $which --alpha "$(alphas_for $which)" --seeds 4 \
        --out $R/amp_softmax_d100_rho0.5_T$which
    fi
  done
fi

if [[ $PART == free-entropy || $PART == all ]]; then
  # free entropy from both starts, selection, Bayes-optimal test error (beta = 1): softmax rho = 0.5 for every T
  # of the algorithms (the MMSE is the same curve in alpha_bar, the test error is not), hardmax T = 2 over rho
  for T in 2 3 4 6; do
    dotattn aim free-entropy --channel softmax --rho 0.5 --tokens $T \
      --alpha "$(python -c "import numpy as np; c=$T*$T+$T-2; print(','.join(f'{x:.6g}' for x in np.linspace(0.02, 0.74, 15)/c))")" \
      --test-samples 50000 --out $R/fe_softmax_rho0.5_T$T --quiet
  done
  for rho in 0.1 0.5 2; do
    dotattn aim free-entropy --channel hardmax --rho $rho --alpha "$(geom 0.002 10 10)" --out $R/fe_hardmax_rho$rho --quiet
  done
fi

if [[ $PART == figures || $PART == all ]]; then
# every figure is drawn into a scratch folder and moved into place at the end: drawn in place, the first
# rewritten figure would make the tree dirty for all later ones (their provenance would record a modified tree)
F=$(mktemp -d)
trap 'rm -rf "$F"' EXIT
dotattn aim figure --from $R/se_softmax_T2_rho0.1 --from $R/se_softmax_T2_rho0.5 --from $R/se_softmax_T2_rho1 \
  --from $R/se_softmax_T2_rho2 --title "softmax, T = 2 (dotted: perfect recovery)" --out $F/mmse_softmax.png
dotattn aim figure --from $R/se_softmax_T2_rho0.5 --from $R/se_softmax_T3_rho0.5 --from $R/se_softmax_T4_rho0.5 \
  --from $R/se_softmax_T6_rho0.5 --x alpha_bar --title "softmax, ρ = 0.5: the four curves coincide in ᾱ" \
  --out $F/collapse_softmax.png
dotattn aim figure --from $R/se_hardmax_rho0.1 --from $R/se_hardmax_rho0.5 --from $R/se_hardmax_rho1 \
  --from $R/se_hardmax_rho2 --from $R/se_hardmax_published_rho0.1 --from $R/se_hardmax_published_rho0.5 \
  --from $R/se_hardmax_published_rho1 --from $R/se_hardmax_published_rho2 \
  --title "hardmax, T = 2: gradient of log Z_out (solid) vs the published φ₂/Φ₂ (dashed)" --out $F/mmse_hardmax.png
dotattn aim figure --from $R/se_hardmax_small_rho0.01 --from $R/se_hardmax_small_rho0.001 \
  --from $R/se_hardmax_small_rho0.0001 --x alpha_over_rho --title "hardmax, small ρ: weak recovery" \
  --out $F/weak_recovery_hardmax.png
dotattn aim figure --from $R/se_softmax_small_rho0.01 --from $R/se_softmax_small_rho0.001 \
  --from $R/se_softmax_small_rho0.0001 --x alpha_over_rho --title "softmax, T = 2, small ρ: weak recovery" \
  --out $F/weak_recovery_softmax.png

# algorithm points on the state-evolution curves
dotattn aim figure --from $R/se_softmax_T2_rho0.5 --from $R/se_softmax_T2_rho1 --points $R/amp_softmax_d100_rho0.5_T2 \
  --points $R/amp_softmax_d100_rho1_T2 --points $R/gd_softmax_d100_rho0.5_T2 --points $R/gd_softmax_d200_rho0.5_T2 \
  --title "softmax, T = 2: state evolution, AMP and GD at d = 100 (large markers: d = 200)" --out $F/mmse_softmax_algorithms.png
dotattn aim figure --from $R/se_hardmax_rho0.5 --from $R/se_hardmax_published_rho0.5 --points $R/amp_hardmax_d100_rho0.5_T2 \
  --title "hardmax, T = 2, ρ = 0.5: AMP (d = 100) against both curves" --out $F/mmse_hardmax_algorithms.png
# the published softmax panel: MMSE against ᾱ for T = 2…6 (state evolution, AMP, GD, averaged GD), d = 100
dotattn aim figure --from $R/se_softmax_T2_rho0.5 --from $R/se_softmax_T3_rho0.5 --from $R/se_softmax_T4_rho0.5 \
  --from $R/se_softmax_T6_rho0.5 --x alpha_bar \
  --points $R/gd_softmax_d100_rho0.5_T2 --points $R/gd_softmax_d100_rho0.5_T3 --points $R/gd_softmax_d100_rho0.5_T4 \
  --points $R/gd_softmax_d100_rho0.5_T6 --points $R/gd_softmax_d200_rho0.5_T2 \
  --points $R/amp_softmax_d100_rho0.5_T2 --points $R/amp_softmax_d100_rho0.5_T3 --points $R/amp_softmax_d100_rho0.5_T4 \
  --title "softmax, ρ = 0.5, d = 100 (large markers: d = 200): one state-evolution curve in ᾱ for every T" \
  --out $F/mmse_softmax_T_algorithms.png
# test error: Bayes-optimal (curves, ±2 Monte-Carlo standard errors) and the estimators' plug-in predictors
dotattn aim figure --y test_error --from $R/fe_softmax_rho0.5_T2 --from $R/fe_softmax_rho0.5_T3 \
  --from $R/fe_softmax_rho0.5_T4 --from $R/fe_softmax_rho0.5_T6 --x alpha_bar \
  --points $R/gd_softmax_d100_rho0.5_T2 --points $R/gd_softmax_d100_rho0.5_T3 --points $R/gd_softmax_d100_rho0.5_T4 \
  --points $R/gd_softmax_d100_rho0.5_T6 --points $R/gd_softmax_d200_rho0.5_T2 \
  --points $R/amp_softmax_d100_rho0.5_T2 --points $R/amp_softmax_d100_rho0.5_T3 --points $R/amp_softmax_d100_rho0.5_T4 \
  --title "softmax (β = 1), ρ = 0.5: test error, Bayes-optimal and at d = 100 (large markers: d = 200)" \
  --out $F/test_error_softmax.png
dotattn aim figure --y test_error --from $R/fe_hardmax_rho0.1 --from $R/fe_hardmax_rho0.5 \
  --from $R/fe_hardmax_rho2 --title "hardmax, T = 2: Bayes-optimal test error ½ − asin(q/Q0)/π" \
  --out $F/test_error_hardmax.png
mv "$F"/*.png $R/

fi
