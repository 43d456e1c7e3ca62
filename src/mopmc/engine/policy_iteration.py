"""Policy iteration with exact sparse solves on a block of cyclic SCCs (Howard 1960).

The block's successors outside it are already solved. Starting from a proper policy (one that
leaves the block almost surely), each round solves ``(I - P_pi) V = rho_pi + P_out V_out`` with
SuperLU and switches a state only to a choice *strictly* better by a margin (:data:`NOISE` over the
rounding of the choices' values where the policy's values are exact to a few ulp, else 1e-12 relative). With strict
improvement a policy never closes a cycle of mean weighted reward <= 0, so every policy stays proper
and ``I - P_pi`` stays regular. A cycle of positive mean weighted reward (only possible when a weight
rewards what an objective's direction penalises) makes the optimum infinite: the new policy is then
improper, which is detected and reported as :class:`~mopmc.errors.InfiniteValueError`.

Ties: the strict rule keeps a state's choice unless another is strictly better, so where the
current policy's values tie (a region from which it reaches nothing, say) the start policy stays
until improvements reach it, one round at a time: 190 rounds per block on the shared-coin consensus
protocol. Each round therefore first looks ahead: :data:`LOOKAHEAD` Bellman sweeps from the
evaluated values ``v`` (a lower bound, so the sweeps rise monotonically towards the optimum), then
the greedy policy ``g`` of the swept values ``u`` (first maximum). ``T_g u = T u >= u``, so where
``g`` is proper (checked on its graph) its value is at least ``u >= v``: a valid round, strictly
better wherever the strict rule would improve. Where ``g`` is not proper (a tie closed a cycle of
mean weighted reward 0), the round takes the strict rule instead. The consensus blocks then take 3
or 4 rounds.

The m objectives are evaluated at the end with the same LU factors (one solve, m right-hand sides).
A block given a ``band`` budget is solved by subtraction-free elimination in the order of
:func:`mopmc.engine.banded.band_order` when its transitions are banded within it (``banded``;
``None`` otherwise): exact to a few ulp however ill-conditioned (SuperLU's error grows with the
condition number: on a 800-state walk with values near 1e71 it was off by 55 orders of magnitude),
and the engines solve large banded blocks so instead of iterating. With ``cheap``, only when that
costs about what a sparse LU would (:func:`mopmc.engine.banded.block_solver`).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix, diags
from scipy.sparse.csgraph import breadth_first_order
from scipy.sparse.linalg import splu

from mopmc.engine.banded import BAND_BUDGET, RESCUE_FLOPS, block_solver, conserving_split, sums_dd
from mopmc.engine.refine import refine
from mopmc.engine.problem import Problem, exit_mass
from mopmc.errors import InfiniteValueError, UnsupportedModelError

_IMPROVE = 1e-12  # relative margin for a strict improvement where the values are not known exact
NOISE = 32 * np.finfo(np.float64).eps
"""Where a round's values are exact to a few ulp (refinement settled, or band elimination), a
choice improves on the policy's when its ``q`` beats the current one by more than this times the
size of what ``q`` sums (``|rho| + sum p |v|``: its rounding is a few ulp of that). The relative
margin of 1e-12 alone stopped a 35-state walk at a policy that one choice still beat by 0.9 on
values of 2.3e12, 24% below the optimum of 3.0e12 (its expected visits magnify what a step gains).
To it adds :data:`SOLVED` times the block's largest value: a settled refinement leaves each value
within 64 ulp of that (mopmc.engine.refine.SETTLED), and values of 1e-41 standing for 0 beside ones
near 1 let noise pass a margin of their own size (policy iteration then cycled among four policies
for 10,000 rounds on a long-run quotient, and stopped at 1 for 0)."""
SOLVED = 2 * 64 * np.finfo(np.float64).eps
_INFINITE = "the weighted optimum is infinite: this direction rewards staying forever in an end component"
_TOO_ILL = ("a cyclic block of {n} states is too ill-conditioned for a sparse LU (a zero pivot by cancellation; "
            "expected visits beyond double precision) and too wide for band elimination (bandwidth {b})")
_MAX_ROUNDS = 10_000
LOOKAHEAD = 4
"""Bellman sweeps per round before the greedy policy is tried (0: the strict rule alone)."""
GREEDY_ROUNDS = 50
"""Rounds that may take the greedy policy; later ones take the strict rule alone, which cannot
cycle (the greedy policy's values rise only in exact arithmetic: on a long-run quotient whose
values of 1e-41 stood for 0 the torch engine's rounds cycled among four policies)."""


VISITS = 1e13
"""Beyond this many expected steps in a block, a sparse LU's solutions are not trusted (its
forward error grows with them) even where refinement settles: band elimination, where it fits."""


def hopeless(solve, n: int) -> bool:
    """Whether the policy factored in ``solve`` (of ``D - P_off``) stays in its block so long that
    the LU's values may be noise: its expected steps there (``(D - P_off) t = 1``, computed with
    the same LU) beyond :data:`VISITS`, or not even at least 1 as computed. A 55-state walk left
    through five steps of probability 1e-12 in a row (some 1e61 steps) had its values come out as
    1e-26 for 9/14, refinement "settled" (its corrections were as wrong as the LU), and no choice
    looked better; band elimination, subtraction-free, gets them to the last digit."""
    t = np.asarray(solve(np.ones(n))).reshape(n)
    return not (np.all(np.isfinite(t)) and float(t.min()) >= 0.5 and float(t.max()) <= VISITS)


class CyclicBlock:
    """The choices of a set of states, split into the part inside the block and the rest."""

    def __init__(self, p: Problem, states: np.ndarray, matrix: csr_matrix, band: int | None = None,
                 cheap: bool = False):
        self.states = states
        n_b = len(states)
        lens = p.row_groups[states + 1] - p.row_groups[states]
        self.local_rg = np.zeros(n_b + 1, np.int64)
        np.cumsum(lens, out=self.local_rg[1:])
        self.owner = np.repeat(np.arange(n_b, dtype=np.int64), lens)
        self.choices = np.repeat(p.row_groups[states] - self.local_rg[:-1], lens) + np.arange(self.local_rg[-1])
        A = matrix[self.choices]
        local = np.full(p.n_states, -1, np.int64)
        local[states] = np.arange(n_b)
        A = A.tocoo()
        inside = local[A.col] >= 0
        shape_in = (len(self.choices), n_b)
        self.A_in = csr_matrix((A.data[inside], (A.row[inside], local[A.col[inside]])), shape=shape_in)
        self.A_out = csr_matrix((A.data[~inside], (A.row[~inside], A.col[~inside])), shape=A.shape)
        self.leaves = (np.diff(self.A_out.indptr) > 0) | p.exits[self.choices]
        # the policy's matrix is D - P_off (mopmc.engine.refine: rounding leaks in 1 - p compound)
        out = self.A_out.tocoo()
        out_sum, out_lo = sums_dd(out.row, out.data, len(self.choices))
        self.out_sum, self.exits = out_sum, exit_mass(p)[self.choices]  # (numbers: banded.leave_mass)
        self.P_off, self.diag, self.diag_lo = conserving_split(self.A_in, self.owner, out_sum, self.exits, out_lo)
        self._band_tried = False  # (the rescue's budget, RESCUE_FLOPS, is above any tried here)
        self.banded = None
        self.bandwidth = None  # (given a ``band`` budget: the transitions' bandwidth in band order)
        if band:
            self.banded, self.bandwidth = block_solver(self.A_in, self.owner, out_sum, self.exits, band, cheap)

    def solve(self, rho, rewards, V, X, start_policy, check_proper: bool) -> tuple[np.ndarray, int]:
        """Optimise the block in place (``V``, ``X``); return the chosen global choices and rounds."""
        pol = self._to_local(start_policy)
        rho_b = rho[self.choices]
        out_v = rho_b + self.A_out @ V
        out_size = np.abs(rho_b) + self.A_out @ np.abs(V)  # (what q sums, in size: its rounding's scale)
        rounds = 0
        while True:
            rounds += 1
            lu, p_pol, d_pol = self._factor(pol)
            rhs_v = out_v[pol]
            vb = lu.solve(rhs_v)
            settled = True  # (band elimination is subtraction-free: accurate as it is)
            if p_pol is not None:
                vb, settled = refine(lu.solve, p_pol, d_pol, rhs_v, vb)
                if not settled and self._to_band():  # too ill-conditioned for the LU: eliminate without subtractions
                    lu, p_pol, d_pol = self._factor(pol)
                    vb = lu.solve(rhs_v)
                    settled = p_pol is None
            q = out_v + self.A_in @ vb
            best = np.maximum.reduceat(q, self.local_rg[:-1])
            cur = q[pol]
            if settled:  # (values exact to a few ulp: a margin over q's rounding, see NOISE)
                margin = (NOISE * np.maximum.reduceat(out_size + self.A_in @ np.abs(vb), self.local_rg[:-1])
                          + SOLVED * float(np.max(np.abs(vb), initial=0.0)))
            else:
                margin = _IMPROVE * np.maximum(1.0, np.abs(cur))
            better = best > cur + margin
            if not better.any() or rounds >= _MAX_ROUNDS:
                break
            argbest = self._first_max(q, best)
            new = np.where(better, argbest, pol)
            if LOOKAHEAD and rounds <= GREEDY_ROUNDS:  # (see the module's docstring)
                greedy = self._lookahead(out_v, vb, LOOKAHEAD)
                if self._proper(greedy):
                    new = greedy
            pol = new
            if check_proper:
                self._check_proper(pol)
        V[self.states] = vb
        rhs = rewards[self.choices[pol]] + (self.A_out[pol] @ X)
        x = lu.solve(np.ascontiguousarray(rhs))
        X[self.states] = x if p_pol is None else refine(lu.solve, p_pol, d_pol, rhs, x)[0]
        return self.choices[pol], rounds

    def _factor(self, pol: np.ndarray):
        """``(lu, P_off, D)`` for the policy ``pol``: band elimination (``P_off``, ``D`` None) or
        SuperLU of ``D - P_off``; a singular sparse LU goes to band elimination where that fits (a
        zero pivot by cancellation: expected visits near 1e18 on a 551-state trap), as does one
        whose policy stays too long (:func:`hopeless`), and where band elimination too finds a zero
        pivot the policy does not leave the block."""
        if not self.banded:
            p_pol, d_pol = self.P_off[pol], self.diag[pol]
            try:
                lu = splu((diags(d_pol) - p_pol).tocsc())
                if not (hopeless(lu.solve, len(self.states)) and self._to_band()):
                    return lu, p_pol, (d_pol, self.diag_lo[pol])
            except RuntimeError:
                if not self._to_band():
                    if self._proper(pol):  # not infinite: a zero pivot by cancellation
                        raise UnsupportedModelError(_TOO_ILL.format(n=len(self.states), b=self.bandwidth)) from None
                    raise InfiniteValueError(_INFINITE) from None
        try:
            return self.banded.factor(pol), None, None
        except RuntimeError:
            raise InfiniteValueError(_INFINITE) from None

    def _to_band(self) -> bool:
        """Switch this block to band elimination when it fits the default budgets; whether it did."""
        if self.banded is None and not self._band_tried:
            self._band_tried = True
            self.banded, self.bandwidth = block_solver(self.A_in, self.owner, self.out_sum, self.exits,
                                                       BAND_BUDGET, False, RESCUE_FLOPS)
        return self.banded is not None

    def _to_local(self, global_choices: np.ndarray) -> np.ndarray:
        return global_choices - (self.choices[self.local_rg[:-1]] - self.local_rg[:-1])

    def _first_max(self, q: np.ndarray, best: np.ndarray) -> np.ndarray:
        """Per state, its first choice whose ``q`` reaches ``best`` (local choice indices)."""
        cand = np.flatnonzero(q >= best[self.owner])
        owners, first = np.unique(self.owner[cand], return_index=True)
        argbest = np.empty(len(self.states), np.int64)
        argbest[owners] = cand[first]
        return argbest

    def _lookahead(self, out_v: np.ndarray, v: np.ndarray, sweeps: int) -> np.ndarray:
        """The greedy policy of ``sweeps`` Bellman sweeps from ``v`` (kept monotone in rounding)."""
        starts = self.local_rg[:-1]
        for _ in range(sweeps):
            v = np.maximum(np.maximum.reduceat(out_v + self.A_in @ v, starts), v)
        q = out_v + self.A_in @ v
        return self._first_max(q, np.maximum.reduceat(q, starts))

    def _check_proper(self, pol: np.ndarray) -> None:
        if not self._proper(pol):
            raise InfiniteValueError(_INFINITE)

    def _proper(self, pol: np.ndarray) -> bool:
        """Whether the block's policy ``pol`` (local choices) leaves the block almost surely."""
        n_b = len(self.states)
        P = self.A_in[pol].tocoo()
        leave = np.flatnonzero(self.leaves[pol])
        rows = np.concatenate((P.col, np.full(len(leave), n_b)))
        cols = np.concatenate((P.row, leave))
        G = csr_matrix((np.ones(len(rows), np.int8), (rows, cols)), shape=(n_b + 1, n_b + 1))
        reached = breadth_first_order(G, n_b, directed=True, return_predecessors=False)
        return len(reached) == n_b + 1
