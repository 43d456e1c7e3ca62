"""Exact solves of banded cyclic blocks: a bandwidth-reducing order, then subtraction-free elimination.

Cyclic blocks above the engines' size limit for sparse LU went to sound value iteration, whose
convergence is as slow as the block mixes: on a one-SCC chain of n states (a random walk to a goal)
it needs about n^2 sweeps (72 s at n = 5,000). Such blocks are often *banded*: after a reverse
Cuthill-McKee order of the union of their choices' transitions, every transition moves at most ``b``
places, and Gaussian elimination without pivoting keeps its factors in that band: ``n (2b + 1)``
numbers and ``O(n b^2)`` operations, whatever the policy (every policy's matrix lies in the union's
band). :func:`band_order` returns the order when that cost is within a budget.

The system ``(I - P) x = r`` of a policy that leaves the block almost surely is solved by the
Grassmann-Taksar-Heyman variant of elimination (:class:`GthBand`): with ``P >= 0`` and the mass
``e >= 0`` that leaves each row's state, every Schur complement is again ``I - P'`` with ``P' >= 0``,
``e' = e + f e_k >= 0``, and its diagonal is computed as ``e'_i + sum_j P'_ij`` (never as a
difference). Every operation adds, multiplies or divides nonnegative numbers, so the factors are
accurate entry by entry whatever the condition number: on a 120,000-state random walk (condition
about 10^10), SuperLU in the wrong order answered a probability of 1 as 0.99999999204, this gives
1.0. A policy that never leaves part of the block shows as an exactly zero pivot.

Example:
    >>> perm, b = band_order(n, owner, target)  # doctest: +SKIP
    >>> lu = GthBand(n, b, rows, cols, probs, leave); x = lu.solve(rhs)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import reverse_cuthill_mckee

from mopmc.engine.numba_kernels import _lazy

BAND_BUDGET = 40_000_000  # factor entries n (2b + 1): 320 MB
FLOP_BUDGET = 2_000_000_000  # n b^2 per factorisation: about 2 s compiled
#: where SuperLU fails a block (a zero pivot by cancellation, or no settled refinement), band
#: elimination may take this many operations: slower than the rule's budget, but the alternative
#: is a wrong answer (a 2,452-state block of bandwidth 1,018: 2.5e9)
RESCUE_FLOPS = 20_000_000_000
CHEAP = 64  # band elimination below this many operations per transition and state: cheap


#: above the size limit of SuperLU, a block that is not cheaply banded still goes to SuperLU (in
#: its own fill-reducing order) when ``n b <= LU_GATE``: a grid-like block, whose factors stay
#: moderate. A heuristic gate, not a bound: on two-dimensional grids SuperLU's factors held
#: 0.12-0.16 n b entries (160,000 states: 1.2 s; 490,000: 6.2 s), where value iteration took 80 s
#: at 160,000 states.
LU_GATE = 400_000_000

#: SuperLU's seconds per factorisation of a block of ``n`` states and bandwidth ``b`` (in band order)
#: on one core, about ``LU_FILL n b + LU_SEPARATOR b^3``: the factors' fill, and the dense elimination
#: of the top separators, whose size is about ``b``. Fitted on two-dimensional grids (40,000-160,000
#: states, b = 200-400: 0.12-0.95 s, the fill term) and three-dimensional ones (30,000 and 69,000
#: states, b = 736 and 1,281: 2.1 and 13.8 s, the separator term), in SuperLU's default order.
LU_FILL = 1.4e-8
LU_SEPARATOR = 4.4e-9
#: a block whose separator term dominates and whose factorisation is estimated above this many
#: seconds is not factored but iterated (:class:`mopmc.engine.iterative.IterativeBlock`, within a
#: budget of sweeps, :func:`iteration_budget`): on a three-dimensional grid of 132,651 states
#: SuperLU's factors took 5 GB and over 300 s, the iteration 3.9 s (Storm's sound engine 2.7 s); at
#: 9,261 states 0.09 s against 1.1 s. Two-dimensional grids (separators about the square root of
#: ``n``) are never iterated so: their values mix too slowly (160,000 states: 23-54 s iterated, 2-3 s
#: factored).
LU_ITERATE = 0.1
#: how many times the fill term the separator term must be (cubes of 21^3 to 51^3 states: 3.9-9.5;
#: the shared-coin protocol's block at K = 8, which mixes too slowly to iterate: 1.0)
SEPARATOR_SHARE = 2.0
TORCH_LU_ITERATE = 10.0
ITERATION_ROUNDS = 4  # (policy iteration factors 3 or 4 times a direction)
SWEEP_SECONDS = 1.5e-9
MIN_SWEEPS = 2_000


def lu_seconds(n: int, b: int) -> float:
    """The estimated seconds of one SuperLU factorisation of a block (see :data:`LU_FILL`)."""
    return LU_FILL * n * b + LU_SEPARATOR * float(b) ** 3


def iteration_budget(n: int, b: int, transitions: int) -> int:
    """Sweeps per phase of the iterative method on a block :func:`iterate_rather` chose, about the
    time of :data:`ITERATION_ROUNDS` factorisations at :data:`SWEEP_SECONDS` per transition (at
    least :data:`MIN_SWEEPS`): a block that mixes too slowly for iterating is then factored, at
    most about twice the time factoring it at once would have taken."""
    sweep = SWEEP_SECONDS * max(transitions + n, 1)
    return max(MIN_SWEEPS, int(ITERATION_ROUNDS * lu_seconds(n, b) / sweep))


def iterate_rather(n: int, b: int | None, limit: float | None = None) -> bool:
    """Whether a block of ``n`` states and bandwidth ``b`` (not cheaply banded) is better iterated
    than factored: its separators dominate the factorisation (:data:`SEPARATOR_SHARE`), estimated
    above ``limit`` seconds
    (:data:`LU_ITERATE`; the torch engine, whose iteration is plainer, :data:`TORCH_LU_ITERATE`)."""
    if b is None:
        return False
    limit = LU_ITERATE if limit is None else limit
    return LU_SEPARATOR * float(b) ** 3 >= SEPARATOR_SHARE * LU_FILL * n * b and lu_seconds(n, b) > limit


def band_order(n: int, rows: np.ndarray, cols: np.ndarray, budget: int = BAND_BUDGET,
               flops: int = FLOP_BUDGET) -> tuple[np.ndarray, int] | None:
    """``(perm, b)``: a reverse Cuthill-McKee order of ``n`` states under which the transitions
    ``rows -> cols`` (local state indices, of any choice) move at most ``b`` places, when the band
    factors fit ``n (2b + 1) <= budget`` and ``n b^2 <= flops``; else ``None``."""
    if n == 0 or n > budget:
        return None
    perm, b = bandwidth(n, rows, cols)
    return (perm, b) if fits(n, b, budget, flops) else None


def grid_like(n: int, b: int) -> bool:
    """Whether a block of ``n`` states and bandwidth ``b`` passes :data:`LU_GATE`."""
    return n * b <= LU_GATE


def block_solver(inside: csr_matrix, owner: np.ndarray, outside_sum: np.ndarray, exits: np.ndarray,
                 budget: int, cheap: bool, flops: int | None = None) -> tuple[BandBlock | None, int]:
    """``(solver, b)`` for a cyclic block of the engines: ``inside`` its choices' transitions inside
    it (CSR, choices x states, local indices), ``owner`` each choice's local state, ``outside_sum``
    and ``exits`` as :func:`leave_mass` takes them; ``b`` the bandwidth in band order, ``solver`` a
    :class:`BandBlock` when its factors fit ``budget`` numbers and the operations
    :data:`FLOP_BUDGET`, or with ``cheap`` about what a sparse LU would cost (at most
    :data:`CHEAP` per transition and state), else ``None``; ``flops`` overrides the operations'
    budget."""
    n = inside.shape[1]
    perm, b = bandwidth(n, np.repeat(owner, np.diff(inside.indptr)), inside.indices)
    if flops is None:
        flops = CHEAP * (inside.nnz + n) if cheap else FLOP_BUDGET
    if not fits(n, b, budget, flops):
        return None, b
    return BandBlock((perm, b), inside, leave_mass(inside, outside_sum, exits)), b


def fits(n: int, b: int, budget: int = BAND_BUDGET, flops: int = FLOP_BUDGET) -> bool:
    """Whether band elimination of ``n`` states of bandwidth ``b`` fits ``n (2b + 1) <= budget``
    numbers and ``n b^2 <= flops`` operations."""
    return 0 < n and n * (2 * b + 1) <= budget and n * b * b <= flops


#: a block whose transitions move at most this many places in its own order keeps that order
NATURAL_BAND = 8


def bandwidth(n: int, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, int]:
    """``(perm, b)``: a reverse Cuthill-McKee order of the ``n`` states and the bandwidth ``b`` of
    the transitions ``rows -> cols`` in it; the states' own order where its bandwidth is at most
    :data:`NATURAL_BAND` (chains in processing order: the reordering would cost more than it
    could save, a band elimination of at most 8 neighbours a state)."""
    rows = np.asarray(rows, np.int64)
    cols = np.asarray(cols, np.int64)
    off = rows != cols
    r, c = rows[off], cols[off]
    natural = int(np.abs(r - c).max(initial=0))
    if natural <= NATURAL_BAND:
        return np.arange(n, dtype=np.int64), natural
    ones = np.ones(2 * len(r), np.int8)
    pattern = csr_matrix((ones, (np.concatenate((r, c)), np.concatenate((c, r)))), shape=(n, n))
    perm = reverse_cuthill_mckee(pattern, symmetric_mode=True).astype(np.int64)
    where = np.empty(n, np.int64)
    where[perm] = np.arange(n)
    return perm, int(np.abs(where[r] - where[c]).max(initial=0))


class GthBand:
    """Factors of ``I - P`` for a substochastic ``P`` banded within ``b`` (``n`` states, already in
    band order): ``P`` given as ``rows, cols, probs`` (duplicates summed; self-loops count only
    through ``leave``) and ``leave``, the probability mass each state sends out of the block (to
    solved states or the terminal). ``RuntimeError`` when a part of the block is never left (the
    matrix is singular), as SciPy's ``splu``."""

    def __init__(self, n: int, b: int, rows, cols, probs, leave):
        self.n, self.b = n, b
        w = 2 * b + 1
        off = rows != cols
        flat = rows[off] * w + (cols[off] - rows[off] + b)
        band = np.bincount(flat, weights=probs[off], minlength=n * w).astype(np.float64, copy=False).reshape(n, w)
        e = np.array(leave, np.float64)
        at = _factor(band, e, b)
        if at >= 0:
            raise RuntimeError(f"singular: state {at} of the block is never left")
        self.band = band

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``x`` with ``(I - P) x = rhs`` (``rhs``: n, or n x k)."""
        x = np.array(rhs, np.float64, order="C")
        flat = x.ndim == 1
        x2 = x.reshape(self.n, -1)
        _solve(self.band, self.b, x2)
        return x2.reshape(self.n) if flat else x2


@_lazy(work=lambda a: a[0].size * a[0].shape[1])  # (n (2b + 1)^2 >= the n b^2 it costs)
def _factor(band, e, b):
    """In place: row ``k`` keeps ``P'_kj`` above the diagonal and its pivot at ``b``; below the
    diagonal the multipliers ``f_ik = P'_ik / pivot_k``. Returns the first state with a zero pivot, or -1."""
    n = band.shape[0]
    for k in range(n):
        hi = min(n, k + b + 1)
        d = e[k]
        for j in range(k + 1, hi):
            d += band[k, b + j - k]
        if d <= 0.0:
            return k
        band[k, b] = d
        for i in range(k + 1, hi):
            aik = band[i, b + k - i]
            if aik == 0.0:
                continue
            f = aik / d
            band[i, b + k - i] = f
            e[i] += f * e[k]
            for j in range(k + 1, hi):
                if j != i:
                    akj = band[k, b + j - k]
                    if akj != 0.0:
                        band[i, b + j - i] += f * akj
    return -1


@_lazy(work=lambda a: a[0].size * a[2].shape[1])
def _solve(band, b, x):
    n = band.shape[0]
    m = x.shape[1]
    for i in range(n):
        for k in range(max(0, i - b), i):
            f = band[i, b + k - i]
            if f != 0.0:
                for c in range(m):
                    x[i, c] += f * x[k, c]
    for k in range(n - 1, -1, -1):
        for j in range(k + 1, min(n, k + b + 1)):
            a = band[k, b + j - k]
            if a != 0.0:
                for c in range(m):
                    x[k, c] += a * x[j, c]
        d = band[k, b]
        for c in range(m):
            x[k, c] /= d


class BandBlock:
    """A cyclic block in band order: its choices' transitions inside it (``inside``: CSR, choices x
    the block's ``n`` states, local indices) and ``leave``, each choice's mass out of the block.
    :meth:`factor` gives the solver of ``(I - P_pi) x = rhs`` of a policy (one local choice per
    state), in the block's own state order."""

    def __init__(self, order: tuple[np.ndarray, int], inside: csr_matrix, leave: np.ndarray):
        self.perm, self.b = order
        self.n = len(self.perm)
        self.where = np.empty(self.n, np.int64)
        self.where[self.perm] = np.arange(self.n)
        self.inside, self.leave = inside, np.asarray(leave, np.float64)

    def factor(self, pol: np.ndarray) -> "_InOrder":
        P = self.inside[pol].tocoo()
        w = self.where
        gth = GthBand(self.n, self.b, w[P.row], w[P.col], P.data, self.leave[pol][self.perm])
        return _InOrder(gth, self.perm)


class _InOrder:
    """A band-order solver that takes and returns vectors in the block's own state order."""

    def __init__(self, gth: GthBand, perm: np.ndarray):
        self.gth, self.perm = gth, perm

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        y = self.gth.solve(np.asarray(rhs)[self.perm])
        x = np.empty_like(y)
        x[self.perm] = y
        return x


def conserving_split(inside: csr_matrix, owner: np.ndarray, outside_sum: np.ndarray,
                     exits: np.ndarray, outside_lo: np.ndarray | None = None) -> tuple[csr_matrix, np.ndarray, np.ndarray]:
    """``(P_off, D, D_lo)`` of a block's choices (``inside`` and the rest as :func:`block_solver`
    takes them): ``P_off`` their transitions to *other* states of the block (CSR, choices x states)
    and ``D`` what each choice sends elsewhere, summed, never taken as 1 minus a self-loop (the
    diagonal band elimination computes; SuperLU factors ``D[pol] - P_off[pol]``,
    :mod:`mopmc.engine.refine`), with ``D_lo`` what rounding that sum lost (``outside_lo``: what
    rounding ``outside_sum`` lost, from :func:`sums_dd`). Refinement's residuals take ``D + D_lo``:
    a row of ``D - P`` then sums to zero as exactly as the model's doubles do, where ``D`` alone
    leaks up to half an ulp a step (5.9e-8 relative on a trap holding paths for 1e14 steps)."""
    from mopmc.engine import numba_kernels as nk

    coo = inside.tocoo()
    off = owner[coo.row] != coo.col
    p_off = csr_matrix((coo.data[off], (coo.row[off], coo.col[off])), shape=inside.shape)
    n = inside.shape[0]
    hi = np.array(outside_sum, dtype=np.float64)
    lo = np.zeros(n) if outside_lo is None else np.array(outside_lo, dtype=np.float64)
    terminal = _terminal(inside, outside_sum, exits)
    at = np.flatnonzero(terminal)
    rows = np.concatenate((at, coo.row[off])).astype(np.int64)
    weights = np.concatenate((terminal[at], coo.data[off])).astype(np.float64)
    nk.sums_dd(rows, weights, n, hi, lo)
    return p_off, hi, lo


def sums_dd(rows: np.ndarray, weights: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row ``i < n``, the sum of the ``weights`` at ``rows == i`` as a double-double
    ``(hi, lo)``: ``hi`` rounded once, ``lo`` what rounding lost."""
    from mopmc.engine import numba_kernels as nk

    hi, lo = np.zeros(n), np.zeros(n)
    nk.sums_dd(np.asarray(rows, np.int64), np.asarray(weights, np.float64), n, hi, lo)
    return hi, lo


def leave_mass(inside: csr_matrix, outside_sum: np.ndarray, exits: np.ndarray) -> np.ndarray:
    """Per choice, the probability of leaving the block: ``outside_sum`` (to solved states) and its
    probability of the terminal (``exits``: the exit mass, or bools, :func:`_terminal`)."""
    return outside_sum + _terminal(inside, outside_sum, exits)


def _terminal(inside: csr_matrix, outside_sum: np.ndarray, exits: np.ndarray) -> np.ndarray:
    """Per choice, its probability of the terminal: ``exits`` itself when it holds numbers (the
    problem's exit mass, :func:`mopmc.engine.problem.exit_mass`), else on the ``exits`` choices
    what their probabilities miss of 1 (0 elsewhere)."""
    if exits.dtype != np.bool_:
        return np.asarray(exits, np.float64)
    if not np.any(exits):
        return np.zeros(inside.shape[0])
    inside_sum = np.asarray(inside.sum(axis=1)).ravel()
    return np.where(exits, np.maximum(1.0 - inside_sum - outside_sum, 0.0), 0.0)
