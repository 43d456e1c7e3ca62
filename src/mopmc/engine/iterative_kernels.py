"""Compiled loops of the sound iterative method (:mod:`mopmc.engine.iterative`), on one block.

A block is given in local CSR form: ``rg`` (state -> choices), ``ip`` (choice -> transitions inside
the block), ``tg`` (local target state), ``pr`` (probability); what a choice collects on its step,
including the expected value of its successors outside the block, is ``b[c]`` (weighted) or
``B[c, :]`` (one column per quantity). Compiled lazily through :mod:`mopmc.engine.numba_kernels`.
"""

from __future__ import annotations

import numpy as np

from mopmc.engine.numba_kernels import _lazy


@_lazy
def lower_sweeps(rg, ip, tg, pr, b, L, max_sweeps, tol):
    """Gauss-Seidel ``L(s) <- max(L(s), max_c b[c] + sum p L(t))`` until a sweep changes no value by
    more than ``tol``; returns the sweeps done. Stays below the optimum when it starts below it."""
    n = rg.shape[0] - 1
    sweeps = 0
    while sweeps < max_sweeps:
        sweeps += 1
        change = 0.0
        for s in range(n):
            best = L[s]
            for c in range(rg[s], rg[s + 1]):
                q = b[c]
                for k in range(ip[c], ip[c + 1]):
                    q += pr[k] * L[tg[k]]
                if q > best:
                    best = q
            d = best - L[s]
            if d > change:
                change = d
            L[s] = best
        if change <= tol:
            break
    return sweeps


@_lazy
def bellman(rg, ip, tg, pr, b, U, TU, arg):
    """One Jacobi step ``TU = T(U)`` with the maximising choice in ``arg``; True when ``TU <= U``."""
    n = rg.shape[0] - 1
    below = True
    for s in range(n):
        best = -np.inf
        bc = -1
        for c in range(rg[s], rg[s + 1]):
            q = b[c]
            for k in range(ip[c], ip[c + 1]):
                q += pr[k] * U[tg[k]]
            if q > best:
                best = q
                bc = c
        TU[s] = best
        arg[s] = bc
        if best > U[s]:
            below = False
    return below


@_lazy
def chain_bounds(pol, ip, tg, pr, B, rel, max_iter, check_every):
    """Sound value iteration (Quatmann & Katoen 2018) on the chain of the choices ``pol``.

    With ``x_k = sum_{i<k} P^i B`` and ``y_k = P^k 1`` (the probability of still being in the block
    after k steps), every value ``v = sum_i P^i B`` satisfies, once ``max y_k < 1``,
    ``x_k + y_k * lo <= v <= x_k + y_k * hi`` with ``lo = min_s x_k / (1 - y_k)`` and
    ``hi = max_s x_k / (1 - y_k)`` (per column). Iterates until the half-width of every column is at
    most ``rel[j] * max(|lo_j|, |hi_j|)``. Returns ``(lower, upper, iterations, converged)``;
    when ``max y`` never drops below 1, the bounds are ``-inf``/``inf``.
    """
    n = pol.shape[0]
    m = B.shape[1]
    x = np.zeros((n, m))
    x2 = np.zeros((n, m))
    y = np.ones(n)
    y2 = np.ones(n)
    lo = np.full(m, -np.inf)
    hi = np.full(m, np.inf)
    it = 0
    done = False
    while it < max_iter and not done:
        it += 1
        for s in range(n):
            c = pol[s]
            ys = 0.0
            for j in range(m):
                x2[s, j] = B[c, j]
            for k in range(ip[c], ip[c + 1]):
                t = tg[k]
                pk = pr[k]
                ys += pk * y[t]
                for j in range(m):
                    x2[s, j] += pk * x[t, j]
            y2[s] = ys
        x, x2 = x2, x
        y, y2 = y2, y
        if it % check_every == 0 or it == max_iter:
            ymax = 0.0
            for s in range(n):
                if y[s] > ymax:
                    ymax = y[s]
            if ymax >= 1.0:
                for j in range(m):
                    lo[j] = -np.inf
                    hi[j] = np.inf
                continue
            done = True
            for j in range(m):
                a = np.inf
                z = -np.inf
                for s in range(n):
                    r = x[s, j] / (1.0 - y[s])
                    if r < a:
                        a = r
                    if r > z:
                        z = r
                lo[j] = a
                hi[j] = z
                half = 0.0
                for s in range(n):
                    h = 0.5 * y[s] * (z - a)
                    if h > half:
                        half = h
                if half > rel[j] * max(abs(a), abs(z)):
                    done = False
    lower = np.empty((n, m))
    upper = np.empty((n, m))
    for s in range(n):
        for j in range(m):
            if np.isfinite(lo[j]):
                lower[s, j] = x[s, j] + y[s] * lo[j]
                upper[s, j] = x[s, j] + y[s] * hi[j]
            else:
                lower[s, j] = -np.inf
                upper[s, j] = np.inf
    return lower, upper, it, done
