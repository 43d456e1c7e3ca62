"""The sound iterative method for cyclic blocks too large, or too dear, to factor.

The block's successors outside it are solved already; ``b[c] = rho[c] + sum_{t outside} P(c, t) V(t)``
is what choice ``c`` collects on its step. Three phases, all compiled
(:mod:`mopmc.engine.iterative_kernels`):

1. **Optimistic value iteration** (Hartmanns & Kaminski 2020) on the weighted values: a lower bound
   ``L`` from the start policy's certified values, raised by a few rounds of policy iteration on
   large blocks (the greedy policy of ``L``, its chain solved and certified, ``L <- max(L, lower)``),
   then by Gauss-Seidel ``L <- max(L, T L)`` until the changes still to come, extrapolated from their
   rate, are small; a guess ``U = L + delta``, lowered by Gauss-Seidel sweeps of ``T`` until
   ``T U <= U``. Any such ``U`` bounds the value of every proper policy from above
   (``V_sigma = lim T_sigma^k U <= U``), so it certifies the optimum without any assumption on end
   components. End components of the block whose choices have weighted reward exactly 0
   (direction-dependent; all-zero ones were collapsed before) would stall the upper iterates: ``U``
   is *deflated* there to its maximum over the component (Kelmendi et al. 2018).
2. **The scheduler**: greedy in ``L``; states left without a path out of the block under it get a
   near-optimal choice towards the states that have one (an attractor), so the policy is proper.
3. **Its m + 1 values** (weighted, then each objective) on the induced chain, m + 1 right-hand sides
   at once: Gauss-Seidel from first guesses, certified by the residual ``r`` and a supersolution
   ``t/g`` of the expected steps before leaving (``|v - x| <= max|r| t/g``; Kelmendi et al. and
   Quatmann & Katoen bound the same quantity by iterating). The guesses: the previous direction's
   values (one query's directions differ little), else, on large blocks, BiCGSTAB's solution
   (symmetric Gauss-Seidel preconditioned), which needs far fewer matrix products than sweeps
   where the chain mixes slowly. No guess is trusted: each is certified or swept until it is.

What is bounded (returned by :meth:`IterativeBlock.solve`): ``errors[i]`` bounds
``|X[s, i] - x_sigma(s, i)|`` for every block state ``s``, where ``x_sigma`` is the exact value of
the returned policy *given the successors' values as passed in*; ``gap`` bounds
``V*(s) - V[s]`` where ``V*`` is the weighted optimum over all proper policies, again given the
successors' values. The kernel adds these bounds along the processing order (values depend on
successors through expectations with total mass <= 1, so errors add up, never multiply). All bounds
hold up to floating-point rounding.

A weighted reward ``> 0`` on a choice of an end component of the block (only possible with weights
that reward what an objective penalises) could close a cycle of positive mean reward: such blocks, and
blocks on which the iterations exhaust their budget (a block iterated only because factoring it looked
dear has a budget of about a few factorisations, :func:`mopmc.engine.banded.iteration_budget`, and
is then factored for good), are solved by exact policy iteration instead.
"""

from __future__ import annotations

import numpy as np

from mopmc.engine.banded import BAND_BUDGET
from mopmc.engine.policy_iteration import CyclicBlock
from mopmc.engine.problem import Problem
from mopmc.engine.reductions.end_components import maximal_end_components

_MAX_SWEEPS = 200_000
_MAX_CHAIN = 1_000_000
_VERIFY = 20_000
_RETRIES = 8
KRYLOV_STATES = 2_000
"""Cold chains of at least this many states start from BiCGSTAB's solution (see ``_krylov``)."""
KRYLOV_RTOL = 1e-11
KRYLOV_ITER = 2_000
IMPROVE_ROUNDS = 8
"""Rounds of policy iteration that raise value iteration's start (see ``_improve``)."""
IMPROVE_SWEEPS = 32
IMPROVE_LOOKAHEAD = 4
"""Bellman sweeps from ``L`` before each round's greedy policy (see ``_improve``)."""
WARM_SWEEPS = 16
"""Half-sweeps that may certify the last direction's values on a large block before BiCGSTAB
solves the chain (see ``solve``)."""


class IterativeBlock:
    """A block of cyclic SCCs solved by the sound iterative method (see the module docstring)."""

    def __init__(self, p: Problem, states: np.ndarray, matrix, exact: CyclicBlock | None = None,
                 budget: int | None = None):
        """``exact``: the block for policy iteration when iterating fails (built here unless given;
        in band elimination when the block is banded: exact however ill-conditioned). ``budget``:
        the most sweeps of any one phase before the block is left to ``exact`` for good (for blocks
        iterated because factoring them looked dear: a slowly mixing one is factored after all)."""
        from mopmc.engine import numba_kernels as nk

        self.exact = e = exact if exact is not None else CyclicBlock(p, states, matrix, band=BAND_BUDGET)
        self.states = states
        A = e.A_in
        A.sort_indices()
        self.rg = e.local_rg
        self.ip = A.indptr.astype(np.int64)
        self.tg = A.indices.astype(np.int64)
        self.pr = A.data
        self.internal = ~e.leaves
        n_b, n_c = len(states), len(e.choices)
        self.local = Problem(self.rg, self.ip, self.tg, self.pr, np.zeros((n_c, 0)), e.leaves, -1)
        self.rev_ptr, self.rev_choice = nk.reverse_index_csr(n_b, self.ip, self.tg)
        # choices of the block's end components: the only ones that can be taken forever
        self.in_ec = maximal_end_components(self.local, self.internal).inside
        self.fallbacks = 0
        # the last solve's objective values and expected steps: first guesses for the next one's
        # chains (directions of one query differ little; any guess is sound, see chain_residual)
        self._X: np.ndarray | None = None
        self._t = np.zeros(n_b)
        self.budget = budget

    def solve(self, rho, rewards, V, X, start_policy, check_proper: bool, precision: float, w=None):
        """Optimise the block in place (``V``, ``X``); return ``(choices, gap, errors)``. ``w``: the
        direction's weights (``rho`` is the rewards weighted by them), for the first guesses only."""
        e = self.exact
        rho_b = rho[e.choices]
        if (self.budget is not None and self.fallbacks) or (self.in_ec & (rho_b > 0)).any():
            return self._exact(rho, rewards, V, X, start_policy, check_proper)
        b = rho_b + e.A_out @ V
        B = np.column_stack((b, rewards[e.choices] + e.A_out @ X)) if X.shape[1] else b[:, None]
        pol = e._to_local(start_policy)
        tau = max(float(precision), 1e-15)
        w = None if w is None else np.asarray(w, np.float64)
        start = self._X @ w if self._X is not None and w is not None else None
        got = self._optimise(b, pol, tau, start)
        if got is None:
            return self._exact(rho, rewards, V, X, start_policy, check_proper)
        U, pol, L = got
        guess = np.zeros((len(self.states), B.shape[1]))
        guess[:, 0] = L
        warm = True
        if self._X is not None and self._X.shape[1] == B.shape[1] - 1:
            guess[:, 1:] = self._X
        elif B.shape[1] == 2 and w is not None and w[0] != 0.0:
            guess[:, 1] = L / w[0]
        else:
            warm = B.shape[1] == 1
        large = len(self.states) >= KRYLOV_STATES
        lo, hi, _, ok = self._chain(pol, B, tau, guess, warm, WARM_SWEEPS if warm and large else None)
        if warm and large and not ok:
            # the last direction's values, slow to certify on a slowly mixing chain (370 sweeps on
            # average on the 22^3 cube's Pareto query): BiCGSTAB's solution instead, with the last
            # expected steps, then with those solved afresh (as in _improve)
            for steps in (False, True):
                lo, hi, _, ok = self._chain(pol, B, tau, guess, False, IMPROVE_SWEEPS if not steps else None, steps)
                if ok:
                    break
        if not np.isfinite(lo).all() or (self.budget is not None and not ok):
            return self._exact(rho, rewards, V, X, start_policy, check_proper)
        mid = 0.5 * (lo + hi)
        self._X = mid[:, 1:].copy()
        V[self.states] = mid[:, 0]
        X[self.states] = mid[:, 1:]
        errors = 0.5 * (hi - lo).max(axis=0)[1:]
        gap = max(float((U - mid[:, 0]).max()), 0.0)
        return e.choices[pol], gap, errors

    # ------------------------------------------------------------------ phases
    def _cap(self, limit: int) -> int:
        """A phase's iteration limit: ``limit``, or the block's budget where it has one."""
        return limit if self.budget is None else int(self.budget)

    def _chain(self, pol, B, tau, guess, warm, max_sweeps=None, steps=True):
        """Certified values of the chain of ``pol`` to relative precision ``tau`` (``guess``: first
        values, swept in place; the expected steps start from the last chain's, solved afresh
        with ``steps`` where the chain is cold and large)."""
        from mopmc.engine import iterative_kernels as ik

        rel = np.full(B.shape[1], tau)
        max_sweeps = self._cap(_MAX_CHAIN) if max_sweeps is None else max_sweeps
        if not warm and len(self.states) >= KRYLOV_STATES:
            warm = self._krylov(pol, B, guess, steps)
        return ik.chain_residual(pol, self.ip, self.tg, self.pr, np.ascontiguousarray(B), rel, max_sweeps, 4,
                                 guess, self._t, warm)

    def _krylov(self, pol, B, guess, steps: bool = True) -> bool:
        """First guesses by BiCGSTAB on ``(I - P) x = B`` and (with ``steps``) ``(I - P) t = 1``
        (far fewer matrix products than Gauss-Seidel sweeps on slowly mixing chains; any guess is
        sound, the residual certifies it): ``guess`` and the expected steps in place where it
        converged; whether every column did."""
        from mopmc.engine import iterative_kernels as ik

        n = len(self.states)
        if n >= 2**31:  # (the compiled chain's targets are 32-bit)
            return False
        rows = np.asarray(B)[pol]
        every = True
        for j in range(-1 if steps else 0, B.shape[1]):
            rhs = np.ones(n) if j < 0 else np.ascontiguousarray(rows[:, j])
            if not rhs.any():
                continue
            # (from 0: from a guess, such as the last policy's values, it can stall, 2,000
            # iterations without converging on the 51^3 cube against about 70 from 0)
            x = np.zeros(n)
            if not ik.chain_bicgstab(pol, self.ip, self.tg, self.pr, rhs, x, KRYLOV_RTOL, min(KRYLOV_ITER, self._cap(_MAX_CHAIN))):
                every = False
            elif j < 0:
                self._t[:] = x
            else:
                guess[:, j] = x
        return every

    def _improve(self, b, L, tau, TU, arg) -> None:
        """Raise the lower bound ``L`` (in place) by rounds of policy iteration: the greedy policy of
        ``T^k L`` (``k = IMPROVE_LOOKAHEAD`` Bellman sweeps from ``L``, which look further ahead, as
        in :mod:`mopmc.engine.policy_iteration`: on the 22^3 cube's Pareto query, 33 directions,
        188 rounds became 112 and 6.3 s 5.4 s; R min on the 51^3 cube 4.2 s -> 3.6 s, with half
        the bound), its chain solved by BiCGSTAB and certified
        (``L <- max(L, lower)``: both lower bounds of the optimum; the sweeps only choose the
        policy, whose values are certified whatever it is). A greedy policy that does not leave the
        block surely is not certified (no supersolution of its expected steps) and ends the rounds;
        so do rounds that gain less than ``tau`` relative. On slowly mixing blocks each round
        replaces hundreds of value-iteration sweeps (R max on the 31^3 cube: 3,275 sweeps, 2 s,
        before; see benchmarks/results/chains.md)."""
        from mopmc.engine import iterative_kernels as ik

        ahead = np.empty_like(L)
        for _ in range(IMPROVE_ROUNDS):
            ik.bellman(self.rg, self.ip, self.tg, self.pr, b, L, TU, arg)
            if float((TU - L).max()) <= tau * max(float(np.abs(L).max()), 1e-300):
                return
            for _ in range(IMPROVE_LOOKAHEAD):
                ahead[:] = TU
                ik.bellman(self.rg, self.ip, self.tg, self.pr, b, ahead, TU, arg)
            pol = arg.copy()
            # the last expected steps first (the policies differ little), then solved afresh
            for steps in (False, True):
                guess = np.zeros((len(L), 1))
                lo, _, _, _ = self._chain(pol, b[:, None], tau, guess, False, IMPROVE_SWEEPS, steps)
                if np.isfinite(lo).all():
                    break
            if not np.isfinite(lo).all():
                return
            np.maximum(L, lo[:, 0], out=L)

    def _optimise(self, b, pol, tau, start=None):
        """Phases 1 and 2: the certified upper bound ``U``, a proper near-optimal policy and the
        lower bound ``L`` it was chosen from, or None. ``start``: a guess of ``pol``'s values."""
        from mopmc.engine import iterative_kernels as ik

        guess = np.zeros((len(self.states), 1)) if start is None else np.array(start, np.float64).reshape(-1, 1)
        lo0, hi0, _, _ = self._chain(pol, b[:, None], tau, guess, start is not None)
        if not np.isfinite(lo0).all():
            return None
        L = lo0[:, 0].copy()
        n_b = len(self.states)
        TU = np.empty(n_b)
        arg = np.empty(n_b, np.int64)
        if n_b >= KRYLOV_STATES:
            self._improve(b, L, tau, TU, arg)
        scale = max(float(np.abs(lo0).max()), float(np.abs(hi0).max()), float(np.abs(L).max()), 1e-300)
        deflate = self._deflation(b)
        delta = 0.5 * tau * scale
        tol = 0.1 * delta
        for _ in range(_RETRIES):
            cap = self._cap(_MAX_SWEEPS)
            if ik.lower_sweeps(self.rg, self.ip, self.tg, self.pr, b, L, cap, tol) >= cap:
                if self.budget is not None:
                    return None
            U = deflate(L + delta)
            fell = True
            for i in range(self._cap(_VERIFY)):
                # the certificate is Jacobi's T U <= U, checked where a Gauss-Seidel sweep (which
                # lowers U faster) let no value rise, and every 16 sweeps (deflation raises values)
                if (fell or i % 16 == 15) and ik.bellman(self.rg, self.ip, self.tg, self.pr, b, U, TU, arg):
                    ik.bellman(self.rg, self.ip, self.tg, self.pr, b, L, TU, arg)
                    return U, self._proper(b, L, arg, delta), L
                fell = ik.upper_sweep(self.rg, self.ip, self.tg, self.pr, b, U, i % 2 == 0)
                U = deflate(U)
                if (U < L).any():
                    break
            tol *= 0.1
        return None

    def _deflation(self, b):
        """``U -> U`` raised to its maximum over each end component of weighted-zero choices."""
        zero = self.in_ec & (b == 0.0)
        if not zero.any():
            return lambda U: U
        ecs = maximal_end_components(self.local, zero)
        if ecs.count == 0:
            return lambda U: U
        members = np.flatnonzero(ecs.component >= 0)
        members = members[np.argsort(ecs.component[members], kind="stable")]
        comp = ecs.component[members]
        starts = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1]])

        def deflate(U):
            U[members] = np.repeat(np.maximum.reduceat(U[members], starts), np.diff(np.r_[starts, len(members)]))
            return U

        return deflate

    def _proper(self, b, L, greedy, delta):
        """The greedy policy, with states that cannot leave the block under it redirected."""
        from mopmc.engine import numba_kernels as nk

        e = self.exact
        pol = greedy.copy()
        n_b = len(self.states)
        owner = e.owner
        taken = np.zeros(len(e.choices), bool)
        taken[pol] = True
        every = np.ones(n_b, bool)
        ok, _ = nk.backward_reach(e.leaves[pol], self.rev_ptr, self.rev_choice, owner, taken, every)
        if ok.all():
            return pol
        q = b + e.A_in @ L
        near = q >= L[owner] - delta
        for allowed in (near, np.ones(len(e.choices), bool)):
            seeds = ok | (np.bincount(owner[e.leaves & allowed], minlength=n_b) > 0) & ~ok
            mark, via = nk.backward_reach(seeds, self.rev_ptr, self.rev_choice, owner, allowed, every)
            fresh_exit = seeds & ~ok
            if fresh_exit.any():
                firsts = np.full(n_b, -1, np.int64)
                cs = np.flatnonzero(e.leaves & allowed)[::-1]
                firsts[owner[cs]] = cs
                pol[fresh_exit] = firsts[fresh_exit]
            fresh = mark & ~seeds
            pol[fresh] = via[fresh]
            ok = mark
            if ok.all():
                return pol
        raise AssertionError("a state of a good block cannot leave it")  # excluded by preprocessing

    def _exact(self, rho, rewards, V, X, start_policy, check_proper):
        self.fallbacks += 1
        chosen, _ = self.exact.solve(rho, rewards, V, X, start_policy, check_proper)
        return chosen, 0.0, np.zeros(X.shape[1])
