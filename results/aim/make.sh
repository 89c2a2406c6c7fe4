#!/usr/bin/env bash
# The state-evolution results of results/aim, from a clean tree:
#   OMP_NUM_THREADS=1 bash results/aim/make.sh
# Every folder records its own command (manifest.json, summary.json, the CSV comment).
set -euo pipefail
cd "$(dirname "$0")/../.."
R=results/aim
geom() { python -c "import numpy as np; print(','.join(f'{x:.6g}' for x in np.geomspace($1, $2, $3)))"; }
lin() { python -c "import numpy as np; print(','.join(f'{x:.6g}' for x in np.linspace($1, $2, $3)))"; }

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

# figures
dotattn aim figure --from $R/se_softmax_T2_rho0.1 --from $R/se_softmax_T2_rho0.5 --from $R/se_softmax_T2_rho1 \
  --from $R/se_softmax_T2_rho2 --title "softmax, T = 2 (dotted: perfect recovery)" --out $R/mmse_softmax.png
dotattn aim figure --from $R/se_softmax_T2_rho0.5 --from $R/se_softmax_T3_rho0.5 --from $R/se_softmax_T4_rho0.5 \
  --from $R/se_softmax_T6_rho0.5 --x alpha_bar --title "softmax, rho = 0.5: collapse in alpha_bar" \
  --out $R/collapse_softmax.png
dotattn aim figure --from $R/se_hardmax_rho0.1 --from $R/se_hardmax_rho0.5 --from $R/se_hardmax_rho1 \
  --from $R/se_hardmax_rho2 --from $R/se_hardmax_published_rho0.1 --from $R/se_hardmax_published_rho0.5 \
  --from $R/se_hardmax_published_rho1 --from $R/se_hardmax_published_rho2 \
  --title "hardmax, T = 2: gradient (solid) vs published phi2/Phi2 (dashed)" --out $R/mmse_hardmax.png
dotattn aim figure --from $R/se_hardmax_small_rho0.01 --from $R/se_hardmax_small_rho0.001 \
  --from $R/se_hardmax_small_rho0.0001 --x alpha_over_rho --title "hardmax, small rho: weak recovery" \
  --out $R/weak_recovery_hardmax.png
dotattn aim figure --from $R/se_softmax_small_rho0.01 --from $R/se_softmax_small_rho0.001 \
  --from $R/se_softmax_small_rho0.0001 --x alpha_over_rho --title "softmax T = 2, small rho: weak recovery" \
  --out $R/weak_recovery_softmax.png

# with the algorithm folders amp_*/, gd_*/ (dotattn aim amp | gd): their points on the state-evolution curves
dotattn aim figure --from $R/se_softmax_T2_rho0.5 --from $R/se_softmax_T2_rho1 --points $R/amp_softmax_d100_rho0.5_T2 \
  --points $R/amp_softmax_d100_rho1_T2 --points $R/gd_softmax_d40_rho0.5_T2 \
  --title "softmax T = 2: state evolution, AMP (d = 100), GD (d = 40)" --out $R/mmse_softmax_algorithms.png
dotattn aim figure --from $R/se_hardmax_rho0.5 --from $R/se_hardmax_published_rho0.5 --points $R/amp_hardmax_d100_rho0.5_T2 \
  --title "hardmax T = 2, rho = 0.5: AMP (d = 100) against both curves" --out $R/mmse_hardmax_algorithms.png
