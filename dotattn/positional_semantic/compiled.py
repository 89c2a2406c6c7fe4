"""Compiled kernel of the toy model's prox Newton iteration (numba, a default dependency).

:func:`newton_toy` runs, node by node in one compiled loop, exactly the steps of the vectorised
:func:`dotattn.positional_semantic.prox._newton_toy`: the same objective, gradient and Hessian, the same
safeguarded 2 × 2 solve (Cramer's rule where H is safely positive definite, else the closed-form
eigendecomposition with reflected and floored eigenvalues), the same Armijo test and backtracking, and
the same stopping rule. The two agree to rounding (the exponential is libm's here and numpy's there,
which can differ in the last bit). numba is a default dependency (``pip install .`` brings it); where it
cannot be imported (no wheel for the platform, a broken install, a numpy it does not support) the
vectorised kernel is used and one line on stderr says so, once per run (the first import in a process tree:
:data:`NOTICE_ENV` in the environment marks it said, so spawned workers stay quiet). With
``DOTATTN_COMPILED=0`` the vectorised kernel is used silently (a deliberate choice). :data:`AVAILABLE` tells
which kernel runs; :data:`UNAVAILABLE_REASON` why the compiled one does not.

:func:`newton_toy_best` runs every start of every node and keeps the best one (with f = V⁻¹(ĥ − c)) in the
same loop: bit for bit what :func:`newton_toy` followed by numpy's argmin gives, without the copies of the
centres and targets per start (the toy model's global prox,
:func:`dotattn.positional_semantic.prox.minimise_envelope`).
"""

from __future__ import annotations

import os
import sys

import numpy as np

__all__ = ["AVAILABLE", "UNAVAILABLE_REASON", "NOTICE_ENV", "newton_toy", "newton_toy_best", "newton_untied_pair"]

NOTICE_ENV = "DOTATTN_NUMBA_NOTICE_SHOWN"
"""Set in the environment once the fallback has been announced (inherited by worker processes)."""


def announce_fallback(reason: str) -> None:
    """One line on stderr saying that numba could not be imported and the numpy kernel runs; only the first
    time in a process tree (:data:`NOTICE_ENV`)."""
    if os.environ.get(NOTICE_ENV):
        return
    os.environ[NOTICE_ENV] = "1"
    print(
        f"dotattn: numba could not be imported ({reason}); the toy model's prox runs on the vectorised numpy "
        "kernel (same results, about twice the CPU time)",
        file=sys.stderr,
    )


AVAILABLE = False
UNAVAILABLE_REASON: str | None = None
if os.environ.get("DOTATTN_COMPILED", "1") == "0":
    UNAVAILABLE_REASON = "DOTATTN_COMPILED=0"
else:
    try:
        import numba

        AVAILABLE = True
    except ImportError as exc:  # numba is a dependency, but may fail to import: the vectorised kernel
        UNAVAILABLE_REASON = f"{type(exc).__name__}: {exc}"
        announce_fallback(UNAVAILABLE_REASON)

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

    @numba.njit(cache=True, inline="always")
    def _newton1(x1, x2, c1, c2, t1, t2, v, s2, max_iter, gtol):
        """The safeguarded Newton run of one node from (x1, x2): (x1, x2, value, iterations)."""
        fa, sa, sb = _value(x1, x2, c1, c2, t1, t2, v, s2)
        it = 0
        for it in range(1, max_iter + 1):  # noqa: B007 (the count is read after the loop)
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
        return x1, x2, fa, it

    @numba.njit(cache=True)
    def _kernel(x1s, x2s, c1s, c2s, t1s, t2s, v, s2, max_iter, gtol, out1, out2, outv):
        last = 0
        for m in range(x1s.shape[0]):
            x1, x2, fa, it = _newton1(x1s[m], x2s[m], c1s[m], c2s[m], t1s[m], t2s[m], v, s2, max_iter, gtol)
            out1[m], out2[m], outv[m] = x1, x2, fa
            last = max(last, it)
        return last

    @numba.njit(cache=True)
    def _best_kernel(starts, centre, target, v, s2, max_iter, gtol, h_out, v_out, f_out):
        """Every start of every node through :func:`_kernel`'s steps, keeping per node the first start of
        lowest value (numpy's argmin: a NaN value wins, the first of equal values wins), and f = v (ĥ − c)."""
        S, N = starts.shape[0], starts.shape[1]
        last = 0
        for n in range(N):
            c1, c2 = centre[n, 0, 0], centre[n, 1, 0]
            t1, t2 = target[n, 0, 0], target[n, 1, 1]
            b1, b2, bv = 0.0, 0.0, 0.0
            for s in range(S):
                x1, x2, fa, it = _newton1(starts[s, n, 0, 0], starts[s, n, 1, 0], c1, c2, t1, t2, v, s2, max_iter, gtol)
                last = max(last, it)
                if s == 0 or (not np.isnan(bv) and (fa < bv or np.isnan(fa))):
                    b1, b2, bv = x1, x2, fa
            h_out[n, 0, 0], h_out[n, 1, 0], v_out[n] = b1, b2, bv
            f_out[n, 0, 0], f_out[n, 1, 0] = (b1 - c1) * v, (b2 - c2) * v
        return last

    @numba.njit(cache=True, inline="always")
    def _untied_value(x, c, t1, t2, Vi, s2):
        """Untied L = 2, r = 1 prox objective at x = (h₁, k₁, h₂, k₂), and s(a), s(b)."""
        sa = _expit(x[0] * (x[1] - x[3]))
        sb = _expit(x[2] * (x[3] - x[1]))
        ra, rb = sa - t1, sb - t2
        quad = 0.0
        for l in range(2):
            d0, d1 = x[2 * l] - c[2 * l], x[2 * l + 1] - c[2 * l + 1]
            quad += d0 * (Vi[0, 0] * d0 + Vi[0, 1] * d1) + d1 * (Vi[1, 0] * d0 + Vi[1, 1] * d1)
        return 0.5 * quad + s2 * (ra * ra + rb * rb), sa, sb

    @numba.njit(cache=True)
    def _jacobi4(A, U):
        """Cyclic Jacobi rotations: A (n, n) symmetric is overwritten by a diagonal matrix Λ and U (identity
        on entry) by the orthogonal eigenvectors, A_in = U Λ Uᵀ (to rounding: sweeps stop when the
        off-diagonal mass is below 1e-32 of the diagonal's)."""
        n = A.shape[0]
        for _ in range(50):
            off, diag = 0.0, 0.0
            for i in range(n):
                diag += A[i, i] * A[i, i]
                for j in range(i + 1, n):
                    off += A[i, j] * A[i, j]
            if off <= 1e-32 * diag or off == 0.0:
                return
            for p in range(n - 1):
                for q in range(p + 1, n):
                    apq = A[p, q]
                    if apq == 0.0:
                        continue
                    theta = (A[q, q] - A[p, p]) / (2.0 * apq)
                    t = 1.0 / (abs(theta) + np.sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                    c = 1.0 / np.sqrt(t * t + 1.0)
                    sn = t * c
                    for k in range(n):  # A J
                        akp, akq = A[k, p], A[k, q]
                        A[k, p], A[k, q] = c * akp - sn * akq, sn * akp + c * akq
                    for k in range(n):  # Jᵀ (A J)
                        apk, aqk = A[p, k], A[q, k]
                        A[p, k], A[q, k] = c * apk - sn * aqk, sn * apk + c * aqk
                    for k in range(n):
                        ukp, ukq = U[k, p], U[k, q]
                        U[k, p], U[k, q] = c * ukp - sn * ukq, sn * ukp + c * ukq

    @numba.njit(cache=True)
    def _solve4(H, g, step, Lf, y):
        """step = −H₊⁻¹g (4 x 4): Cholesky where every pivot exceeds 1e-8 of the largest diagonal entry, else
        the eigendecomposition with eigenvalues reflected and floored at 1e-8 of the largest (as the
        vectorised :func:`dotattn.positional_semantic.prox._solve_safeguarded`)."""
        n = 4
        scale = 0.0
        for j in range(n):
            scale = max(scale, abs(H[j, j]))
        ok = True
        for j in range(n):
            piv = H[j, j]
            for k in range(j):
                piv -= Lf[j, k] * Lf[j, k]
            if not piv > _EIG_FLOOR * scale:
                ok = False
                break
            d = np.sqrt(piv)
            Lf[j, j] = d
            for i in range(j + 1, n):
                acc = H[i, j]
                for k in range(j):
                    acc -= Lf[i, k] * Lf[j, k]
                Lf[i, j] = acc / d
        if ok:
            for j in range(n):
                acc = g[j]
                for k in range(j):
                    acc -= Lf[j, k] * y[k]
                y[j] = acc / Lf[j, j]
            for j in range(n - 1, -1, -1):
                acc = y[j]
                for k in range(j + 1, n):
                    acc += Lf[k, j] * step[k]  # step = −x: Lᵀx = y
                step[j] = -acc / Lf[j, j]
            return
        A = Lf  # the failed factor's storage: H is diagonalised in place of it, U Λ Uᵀ = H
        U = np.eye(n)
        for i in range(n):
            for j in range(n):
                A[i, j] = H[i, j]
        _jacobi4(A, U)
        top = 0.0
        for j in range(n):
            top = max(top, abs(A[j, j]))
        floor = _EIG_FLOOR * top
        for i in range(n):
            step[i] = 0.0
        for j in range(n):
            coef = 0.0
            for i in range(n):
                coef += U[i, j] * g[i]
            coef /= max(abs(A[j, j]), floor)
            for i in range(n):
                step[i] -= U[i, j] * coef

    @numba.njit(cache=True)
    def _untied_kernel(x0s, cs, t1s, t2s, Vi, s2, max_iter, gtol, out, outv):
        last = 0
        x = np.empty(4)
        y = np.empty(4)
        g = np.empty(4)
        H = np.empty((4, 4))
        p = np.empty(4)
        Lf = np.zeros((4, 4))
        work = np.empty(4)
        for m in range(x0s.shape[0]):
            c = cs[m]
            t1, t2 = t1s[m], t2s[m]
            for i in range(4):
                x[i] = x0s[m, i]
            fa, sa, sb = _untied_value(x, c, t1, t2, Vi, s2)
            it = 0
            for it in range(1, max_iter + 1):  # noqa: B007 (the count is read after the loop)
                ra, rb = sa - t1, sb - t2
                da, db = sa * (1 - sa), sb * (1 - sb)
                ga, gb = 2 * s2 * ra * da, 2 * s2 * rb * db
                na = (x[1] - x[3], x[0], 0.0, -x[0])  # ∇a, a = h₁(k₁ − k₂)
                nb = (0.0, -x[2], x[3] - x[1], x[2])  # ∇b, b = h₂(k₂ − k₁)
                gmax = 0.0
                for l in range(2):
                    d0, d1 = x[2 * l] - c[2 * l], x[2 * l + 1] - c[2 * l + 1]
                    g[2 * l] = Vi[0, 0] * d0 + Vi[0, 1] * d1
                    g[2 * l + 1] = Vi[1, 0] * d0 + Vi[1, 1] * d1
                for i in range(4):
                    g[i] += ga * na[i] + gb * nb[i]
                    gmax = max(gmax, abs(g[i]))
                if gmax < gtol:
                    break
                haa = 2 * s2 * (da * da + ra * da * (1 - 2 * sa))
                hbb = 2 * s2 * (db * db + rb * db * (1 - 2 * sb))
                for i in range(4):
                    for j in range(4):
                        H[i, j] = haa * na[i] * na[j] + hbb * nb[i] * nb[j]
                for l in range(2):
                    for i in range(2):
                        for j in range(2):
                            H[2 * l + i, 2 * l + j] += Vi[i, j]
                H[0, 1] += ga
                H[1, 0] += ga
                H[0, 3] -= ga
                H[3, 0] -= ga
                H[2, 3] += gb
                H[3, 2] += gb
                H[2, 1] -= gb
                H[1, 2] -= gb
                _solve4(H, g, p, Lf, work)
                slope = 0.0
                for i in range(4):
                    slope += g[i] * p[i]
                    y[i] = x[i] + p[i]
                ft, sat, sbt = _untied_value(y, c, t1, t2, Vi, s2)
                ok = (ft <= fa + _ARMIJO * slope) or (-slope < 1e-13 * (1.0 + abs(fa)))
                if not ok:
                    t = 0.5
                    for _ in range(60):
                        for i in range(4):
                            y[i] = x[i] + t * p[i]
                        ft, sat, sbt = _untied_value(y, c, t1, t2, Vi, s2)
                        if ft <= fa + _ARMIJO * t * slope:
                            ok = True
                            break
                        t *= 0.5
                if not ok:
                    break
                for i in range(4):
                    x[i] = y[i]
                fa, sa, sb = ft, sat, sbt
            for i in range(4):
                out[m, i] = x[i]
            outv[m] = fa
            last = max(last, it)
        return last


def newton_toy(
    h0: np.ndarray, centre: np.ndarray, target: np.ndarray, v: float, s2: float, max_iter: int, gtol: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """The compiled :func:`dotattn.positional_semantic.prox._newton_toy` (same arguments and returns:
    h (M, 2, 1), value (M,), the iterations of the slowest node)."""
    M = h0.shape[0]
    out1, out2, outv = np.empty(M), np.empty(M), np.empty(M)
    it = _kernel(
        np.ascontiguousarray(h0[:, 0, 0]),
        np.ascontiguousarray(h0[:, 1, 0]),
        np.ascontiguousarray(centre[:, 0, 0]),
        np.ascontiguousarray(centre[:, 1, 0]),
        np.ascontiguousarray(target[:, 0, 0]),
        np.ascontiguousarray(target[:, 1, 1]),
        float(v),
        float(s2),
        int(max_iter),
        float(gtol),
        out1,
        out2,
        outv,
    )
    return np.stack([out1, out2], axis=1)[:, :, None], outv, int(it)


def newton_toy_best(
    starts: np.ndarray, centre: np.ndarray, target: np.ndarray, v: float, s2: float, max_iter: int, gtol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`newton_toy` from every start (S, N, 2, 1) of every node, fused with the choice of the best
    start and f: what :func:`dotattn.positional_semantic.prox.minimise_envelope` computes from the
    vectorised kernel's output (the lowest value's minimiser, numpy argmin's tie and NaN rules; f = (ĥ − c) v
    with v = V⁻¹), without the S copies of the centres and targets, the gather and the products. Returns
    ĥ (N, 2, 1), value (N,), f (N, 2, 1) and the iterations of the slowest run, each equal bit for bit to the
    unfused path (:func:`newton_toy`, then argmin)."""
    N = centre.shape[0]
    h, value, f = np.empty((N, 2, 1)), np.empty(N), np.empty((N, 2, 1))
    it = _best_kernel(
        np.ascontiguousarray(starts, dtype=float),
        np.ascontiguousarray(centre, dtype=float),
        np.ascontiguousarray(target, dtype=float),
        float(v),
        float(s2),
        int(max_iter),
        float(gtol),
        h,
        value,
        f,
    )
    return h, value, f, int(it)


def newton_untied_pair(
    h0: np.ndarray, centre: np.ndarray, target: np.ndarray, V_inv: np.ndarray, s2: float, max_iter: int, gtol: float
) -> tuple[np.ndarray, np.ndarray, int]:
    """The vectorised :func:`dotattn.positional_semantic.prox._newton` for the untied student with L = 2,
    r = 1 (fields (h_l, k_l), V⁻¹ 2 x 2), compiled node by node: the same objective, gradient, Hessian,
    safeguarded solve, Armijo test and stopping rule. h0, centre (M, 2, 2); returns h (M, 2, 2), value (M,),
    the iterations of the slowest node."""
    M = h0.shape[0]
    out, outv = np.empty((M, 4)), np.empty(M)
    it = _untied_kernel(
        np.ascontiguousarray(h0.reshape(M, 4)),
        np.ascontiguousarray(centre.reshape(M, 4)),
        np.ascontiguousarray(target[:, 0, 0]),
        np.ascontiguousarray(target[:, 1, 1]),
        np.ascontiguousarray(V_inv, dtype=float),
        float(s2),
        int(max_iter),
        float(gtol),
        out,
        outv,
    )
    return out.reshape(M, 2, 2), outv, int(it)
