"""Iterative refinement of sparse LU solves of ``(D - P) x = b`` (Wilkinson; Moler 1967).

SuperLU's solution is backward stable, but its forward error grows with the condition number, which
reaches 1e14 on a 192-state chain that escapes a trap only through steps of probability 1/1000.
Each round computes the residual ``b - (D - P) x`` in double-double arithmetic
(:func:`mopmc.engine.numba_kernels.residual_dd`: accurate to its own size) and adds the LU's
solution of it to ``x``; the error shrinks by about the condition number times the unit roundoff a
round, so up to condition numbers near 1e15 a few rounds take ``x`` to full double precision. A
correction that stops shrinking ends it (the system is then too ill-conditioned for the LU to help,
and ``x`` is what the last round reached). On a well-conditioned system one round shows a
correction at rounding level: one extra residual pass and one extra solve.

The policy iteration's systems are ``I - P`` with the diagonal taken as what each state sends
elsewhere (:class:`mopmc.engine.policy_iteration.CyclicBlock`), as the band elimination does: the
doubles nearest to 999/1000 and 1/1000 sum to 1 + 1.1e-16, and in that chain such a leak per
step, over the 1e15 steps its trap holds a path, moved the probability by 4.4e-4 (relative). The
diagonal's sum is itself rounded: the residuals take it as a double-double (``diag`` a pair, from
:func:`mopmc.engine.banded.conserving_split`), since its half-ulp leak a step left the trap 5.9e-8
off. So refined, the trap's probability is Storm's exact value of the rational program to 1e-14, and
walks with expected costs of 1e9 to 1e12 are within 1e-15 (``tests/engine/test_ill_conditioned.py``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

ROUNDS = 12
"""The most refinement rounds per solve."""

_EPS = np.finfo(np.float64).eps


def refine(solve: Callable[[np.ndarray], np.ndarray], p, diag: np.ndarray, b: np.ndarray,
           x: np.ndarray) -> tuple[np.ndarray, bool]:
    """``(x, converged)``: ``x`` (a solution of ``(D - p) x = b`` from the LU whose ``solve`` is
    given; 1-D or 2-D, as ``b``) refined, and whether its last correction came down to rounding
    level (:data:`SETTLED` ulps of ``x``); ``p`` a scipy CSR matrix, ``diag`` the diagonal of ``D``,
    or a pair ``(D, D_lo)``: the diagonal as a double-double, ``D`` the one the LU factored and
    ``D_lo`` what rounding its sum lost (:func:`mopmc.engine.banded.conserving_split`)."""
    from mopmc.engine import numba_kernels as nk

    one = x.ndim == 1
    xx = np.array(x, dtype=np.float64, ndmin=2, order="C").T if one else np.array(x, dtype=np.float64, order="C")
    bb = np.array(b, dtype=np.float64, ndmin=2, order="C").T if one else np.ascontiguousarray(b, dtype=np.float64)
    if xx.size == 0:
        return x, True
    indptr, indices, data = p.indptr.astype(np.int64), p.indices.astype(np.int64), p.data.astype(np.float64)
    hi, lo = diag if isinstance(diag, tuple) else (diag, ())
    dd = np.ascontiguousarray(hi, dtype=np.float64)
    dlo = np.ascontiguousarray(lo, dtype=np.float64)
    r = np.empty_like(xx)
    last = np.inf
    settled = False
    for _ in range(ROUNDS):
        nk.residual_dd(indptr, indices, data, dd, dlo, xx, bb, r)
        if not np.any(r):
            settled = True
            break
        d = solve(r[:, 0] if one else r)
        d = np.asarray(d, dtype=np.float64).reshape(xx.shape)
        if not np.all(np.isfinite(d)):
            break
        size = float(np.max(np.abs(d)))
        scale = float(np.max(np.abs(xx)))
        if size >= last:  # not shrinking: the LU cannot do better here
            settled = last <= SETTLED * _EPS * scale
            break
        xx += d
        last = size
        if size <= _EPS * scale:
            settled = True
            break
    else:
        settled = last <= SETTLED * _EPS * float(np.max(np.abs(xx)))
    return (xx[:, 0] if one else xx), settled


SETTLED = 64
"""A last correction within this many ulps of the largest entry counts as converged."""
