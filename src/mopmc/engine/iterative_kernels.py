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


@_lazy(python=False)  # (sweeps until convergence, and compiled helpers: never plain Python)
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


@_lazy(python=False)  # (sweeps until convergence, and compiled helpers: never plain Python)
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


@_lazy(python=False)  # (sweeps until convergence, and compiled helpers: never plain Python)
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


@_lazy(python=False)  # (sweeps until convergence, and compiled helpers: never plain Python)
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


def _chain_csr(pol, ip, tg, pr):
    """The chain of the choices ``pol`` as its own CSR, split for Gauss-Seidel: per state ``s``
    its transitions to smaller states ``ptr[s]:mid[s]``, to larger ones ``mid[s]:ptr[s + 1]``
    (``ctg``, ``cpr``), and ``d[s] = 1 - P(s, s)``. One copy of the chain's transitions, contiguous,
    instead of every product reading them through ``pol`` and ``ip``."""
    n = pol.shape[0]
    d = np.ones(n)
    count = 0
    for s in range(n):
        c = pol[s]
        for k in range(ip[c], ip[c + 1]):
            if tg[k] != s:
                count += 1
    ptr = np.empty(n + 1, np.int64)
    mid = np.empty(n, np.int64)
    ctg = np.empty(count, np.int32)  # (less to read a sweep; a block has fewer than 2^31 states)
    cpr = np.empty(count)
    at = 0
    for s in range(n):
        ptr[s] = at
        c = pol[s]
        for k in range(ip[c], ip[c + 1]):
            if tg[k] < s:
                ctg[at] = tg[k]
                cpr[at] = pr[k]
                at += 1
            elif tg[k] == s:
                d[s] -= pr[k]
        mid[s] = at
        for k in range(ip[c], ip[c + 1]):
            if tg[k] > s:
                ctg[at] = tg[k]
                cpr[at] = pr[k]
                at += 1
    ptr[n] = at
    return ptr, mid, ctg, cpr, d


def _lower_solve(ptr, mid, ctg, cpr, dinv, v, out):
    """``out = (D - L)^-1 v``, ``L`` the chain's part below the diagonal (a forward sweep; ``dinv``:
    ``1 / d``, a product where each state waits for the last: a division's latency is 4-5 times
    longer, and it bounded the sweep)."""
    for s in range(dinv.shape[0]):
        q = v[s]
        for k in range(ptr[s], mid[s]):
            q += cpr[k] * out[ctg[k]]
        out[s] = q * dinv[s]


def _upper_solve(ptr, mid, ctg, cpr, dinv, v, out):
    """``out = (D - U)^-1 v``, ``U`` the part above it (a backward sweep)."""
    for s in range(dinv.shape[0] - 1, -1, -1):
        q = v[s]
        for k in range(mid[s], ptr[s + 1]):
            q += cpr[k] * out[ctg[k]]
        out[s] = q * dinv[s]


def _split_product(ptr, mid, ctg, cpr, d, dinv, v, t, w, out):
    """``out = (D - L)^-1 (I - P) (D - U)^-1 v`` as ``t + (D - L)^-1 (v - D t)`` with
    ``t = (D - U)^-1 v`` (Eisenstat's trick: since ``I - P = (D - L) + (D - U) - D``, two
    triangular sweeps, one pass over the transitions, instead of both sweeps and a product)."""
    _upper_solve(ptr, mid, ctg, cpr, dinv, v, t)
    for s in range(d.shape[0]):
        q = v[s] - d[s] * t[s]
        for k in range(ptr[s], mid[s]):
            q += cpr[k] * w[ctg[k]]
        w[s] = q * dinv[s]
        out[s] = t[s] + w[s]


def _residual(ptr, ctg, cpr, d, rhs, x, out):
    """``out = rhs - (I - P) x``; returns its Euclidean norm."""
    acc = 0.0
    for s in range(d.shape[0]):
        q = rhs[s] - d[s] * x[s]
        for k in range(ptr[s], ptr[s + 1]):
            q += cpr[k] * x[ctg[k]]
        out[s] = q
        acc += q * q
    return np.sqrt(acc)


def _dot(a, b):
    """``a . b``, summed in order."""
    acc = 0.0
    for s in range(a.shape[0]):
        acc += a[s] * b[s]
    return acc


def _bicgstab(ptr, mid, ctg, cpr, d, dinv, r, y, tol, max_iter, stall):
    """BiCGSTAB (van der Vorst 1992) on the split system ``(D - L)^-1 (I - P) (D - U)^-1 y = r0``
    from ``y`` (updated in place; ``r``: its residual, overwritten) until the recurrence's residual
    norm is at most ``tol``. Returns the iterations taken, or minus them on a breakdown, when
    ``max_iter`` ran out, or when ``stall`` iterations in a row did not halve the smallest
    residual norm yet (a stalled solve gives up early: converging ones halve it every few)."""
    n = d.shape[0]
    best = np.sqrt(_dot(r, r))
    gained = 0
    rhat = r.copy()
    p = np.zeros(n)
    v = np.zeros(n)
    sv = np.empty(n)
    tv = np.empty(n)
    t = np.empty(n)
    w = np.empty(n)
    rho_old = 1.0
    alpha = 1.0
    omega = 1.0
    for it in range(max_iter):
        rho = _dot(rhat, r)
        if rho == 0.0 or not np.isfinite(rho):
            return -(it + 1)
        beta = (rho / rho_old) * (alpha / omega)
        for s in range(n):
            p[s] = r[s] + beta * (p[s] - omega * v[s])
        _split_product(ptr, mid, ctg, cpr, d, dinv, p, t, w, v)
        den = _dot(rhat, v)
        if den == 0.0:
            return -(it + 1)
        alpha = rho / den
        snorm = 0.0
        for s in range(n):
            sv[s] = r[s] - alpha * v[s]
            snorm += sv[s] * sv[s]
        if np.sqrt(snorm) <= tol:
            for s in range(n):
                y[s] += alpha * p[s]
            return it + 1
        _split_product(ptr, mid, ctg, cpr, d, dinv, sv, t, w, tv)
        tt = 0.0
        ts = 0.0
        for s in range(n):
            tt += tv[s] * tv[s]
            ts += tv[s] * sv[s]
        if tt == 0.0:
            return -(it + 1)
        omega = ts / tt
        rnorm = 0.0
        for s in range(n):
            y[s] += alpha * p[s] + omega * sv[s]
            r[s] = sv[s] - omega * tv[s]
            rnorm += r[s] * r[s]
        rnorm = np.sqrt(rnorm)
        if not np.isfinite(rnorm):
            return -(it + 1)
        if rnorm <= tol:
            return it + 1
        if omega == 0.0:
            return -(it + 1)
        if rnorm < 0.5 * best:
            best = rnorm
            gained = it
        elif it - gained >= stall:
            return -(it + 1)
        rho_old = rho
    return -max_iter


_chain_csr = jit(_chain_csr)  # (all called from the compiled chain_bicgstab)
_lower_solve = jit(_lower_solve)
_upper_solve = jit(_upper_solve)
_split_product = jit(_split_product)
_residual = jit(_residual)
_dot = jit(_dot)
_bicgstab = jit(_bicgstab)


STALL = 300
"""BiCGSTAB iterations without halving the smallest residual norm before a solve gives up (about
70 iterations solve the 51^3 cube's chains; started from a poor guess one ran 2,000 without
converging, 7 s)."""


@_lazy(python=False)  # (sweeps until convergence, and compiled helpers: never plain Python)
def chain_bicgstab(pol, ip, tg, pr, rhs, x, rtol, max_iter):
    """BiCGSTAB on ``(I - P) x = rhs`` for the chain of the choices ``pol``, from ``x`` (set to the
    solution where it converged), preconditioned by symmetric Gauss-Seidel split between both sides
    (``(D - L)^-1 (I - P) (D - U)^-1``, whose product costs one pass over the chain's transitions:
    see ``_split_product``; on the 51^3 cube's chains 0.25 s a solve, 0.75 s before with the
    preconditioner on the right, about 70 iterations either way). True when the true residual
    ``|rhs - (I - P) x|`` fell to ``rtol |rhs|`` (the split system's residual is only the
    recurrence's guide: where it is met but the true one is not, the tolerance tightens and the
    iteration goes on, at most 4 times). Only a first guess for :func:`chain_residual`, which
    certifies whatever it is: no exactness rests on it (a breakdown or an improper chain, one
    that never leaves from some state, returns False)."""
    n = pol.shape[0]
    ptr, mid, ctg, cpr, d = _chain_csr(pol, ip, tg, pr)
    for s in range(n):
        if d[s] <= 0.0:
            return False  # a state that never leaves: no proper chain
    dinv = 1.0 / d
    bnorm = np.sqrt(_dot(rhs, rhs))
    if bnorm == 0.0:
        bnorm = 1.0
    goal = rtol * bnorm
    res = np.empty(n)
    r = np.empty(n)
    y = np.empty(n)
    for s in range(n):  # y = (D - U) x
        q = d[s] * x[s]
        for k in range(mid[s], ptr[s + 1]):
            q -= cpr[k] * x[ctg[k]]
        y[s] = q
    true = _residual(ptr, ctg, cpr, d, rhs, x, res)
    if true <= goal:
        return True
    if not np.isfinite(true):
        return False
    _lower_solve(ptr, mid, ctg, cpr, dinv, res, r)
    tol = goal * np.sqrt(_dot(r, r)) / true  # the goal, scaled as the split residual is at the start
    left = max_iter
    for _ in range(4):
        taken = _bicgstab(ptr, mid, ctg, cpr, d, dinv, r, y, tol, left, STALL)
        if taken < 0:
            return False
        left -= taken
        z = np.empty(n)
        _upper_solve(ptr, mid, ctg, cpr, dinv, y, z)
        true = _residual(ptr, ctg, cpr, d, rhs, z, res)
        if not np.isfinite(true):
            return False
        if true <= goal:
            x[:] = z
            return True
        if left <= 0:
            return False
        _lower_solve(ptr, mid, ctg, cpr, dinv, res, r)  # restart from the true residual, tighter
        tol = 0.1 * min(tol, goal * np.sqrt(_dot(r, r)) / true)
    return False
