"""Optional compiled kernel of the toy model's prox Newton iteration (numba, the ``fast`` extra).

:func:`newton_toy` runs, node by node in one compiled loop, exactly the steps of the vectorised
:func:`dotattn.positional_semantic.prox._newton_toy`: the same objective, gradient and Hessian, the same
safeguarded 2 × 2 solve (Cramer's rule where H is safely positive definite, else the closed-form
eigendecomposition with reflected and floored eigenvalues), the same Armijo test and backtracking, and
the same stopping rule. The two agree to rounding (the exponential is libm's here and numpy's there,
which can differ in the last bit). Without numba (``pip install .``), or with ``DOTATTN_COMPILED=0``,
:data:`AVAILABLE` is False and the vectorised kernel is used.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["AVAILABLE", "newton_toy"]

AVAILABLE = False
if os.environ.get("DOTATTN_COMPILED", "1") != "0":
    try:
        import numba
        AVAILABLE = True
    except ImportError:  # the light install: the vectorised kernel
        pass

_ARMIJO = 1e-4
_EIG_FLOOR = 1e-8

if AVAILABLE:
    @numba.njit(cache=True, inline="always")
    def _expit(x: float) -> float:
        return 1.0 / (1.0 + np.exp(-x))

    @numba.njit(cache=True, inline="always")
    def _value(x1, x2, c1, c2, t1, t2, v, s2):
        d1, d2 = x1 - c1, x2 - c2
        sa = _expit(x1 * (x1 - x2))
        sb = _expit(x2 * (x2 - x1))
        ra, rb = sa - t1, sb - t2
        return 0.5 * (d1 * v * d1 + d2 * v * d2) + s2 * (ra * ra + rb * rb), sa, sb

    @numba.njit(cache=True, inline="always")
    def _solve(a, b, c, g1, g2):
        det = a * c - b * b
        if a > 0 and det > 1e-6 * (a + c) ** 2:
            return -(c * g1 - b * g2) / det, -(a * g2 - b * g1) / det
        mean, half = 0.5 * (a + c), np.sqrt(0.25 * (a - c) ** 2 + b * b)
        lam1, lam2 = mean - half, mean + half
        v1, v2 = b, lam2 - a
        if abs(v1) + abs(v2) < 1e-300:
            if abs(a - c) > 0 and a > c:
                v1, v2 = 1.0, 0.0
            else:
                v1, v2 = 0.0, 1.0
        nrm = np.hypot(v1, v2)
        v1, v2 = v1 / nrm, v2 / nrm
        scale = max(abs(lam2), abs(lam1))
        floor = _EIG_FLOOR * max(scale, 1e-300)
        l1 = max(abs(lam1), floor)
        l2 = max(abs(lam2), floor)
        p2 = (v1 * g1 + v2 * g2) / l2
        p1 = (-v2 * g1 + v1 * g2) / l1
        return -(p2 * v1 - p1 * v2), -(p2 * v2 + p1 * v1)

    @numba.njit(cache=True)
    def _kernel(x1s, x2s, c1s, c2s, t1s, t2s, v, s2, max_iter, gtol, out1, out2, outv):
        last = 0
        for m in range(x1s.shape[0]):
            x1, x2, c1, c2, t1, t2 = x1s[m], x2s[m], c1s[m], c2s[m], t1s[m], t2s[m]
            fa, sa, sb = _value(x1, x2, c1, c2, t1, t2, v, s2)
            it = 0
            for it in range(1, max_iter + 1):
                ra, rb = sa - t1, sb - t2
                da, db = sa * (1 - sa), sb * (1 - sb)
                ga, gb = 2 * s2 * ra * da, 2 * s2 * rb * db
                a1, a2, b1, b2 = 2 * x1 - x2, -x1, -x2, 2 * x2 - x1
                g1 = (x1 - c1) * v + (ga * a1 + gb * b1)
                g2 = (x2 - c2) * v + (ga * a2 + gb * b2)
                if max(abs(g1), abs(g2)) < gtol:
                    break
                haa = 2 * s2 * (da * da + ra * da * (1 - 2 * sa))
                hbb = 2 * s2 * (db * db + rb * db * (1 - 2 * sb))
                H11 = (haa * a1 * a1 + hbb * b1 * b1 + 2 * ga) + v
                H22 = (haa * a2 * a2 + hbb * b2 * b2 + 2 * gb) + v
                H12 = haa * a1 * a2 + hbb * b1 * b2 - ga - gb
                p1, p2 = _solve(H11, H12, H22, g1, g2)
                slope = g1 * p1 + g2 * p2
                y1, y2 = x1 + p1, x2 + p2
                ft, sat, sbt = _value(y1, y2, c1, c2, t1, t2, v, s2)
                ok = (ft <= fa + _ARMIJO * slope) or (-slope < 1e-13 * (1.0 + abs(fa)))
                if not ok:
                    t = 0.5
                    for _ in range(60):
                        y1, y2 = x1 + t * p1, x2 + t * p2
                        ft, sat, sbt = _value(y1, y2, c1, c2, t1, t2, v, s2)
                        if ft <= fa + _ARMIJO * t * slope:
                            ok = True
                            break
                        t *= 0.5
                if not ok:
                    break
                x1, x2, fa, sa, sb = y1, y2, ft, sat, sbt
            out1[m], out2[m], outv[m] = x1, x2, fa
            last = max(last, it)
        return last


def newton_toy(h0: np.ndarray, centre: np.ndarray, target: np.ndarray, v: float, s2: float,
               max_iter: int, gtol: float) -> tuple[np.ndarray, np.ndarray, int]:
    """The compiled :func:`dotattn.positional_semantic.prox._newton_toy` (same arguments and returns:
    h (M, 2, 1), value (M,), the iterations of the slowest node)."""
    M = h0.shape[0]
    out1, out2, outv = np.empty(M), np.empty(M), np.empty(M)
    it = _kernel(np.ascontiguousarray(h0[:, 0, 0]), np.ascontiguousarray(h0[:, 1, 0]),
                 np.ascontiguousarray(centre[:, 0, 0]), np.ascontiguousarray(centre[:, 1, 0]),
                 np.ascontiguousarray(target[:, 0, 0]), np.ascontiguousarray(target[:, 1, 1]),
                 float(v), float(s2), int(max_iter), float(gtol), out1, out2, outv)
    return np.stack([out1, out2], axis=1)[:, :, None], outv, int(it)
