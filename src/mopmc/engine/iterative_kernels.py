"""Compiled loops of the sound iterative method (:mod:`mopmc.engine.iterative`), on one block.

A block is given in local CSR form: ``rg`` (state -> choices), ``ip`` (choice -> transitions inside
the block), ``tg`` (local target state), ``pr`` (probability); what a choice collects on its step,
including the expected value of its successors outside the block, is ``b[c]`` (weighted) or
``B[c, :]`` (one column per quantity). Compiled lazily through :mod:`mopmc.engine.numba_kernels`.
"""

from __future__ import annotations

import numpy as np

from mopmc.engine.numba_kernels import _lazy, jit


def _backup(rg, ip, tg, pr, b, V, s):
    """``(max_c b[c] + sum p V(t), its first maximising choice)`` over the choices of state ``s``."""
    best = -np.inf
    bc = -1
    for c in range(rg[s], rg[s + 1]):
        q = b[c]
        for k in range(ip[c], ip[c + 1]):
            q += pr[k] * V[tg[k]]
        if q > best:
            best = q
            bc = c
    return best, bc


_backup = jit(_backup)  # (called from the compiled sweeps below)


@_lazy
def lower_sweeps(rg, ip, tg, pr, b, L, max_sweeps, tol):
    """Gauss-Seidel ``L(s) <- max(L(s), max_c b[c] + sum p L(t))``, forwards and backwards in turn,
    until a sweep changes no value by more than ``tol`` and the changes still to come, extrapolated
    from their rate over the last two sweeps (``c r / (1 - r)``), are at most ``5 tol``; returns the
    sweeps done. Stays below the optimum when it starts below it. (The extrapolation only decides
    when to stop: where ``L`` is still far below the optimum, the upper guess ``L + delta`` is not
    yet above it and cannot be certified.)"""
    n = rg.shape[0] - 1
    sweeps = 0
    older = np.inf
    old = np.inf
    while sweeps < max_sweeps:
        sweeps += 1
        change = 0.0
        for i in range(n):
            s = i if sweeps % 2 == 1 else n - 1 - i
            best = max(L[s], _backup(rg, ip, tg, pr, b, L, s)[0])
            d = best - L[s]
            if d > change:
                change = d
            L[s] = best
        if change <= tol:
            if change == 0.0:
                break
            r = np.sqrt(change / older) if older > 0.0 else 1.0
            if r < 1.0 and change * r / (1.0 - r) <= 5.0 * tol:
                break
        older = old
        old = change
    return sweeps


@_lazy
def bellman(rg, ip, tg, pr, b, U, TU, arg):
    """One Jacobi step ``TU = T(U)`` with the maximising choice in ``arg``; True when ``TU <= U``."""
    n = rg.shape[0] - 1
    below = True
    for s in range(n):
        best, bc = _backup(rg, ip, tg, pr, b, U, s)
        TU[s] = best
        arg[s] = bc
        if best > U[s]:
            below = False
    return below


@_lazy
def upper_sweep(rg, ip, tg, pr, b, U, forward):
    """One Gauss-Seidel sweep ``U(s) <- max_c b[c] + sum p U(t)`` in place (``forward`` or backward);
    True when no value rose. Then ``T U <= U`` for the swept ``U`` (each state's new value is ``T``
    of a vector at least ``U``, as the values not yet swept only fell), up to rounding."""
    n = rg.shape[0] - 1
    fell = True
    for i in range(n):
        s = i if forward else n - 1 - i
        best = _backup(rg, ip, tg, pr, b, U, s)[0]
        if best > U[s]:
            fell = False
        U[s] = best
    return fell


@_lazy
def chain_residual(pol, ip, tg, pr, B, rel, max_sweeps, check_every, x, t, warm):
    """Gauss-Seidel on the chain of the choices ``pol``, certified by its residual: ``(lower,
    upper, sweeps, converged)``, bounds per state and column. ``x`` (states x m) and ``t``
    (states) are the first guesses, swept in place (any guess is sound; a good one, such as the
    previous direction's values, is certified after a few sweeps or none: with ``warm`` the guess
    is certified before the first sweep).

    The m columns ``x`` of ``v = sum_i P^i B`` and the expected steps ``t`` before leaving the block
    (``t = 1 + P t``) are swept in place, forwards then backwards. Every ``check_every`` sweeps one
    pass certifies them: where ``g = min_s (t - P t)(s) > 0``, ``t / g`` is a supersolution of the
    expected steps (``t/g >= 1 + P t/g``), which bounds them from above (so the chain leaves the
    block almost surely), and with the residual ``r = B + P x - x`` (``rho_j = max_s |r_j(s)|``)
    ``|v - x| = |(I - P)^-1 r| <= rho_j t / g`` per state. Stops when that half-width is at most
    ``rel[j] * max_s |x_j(s)|`` for every column. The rounding of the certifying pass is added to
    ``g`` and ``rho`` (a few ulp of the magnitudes summed). Never certified within ``max_sweeps``:
    the bounds are ``-inf``/``inf``.
    """
    n = pol.shape[0]
    m = B.shape[1]
    acc = np.zeros(m)
    mag = np.zeros(m)
    rho = np.zeros(m)
    xmax = np.zeros(m)
    ulp = 2.3e-16
    sweeps = 0
    done = False
    gamma = -1.0
    first = warm
    while True:
        for _ in range(0 if first else check_every):
            for half in range(2):
                sweeps += 1
                for i in range(n):
                    s = i if half == 0 else n - 1 - i
                    c = pol[s]
                    for j in range(m):
                        acc[j] = B[c, j]
                    ts = 1.0
                    for k in range(ip[c], ip[c + 1]):
                        u = tg[k]
                        p = pr[k]
                        ts += p * t[u]
                        for j in range(m):
                            acc[j] += p * x[u, j]
                    t[s] = ts
                    for j in range(m):
                        x[s, j] = acc[j]
            if sweeps >= max_sweeps:
                break
        first = False
        gamma = np.inf
        for j in range(m):
            rho[j] = 0.0
            xmax[j] = 0.0
        for s in range(n):
            c = pol[s]
            width = (ip[c + 1] - ip[c] + 2) * ulp
            pt = 0.0
            for j in range(m):
                acc[j] = B[c, j]
                mag[j] = abs(B[c, j]) + abs(x[s, j])
            for k in range(ip[c], ip[c + 1]):
                u = tg[k]
                p = pr[k]
                pt += p * t[u]
                for j in range(m):
                    acc[j] += p * x[u, j]
                    mag[j] += p * abs(x[u, j])
            g = t[s] - pt - width * (t[s] + pt)
            if g < gamma:
                gamma = g
            for j in range(m):
                r = abs(acc[j] - x[s, j]) + width * mag[j]
                if r > rho[j]:
                    rho[j] = r
                if abs(x[s, j]) > xmax[j]:
                    xmax[j] = abs(x[s, j])
        if gamma > 0.0:
            tmax = 0.0
            for s in range(n):
                if t[s] > tmax:
                    tmax = t[s]
            done = True
            for j in range(m):
                if rho[j] * tmax / gamma > rel[j] * xmax[j]:
                    done = False
        if done or sweeps >= max_sweeps:
            break
    lower = np.empty((n, m))
    upper = np.empty((n, m))
    for s in range(n):
        for j in range(m):
            if gamma > 0.0:
                h = rho[j] * t[s] / gamma
                lower[s, j] = x[s, j] - h
                upper[s, j] = x[s, j] + h
            else:
                lower[s, j] = -np.inf
                upper[s, j] = np.inf
    return lower, upper, sweeps, done


def _sgs(pol, ip, tg, pr, d, r, z):
    """``z = M^-1 r`` for the symmetric Gauss-Seidel splitting ``M = (D - L) D^-1 (D - U)`` of
    ``I - P`` (``d``: its diagonal): a forward then a backward triangular sweep."""
    n = pol.shape[0]
    for s in range(n):
        c = pol[s]
        q = r[s]
        for k in range(ip[c], ip[c + 1]):
            if tg[k] < s:
                q += pr[k] * z[tg[k]]
        z[s] = q / d[s]
    for s in range(n - 1, -1, -1):
        c = pol[s]
        q = 0.0
        for k in range(ip[c], ip[c + 1]):
            if tg[k] > s:
                q += pr[k] * z[tg[k]]
        z[s] += q / d[s]


def _minus_p(pol, ip, tg, pr, v, out):
    """``out = (I - P) v`` for the chain of the choices ``pol``."""
    for s in range(pol.shape[0]):
        c = pol[s]
        q = v[s]
        for k in range(ip[c], ip[c + 1]):
            q -= pr[k] * v[tg[k]]
        out[s] = q


def _dot(a, b):
    """``a . b``, summed in order."""
    acc = 0.0
    for s in range(a.shape[0]):
        acc += a[s] * b[s]
    return acc


_sgs = jit(_sgs)  # (all three called from the compiled chain_bicgstab)
_minus_p = jit(_minus_p)
_dot = jit(_dot)


@_lazy
def chain_bicgstab(pol, ip, tg, pr, rhs, x, rtol, max_iter):
    """BiCGSTAB (van der Vorst 1992) on ``(I - P) x = rhs`` for the chain of the choices ``pol``,
    from ``x`` (updated in place), right-preconditioned by symmetric Gauss-Seidel (a forward and a
    backward triangular sweep of ``I - P``); True when the recurrence's residual fell to
    ``rtol |rhs|``. Only a first guess for :func:`chain_residual`, which certifies whatever it is:
    no exactness rests on it (a breakdown or an improper chain returns False)."""
    n = pol.shape[0]
    d = np.ones(n)
    for s in range(n):
        c = pol[s]
        for k in range(ip[c], ip[c + 1]):
            if tg[k] == s:
                d[s] -= pr[k]
        if d[s] <= 0.0:
            return False  # a state that never leaves: no proper chain
    r = np.empty(n)
    _minus_p(pol, ip, tg, pr, x, r)
    for s in range(n):
        r[s] = rhs[s] - r[s]
    bnorm = np.sqrt(_dot(rhs, rhs))
    if bnorm == 0.0:
        bnorm = 1.0
    rhat = r.copy()
    p = np.zeros(n)
    ph = np.zeros(n)
    v = np.zeros(n)
    sv = np.empty(n)
    sh = np.empty(n)
    tv = np.empty(n)
    rho_old = 1.0
    alpha = 1.0
    omega = 1.0
    for it in range(max_iter):
        rho = _dot(rhat, r)
        if rho == 0.0 or not np.isfinite(rho):
            return False
        beta = (rho / rho_old) * (alpha / omega)
        for s in range(n):
            p[s] = r[s] + beta * (p[s] - omega * v[s])
        _sgs(pol, ip, tg, pr, d, p, ph)
        _minus_p(pol, ip, tg, pr, ph, v)
        den = _dot(rhat, v)
        if den == 0.0:
            return False
        alpha = rho / den
        snorm = 0.0
        for s in range(n):
            sv[s] = r[s] - alpha * v[s]
            snorm += sv[s] * sv[s]
        if np.sqrt(snorm) <= rtol * bnorm:
            for s in range(n):
                x[s] += alpha * ph[s]
            return True
        _sgs(pol, ip, tg, pr, d, sv, sh)
        _minus_p(pol, ip, tg, pr, sh, tv)
        tt = _dot(tv, tv)
        if tt == 0.0:
            return False
        omega = _dot(tv, sv) / tt
        rnorm = 0.0
        for s in range(n):
            x[s] += alpha * ph[s] + omega * sh[s]
            r[s] = sv[s] - omega * tv[s]
            rnorm += r[s] * r[s]
        if not np.isfinite(rnorm):
            return False
        if np.sqrt(rnorm) <= rtol * bnorm:
            return True
        if omega == 0.0:
            return False
        rho_old = rho
    return False
