"""The weighted-optimisation kernel: prepare once, then ``optimise(w)`` for many directions.

Convention. Objective ``i`` has a preferred direction ``direction[i]`` (+1 for ``max``, -1 for
``min``). A direction ``w`` lives in the *preferred* space: :meth:`Engine.optimise` finds a
deterministic scheduler maximising ``sum_i w_i * direction_i * value_i`` over all schedulers under
which every objective is finite, so ``w >= 0`` asks for "better in every objective". ``values`` are
returned in original units, sign and objective order; ``point = direction * values``.

Preprocessing (:class:`Engine`), each step keeping the map back to the model:

1. :mod:`~mopmc.engine.reductions.goal_memory`: reachable product with goal memory; objectives
   become rewards ``u_i`` to maximise.
2. :func:`~mopmc.engine.reductions.graph.drop_worthless`: states that can collect nothing; where
   step 7 would renumber, what it keeps is numbered in processing order (the plan of step 6) in the
   same copy, so step 7 has nothing left to do unless steps 4 or 5 change the problem.
3. Infinite rewards, as Storm: an objective whose preferred-direction reward lies in a reachable end
   component is infinite: :class:`~mopmc.errors.InfiniteValueError`.
4. :func:`~mopmc.engine.reductions.end_components.collapse` of end components where no objective
   collects reward (with a "stay" choice, value 0, unless ``allow_stay=False``).
5. Keep the states from which the terminal is reached almost surely under some scheduler (others
   collect infinite reward in the non-preferred direction under every scheduler: dominated); if
   the initial state is not among them, no scheduler is finite: error.
6. :mod:`~mopmc.engine.scc` plan (runs of small cyclic SCCs merged into one block); acyclic parts
   in one compiled pass, cyclic SCCs by :mod:`~mopmc.engine.policy_iteration` (exact sparse LU, or
   band elimination, :mod:`~mopmc.engine.banded`), or, for blocks of more than ``size_limit``
   states (``method="auto"``) that are neither narrowly banded nor grid-like, or always
   (``method="iterative"``), by the sound iterative method of :mod:`~mopmc.engine.iterative`.
7. States renumbered in processing order (``renumber="always"``, which the torch engine needs), or
   only when the order is far from sequential (``"auto"``: Storm's numbering usually is already);
   never when they are in that order already.

A model with no cyclic block (most switch models) is optimised by a backward pass of the weighted
value alone, and its objective values at the initial state come from the expected visits under the
chosen policy (one forward pass): two scalars per state instead of ``m + 1``. ``per_state`` results,
and plans with cyclic blocks, take the full pass of every objective.

Every step that keeps everything (no worthless states, no zero end components, all states good, a
model Storm built and so reachable) passes the problem on without copying it.

Precision. Acyclic parts and policy iteration are exact up to floating-point rounding
(``error_bound == 0.0``). With iteratively solved blocks, ``error_bound`` is a certified ``eps``
(up to rounding) such that (1) every returned value is within ``eps`` of the exact value of the
returned scheduler, and (2) no scheduler keeping all objectives finite beats the returned one by
more than ``eps * sum(|w|)`` in ``w . point``. Each block stops when its bounds are within
``precision / k`` relative to the magnitude of its values (``k`` iterative blocks).

Example:
    >>> eng = Engine(model, objectives)                      # doctest: +SKIP
    >>> r = eng.optimise([1.0, 0.5]); r.values, r.scheduler  # doctest: +SKIP
    >>> r2 = eng.optimise([0.9, 0.6], warm=r)                # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from mopmc.engine.banded import BAND_BUDGET, grid_like, iterate_rather, iteration_budget
from mopmc.engine.iterative import IterativeBlock
from mopmc.engine.policy_iteration import CyclicBlock
from mopmc.engine.problem import Problem, denominators, identity, is_range, permute, restrict
from mopmc.engine.reductions import end_components as ec
from mopmc.engine.reductions import goal_memory, graph
from mopmc.engine.scc import Plan, Sccs, nearly_sequential, plan, processing_order
from mopmc.engine.scheduler import Scheduler
from mopmc.errors import InfiniteValueError, MixedSignError
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective


BATCH = 4
"""Directions per batch of :meth:`Engine.optimise_many`: each costs two ``(n_states, k)`` arrays
of fresh memory. Model A n=200, the 8 axis directions of 4 objectives: 0.41-0.45 s one by one,
batches of 2: 0.35-0.37 s, of 4: 0.24-0.28 s, all 8 at once: 0.33 s (more first touches)."""


@dataclass(frozen=True, eq=False)
class KernelResult:
    """One kernel call: ``values`` (original units and order), ``point = direction * values``,
    ``weighted = w . point``, ``error_bound`` (absolute, on each value; 0.0 = exact up to
    floating-point rounding), ``policy`` (the engine's internal choice per state, for warm starts)."""

    w: np.ndarray
    values: np.ndarray
    point: np.ndarray
    weighted: float
    error_bound: float
    policy: np.ndarray
    seconds: float
    engine: "Engine" = field(repr=False)
    state_values: np.ndarray | None = field(default=None, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def scheduler(self) -> Scheduler:
        """The optimal deterministic scheduler, on the model (with goal memory where needed)."""
        if "s" not in self._cache:
            self._cache["s"] = self.engine.scheduler(self.policy)
        return self._cache["s"]


class _Stamps:
    """Seconds per preprocessing stage, into ``timings`` (stage name -> seconds since the last stamp)."""

    def __init__(self, t0: float):
        self.last = t0
        self.timings: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = now - self.last
        self.last = now


class Engine:
    """Preprocessed weighted optimisation for ``objectives`` on ``model``; see the module docstring.

    Args:
        model: the MDP.
        objectives: total rewards, reachability probabilities, or rewards until a target (inside
            ``multi``: collected until the target, forever on paths that never reach it).
        allow_stay: whether a scheduler may stay forever in a zero-reward end component (False for
            Storm's single-objective ``R[F phi]``, which only counts schedulers reaching phi).
        choice_mask: restrict schedulers to these model choices.
        method: ``"auto"`` (exact policy iteration on blocks of cyclic SCCs up to ``size_limit``
            states, and above where they are banded or grid-like; the sound iterative method on the
            others), ``"exact"`` or ``"iterative"`` (all blocks).
        size_limit: the largest block solved by sparse LU in SuperLU's order under ``"auto"``; larger
            blocks are solved by elimination within their band when it is narrow
            (:mod:`mopmc.engine.banded`: factors of at most ``band_budget`` entries), by SuperLU when
            grid-like (``n b <= LU_GATE``), else iteratively (``band_budget`` 0: both off).
        precision: relative precision of the iterative method (default 1e-6); see the module docstring.
        renumber: ``"always"`` renumbers the states in processing order, so that every step of the
            plan is a contiguous range (``contiguous``; the torch engine needs it); ``"auto"`` skips
            that when the processing order is already almost sequential (no gain, a copy saved).
    """

    def __init__(
        self,
        model: SparseMDP,
        objectives: Sequence[Objective],
        *,
        allow_stay: bool = True,
        choice_mask: np.ndarray | None = None,
        method: str = "auto",
        size_limit: int = 100_000,
        band_budget: int = BAND_BUDGET,
        precision: float = 1e-6,
        renumber: str = "auto",
    ):
        if renumber not in ("auto", "always"):
            raise ValueError(f"renumber {renumber!r}: use auto or always")
        if method not in ("auto", "exact", "iterative"):
            raise ValueError(f"method {method!r}: use auto, exact or iterative")
        if not precision > 0:
            raise ValueError(f"precision {precision!r}: must be positive")
        t0 = time.perf_counter()
        self.method, self.size_limit, self.precision = method, int(size_limit), float(precision)
        self.band_budget = int(band_budget)
        self.model = model
        self.objectives = tuple(objectives)
        self.m = len(self.objectives)
        stamp = _Stamps(t0)
        p0, self.pmap, self.orientation = goal_memory.apply(model, self.objectives, choice_mask)
        self.product = p0
        stamp("product")
        # removing states copies the problem: in processing order where it will be renumbered
        self.worthless, p1_sccs, p1_plan = graph.drop_worthless(p0, "plan" if renumber == "always" else "auto")
        p1 = self.worthless.problem
        stamp("worthless")
        self.timings = stamp.timings
        self.trivial = p1.initial < 0
        self.contiguous = True  # every plan step a contiguous range of states (see ``renumber``)
        if self.trivial:
            self.n_iterative = 0
            self.timings["total"] = time.perf_counter() - t0
            return
        self._check_finite(p1, p1_sccs)
        stamp("finite")
        self.quotient = ec.collapse(p1, self.zero_ecs, stay=allow_stay)
        q = self.quotient.problem
        p1_order = None  # processing_order(p1_plan), once
        if q is p1 and p1_plan.n_cyclic == 0:  # every SCC one state: one pass, successors first
            p1_order = processing_order(p1_plan)
            good, proper = graph.almost_sure_exit_acyclic(q, p1_order)
        else:
            g = graph.Csr(q.row_groups, q.indptr, q.targets)
            good, proper = graph.almost_sure_max(g, np.zeros(q.n_states, bool), q.exits)
        if not good[q.initial]:
            if self.m == 1:
                o = self.objectives[0]
                what = (f"{o.text} is infinite ({'-inf' if o.sense == 'max' else 'inf'}): every scheduler collects "
                        f"{'negative' if o.sense == 'max' else 'positive'} reward forever in an end component")
            else:
                what = (f"every scheduler collects infinite reward against the preferred direction of some "
                        f"objective ({self._names()}): no scheduler keeps all objectives finite")
            err = InfiniteValueError(f"{model.source}: {what}")
            err.against = True  # infinite in the non-preferred direction (e.g. +inf for a min objective)
            raise err
        if good.all():  # (as restrict would: no copies)
            self.good = identity(q)
        else:
            valid = good[q.state_of_choice()] & _all_in(q, good)
            self.good = restrict(q, good, valid)
            proper = _global(self.good, proper[good], q)
        stamp("proper")
        # drop_worthless's plan still holds when nothing was collapsed or removed since
        first = p1_plan if self.good.problem is p1 else plan(self.good.problem)
        stamp("plan")
        # renumber states in processing order: the compiled pass then reads memory almost sequentially
        order = p1_order if first is p1_plan and p1_order is not None else processing_order(first)
        # already almost sequential (e.g. Storm's BFS numbering, read backwards): renumbering would
        # cost a full copy of the transitions and save nothing, so the model keeps its numbering
        # (in that order already: drop_worthless numbered what it kept so)
        renumbered = not is_range(order) and not (renumber == "auto" and nearly_sequential(order))
        if renumbered:
            self.perm = permute(self.good.problem, order)
            self.proper = _global(self.perm, proper[order], self.good.problem)
            sm = self.perm.state_map
            self.plan = Plan(first.label[order], first.level[order], tuple((k, sm[s]) for k, s in first.steps), first.n_cyclic)
        else:  # no copies of every state's arrays
            self.perm, self.proper, self.plan = identity(self.good.problem), proper, first
        p = self.problem = self.perm.problem
        # (plan() merged the runs of small SCCs already: one block, not one each)
        self.contiguous = renumbered or all(is_range(s) for _, s in self.plan.steps)
        stamp("renumber")
        self.matrix = p.matrix() if any(kind == "cycles" for kind, _ in self.plan.steps) else None  # for the cyclic blocks
        self.self_only = _self_only(p)
        self.den = denominators(p)  # (1 - p_self per choice, summed from what it sends elsewhere)
        self._paying, self._pays = _paying_rows(p.rewards)
        self.blocks = [self._block(p, s) if kind == "cycles" else None for kind, s in self.plan.steps]
        self.n_iterative = sum(isinstance(b, IterativeBlock) for b in self.blocks)
        # no cyclic block: optimise() takes the scalar backward + forward-visits path (_solve_acyclic)
        self.acyclic = all(kind == "pass" for kind, _ in self.plan.steps)
        if self.acyclic:
            # (the plan kept: its processing order is the one computed above)
            self._order = order if self.plan is first else processing_order(self.plan)
            self._no_rewards = np.zeros((p.n_choices, 0))
        self.timings["total"] = time.perf_counter() - t0

    # ------------------------------------------------------------------ preprocessing helpers
    def _block(self, p: Problem, states: np.ndarray):
        small = self.method == "exact" or (self.method == "auto" and len(states) <= self.size_limit)
        block = CyclicBlock(p, states, self.matrix, band=self.band_budget, cheap=small)
        if self.method == "auto" and block.banded is None and iterate_rather(len(states), block.bandwidth):
            # (a three-dimensional shape) within about the sweeps of factoring it a few times
            budget = iteration_budget(len(states), block.bandwidth, block.A_in.nnz)
            return IterativeBlock(p, states, self.matrix, exact=block, budget=budget)
        if small or (self.method == "auto" and block.banded is not None):
            return block
        if self.method == "auto" and self.band_budget > 0 and grid_like(len(states), block.bandwidth):
            return block  # grid-like: SuperLU in its own order (see mopmc.engine.banded.LU_GATE)
        return IterativeBlock(p, states, self.matrix, exact=block)

    def _names(self) -> str:
        return ", ".join(o.text for o in self.objectives)

    def _check_finite(self, p1: Problem, sccs: Sccs) -> None:
        """Refuse infinite objectives, find the zero-reward MECs (``sccs``: ``p1``'s SCCs)."""
        from mopmc.engine import numba_kernels as nk

        cand = ec.cyclic_candidates(p1, sccs.label, len(sccs.height))
        zero = ~nk.nonzero_rows(p1.rewards)
        if not (p1.rewards > 0).any():  # (no gains: neither infinite nor mixed; one decomposition)
            self.zero_ecs = ec.maximal_end_components(p1, zero, cand)
            return
        every = ec.maximal_end_components(p1, np.ones(p1.n_choices, bool), cand)
        positive = np.zeros(self.m, bool)
        if every.inside.any():
            rows = np.flatnonzero(every.inside)
            comp = every.component[p1.state_of_choice()[rows]]
            R = p1.rewards[rows]  # (the preferred space: gains are > 0)
            gains, losses = np.zeros((every.count, self.m), bool), np.zeros((every.count, self.m), bool)
            np.logical_or.at(gains, comp, R > 0)
            np.logical_or.at(losses, comp, R < 0)
            mixed = (gains & losses).any(axis=0)
            if mixed.any():
                names = ", ".join(self.objectives[i].text for i in np.flatnonzero(mixed))
                exc = MixedSignError(
                    f"{self.model.source}: {names}: an end component collects rewards of both signs; whether "
                    "staying in it gains without bound, nets 0 or has no total depends on its cycles, which "
                    "this engine does not weigh: use --engine lp (the exact LP), or give the rewards one sign "
                    "in each end component"
                )
                exc.objectives = names
                raise exc
            positive = gains.any(axis=0)
        if positive.any():
            bad = [self.objectives[i] for i in np.flatnonzero(positive)]
            what = "; ".join(
                f"{o.text} is infinite ({'inf' if o.sense == 'max' else '-inf'}: {'positive' if o.sense == 'max' else 'negative'} "
                f"reward in a reachable end component under {o.sense})"
                for o in bad
            )
            exc = InfiniteValueError(f"{self.model.source}: {what}")
            exc.preferred = True  # infinite in the preferred direction (+inf under max, -inf under min)
            raise exc
        if zero[every.inside].all():  # every end component collects nothing: they are the zero ones
            self.zero_ecs = every
        else:
            self.zero_ecs = ec.maximal_end_components(p1, zero, every.component >= 0)

    # ------------------------------------------------------------------ the kernel
    def optimise(
        self,
        w: Sequence[float],
        warm: KernelResult | None = None,
        *,
        per_state: bool = False,
        precision: float | None = None,
    ) -> KernelResult:
        """Maximise ``w . point`` (preferred space); ``warm``: a previous result to start from.

        ``per_state``: also return ``state_values`` (model states x objectives, original units):
        the values of the returned scheduler from each model state with empty goal memory (NaN
        where that state is not among the engine's reachable product states, or where every
        scheduler is infinite against an objective's preferred direction). ``precision``
        overrides the engine's for the iterative method.
        """
        t0 = time.perf_counter()
        w = np.asarray(w, np.float64).reshape(self.m)
        if self.trivial:
            res = self._result(w, np.zeros(self.m), np.zeros(0, np.int64), t0)
            return replace(res, state_values=self._state_values(None)) if per_state else res
        target = self.precision if precision is None else float(precision)
        start = warm.policy if warm is not None and warm.engine is self and len(warm.policy) else self.proper
        tau = target / max(self.n_iterative, 1)
        if self.acyclic and not per_state:
            u, choice = self._solve_acyclic(w)
            return self._result(w, u, choice, t0)
        for _ in range(4):
            X, choice, bound = self._solve(w, start, tau)
            # block precisions are relative to each block's values: tighten when the initial value is smaller
            goal = target * max(1.0, float(np.abs(X[self.problem.initial]).max(initial=0.0)))
            if bound <= goal:
                break
            start, tau = choice, tau * max(goal / bound, 1e-3) * 0.5
        res = self._result(w, X[self.problem.initial], choice, t0, bound)
        return replace(res, state_values=self._state_values(X)) if per_state else res

    def _solve_acyclic(self, w: np.ndarray):
        """No cyclic block: the weighted optimum by one backward pass of a scalar per state, then
        the objective values at the initial state by expected visits under its policy (one forward
        pass): two scalars per state instead of ``m + 1``. Exact, as the full pass (up to rounding)."""
        from mopmc.engine import numba_kernels as nk

        p = self.problem
        rho = self._weighted(w)
        V = np.zeros(p.n_states)
        choice = np.full(p.n_states, -1, np.int64)
        none = np.zeros((p.n_states, 0))  # (bellman_pass with no objective columns: the weighted value only)
        for _, states in self.plan.steps:
            at = nk.bellman_pass(states, p.row_groups, p.indptr, p.targets, p.probs, self.self_only, self.den, rho,
                                 self._no_rewards, V, none, choice)
            if at >= 0:
                raise InfiniteValueError(
                    "the weighted optimum is infinite: this direction rewards staying forever in an end component"
                )
        u = nk.occupation_values(self._order, p.indptr, p.targets, p.probs, self.den, choice, p.rewards, self._pays, p.initial)
        return u, choice

    def optimise_many(self, W: Sequence[Sequence[float]], warm: KernelResult | None = None) -> list[KernelResult]:
        """:meth:`optimise` for each row of ``W`` in turn (the first warm-started from ``warm``,
        each later one from the one before), with the same results bit for bit.

        A model with no cyclic block takes all directions in one backward pass and one forward
        pass (:func:`~mopmc.engine.numba_kernels.bellman_pass_many`): each state's transitions are
        read once for all of them (in batches of :data:`BATCH`), so ``k`` directions cost less
        than ``k`` calls (the convex query's ``2m`` axis directions)."""
        W = np.asarray(W, np.float64).reshape(-1, self.m)
        if self.trivial or not self.acyclic or len(W) < 2:
            out: list[KernelResult] = []
            for w in W:
                out.append(self.optimise(w, warm=out[-1] if out else warm))
            return out
        return [r for a in range(0, len(W), BATCH) for r in self._acyclic_batch(W[a : a + BATCH])]

    def _acyclic_batch(self, W: np.ndarray) -> list[KernelResult]:
        from mopmc.engine import numba_kernels as nk

        t0 = time.perf_counter()
        p = self.problem
        k = len(W)
        rho = np.empty((p.n_choices, k))
        for d in range(k):
            rho[:, d] = self._weighted(W[d])  # (as optimise computes it: the same rounding)
        V = np.zeros((p.n_states, k))
        choice = np.full((k, p.n_states), -1, np.int64)
        for _, states in self.plan.steps:
            at = nk.bellman_pass_many(states, p.row_groups, p.indptr, p.targets, p.probs, self.self_only, self.den, rho, V, choice)
            if (at >= 0).any():
                raise InfiniteValueError(
                    "the weighted optimum is infinite: this direction rewards staying forever in an end component"
                )
        U = nk.occupation_values_many(self._order, p.indptr, p.targets, p.probs, self.den, choice, p.rewards, self._pays, p.initial, V)
        seconds = (time.perf_counter() - t0) / k
        return [replace(self._result(W[d], U[d], choice[d], t0), seconds=seconds) for d in range(k)]

    def _weighted(self, w: np.ndarray) -> np.ndarray:
        """The weighted reward ``rewards @ w`` of every choice; where few choices pay, a product over
        their rows alone (the rest are 0)."""
        p = self.problem
        if self._paying is None:
            return p.rewards @ w
        rows, R = self._paying
        rho = np.zeros(p.n_choices)
        rho[rows] = R @ w
        return rho

    def _solve(self, w: np.ndarray, start: np.ndarray, tau: float):
        """One pass over the plan: internal values ``X``, the policy, and the certified bound."""
        from mopmc.engine import numba_kernels as nk

        p = self.problem
        rho = self._weighted(w)
        V = np.zeros(p.n_states)
        X = np.zeros((p.n_states, self.m))
        choice = np.full(p.n_states, -1, np.int64)
        check = bool((w < 0).any())
        gap, errors = 0.0, np.zeros(self.m)
        for (kind, states), block in zip(self.plan.steps, self.blocks):
            if kind == "pass":
                at = nk.bellman_pass(states, p.row_groups, p.indptr, p.targets, p.probs, self.self_only, self.den, rho, p.rewards, V, X, choice)
                if at >= 0:
                    raise InfiniteValueError(
                        "the weighted optimum is infinite: this direction rewards staying forever in an end component"
                    )
            elif isinstance(block, IterativeBlock):
                chosen, g, e = block.solve(rho, p.rewards, V, X, start[states], check, tau, w)
                choice[states] = chosen
                gap, errors = gap + g, errors + e
            else:
                chosen, _ = block.solve(rho, p.rewards, V, X, start[states], check)
                choice[states] = chosen
        bound = 0.0
        if self.n_iterative:
            # V and w . X are two estimates of the same weighted value: charge their difference
            slack = gap + max(float(V[p.initial] - w @ X[p.initial]), 0.0)
            norm = float(np.abs(w).sum())
            bound = max(float(errors.max(initial=0.0)), slack / norm if norm > 0 else 0.0)
        return X, choice, bound

    def _result(self, w, u, policy, t0, bound: float = 0.0) -> KernelResult:
        ori = self.orientation
        values = ori.offset + ori.direction * u
        point = ori.direction * values
        return KernelResult(w, values, point, float(w @ point), bound, policy, time.perf_counter() - t0, self)

    def _state_values(self, X: np.ndarray | None) -> np.ndarray:
        """Internal per-state values ``X`` (None: all zero) on the model's states; see :meth:`optimise`."""
        p0, pmap, ori = self.product, self.pmap, self.orientation
        u0 = np.zeros((p0.n_states, self.m))
        if X is not None:
            r1 = self.worthless
            u1 = np.full((r1.problem.n_states, self.m), np.nan)
            gs = self.good.state_map[self.quotient.node]
            ok = gs >= 0
            u1[ok] = X[self.perm.state_map[gs[ok]]]
            kept = r1.state_map >= 0
            u0[kept] = u1[r1.state_map[kept]]
        out = np.full((self.model.n_states, self.m), np.nan)
        fresh = pmap.memory == 0
        out[pmap.state[fresh]] = ori.offset + ori.direction * u0[fresh]
        return out

    # ------------------------------------------------------------------ back to the model
    def scheduler(self, policy: np.ndarray) -> Scheduler:
        """Map an internal policy (choice per preprocessed state) to a scheduler on the model."""
        p0 = self.product
        pmap = self.pmap
        first0 = p0.row_groups[:-1].copy()  # default: the first choice (states worth nothing, never reached)
        choice0 = first0.copy()
        if not self.trivial:
            r1 = self.worthless
            p1 = r1.problem
            quo = self.quotient
            g = self.good
            # preprocessed policy -> quotient choices -> p1 choices (-1: stay)
            node_state = g.state_map  # quotient node -> good state
            qchoice = np.full(quo.problem.n_states, -1, np.int64)
            has = node_state >= 0
            qchoice[has] = g.choice_origin[self.perm.choice_origin[policy[self.perm.state_map[node_state[has]]]]]
            c1 = np.where(qchoice >= 0, quo.origin[np.maximum(qchoice, 0)], -1)
            choice1 = np.full(p1.n_states, -1, np.int64)
            node = quo.node
            in_ec = quo.ecs.component >= 0
            own = ~in_ec & (qchoice[node] >= 0)
            choice1[own] = c1[node[own]]
            if in_ec.any():
                choice1 = self._navigate(p1, quo, qchoice, c1, choice1)
            # p1 -> p0
            keep = r1.state_map >= 0
            mapped = np.where(choice1 >= 0, r1.choice_origin[np.maximum(choice1, 0)], -1)
            s0 = np.flatnonzero(keep)
            c0 = mapped[r1.state_map[s0]]
            choice0[s0[c0 >= 0]] = c0[c0 >= 0]
        # product states without an allowed choice (``choice_mask``) are never entered: any model choice
        model_choice = self.model.row_groups[pmap.state].copy()
        has = np.diff(p0.row_groups) > 0
        model_choice[has] = pmap.choice[choice0[has]]
        return Scheduler(pmap.state, pmap.memory, model_choice, pmap.decided, self.model.n_states)

    def _navigate(self, p1: Problem, quo, qchoice, c1, choice1) -> np.ndarray:
        """Members of collapsed components: move inside towards the chosen exit, or stay inside."""
        from mopmc.engine import numba_kernels as nk

        soc = p1.state_of_choice()
        comp = quo.ecs.component
        in_ec = comp >= 0
        members = np.flatnonzero(in_ec)
        exit_choice = c1[quo.node[members]]  # per member: its component's chosen exit (or -1 stay)
        seeds = np.zeros(p1.n_states, bool)
        leaving = exit_choice >= 0
        owners = soc[exit_choice[leaving]]
        seeds[owners] = True
        g = graph.Csr(p1.row_groups, p1.indptr, p1.targets)
        rev = graph.reverse(g)
        _, via = nk.backward_reach(seeds, rev.ptr, rev.choice, soc, quo.ecs.inside, in_ec)
        out = choice1.copy()
        out[owners] = exit_choice[leaving]
        nav = members[~seeds[members]]
        out[nav] = via[nav]
        # staying: any internal choice
        firsts = np.full(p1.n_states, -1, np.int64)
        inside = np.flatnonzero(quo.ecs.inside)
        firsts[soc[inside[::-1]]] = inside[::-1]
        stay = members[(out[members] < 0)]
        out[stay] = firsts[stay]
        return out


def _all_in(q: Problem, inside: np.ndarray) -> np.ndarray:
    from mopmc.engine import numba_kernels as nk

    return nk.all_successors_in(q.indptr, q.targets, inside, q.n_choices)


def _global(r, choices_of_good: np.ndarray, source: Problem) -> np.ndarray:
    """Choices of the ``source`` problem (one per kept state, in order) as choices of the restriction."""
    if r.problem is source:  # kept everything: the same numbering
        return choices_of_good
    new_of_old = np.full(len(r.choice_origin) and int(r.choice_origin.max()) + 1, -1, np.int64)
    new_of_old[r.choice_origin] = np.arange(len(r.choice_origin))
    return new_of_old[choices_of_good]


def _self_only(p: Problem) -> np.ndarray:
    """Choices whose every transition returns to their own state (and that cannot exit)."""
    from mopmc.engine import numba_kernels as nk

    return nk.self_only(p.row_groups, p.indptr, p.targets, p.exits)

#: at most this fraction of choices with a reward for the weighted rewards to take the paying rows alone
SPARSE_PAY = 0.25


def _paying_rows(rewards: np.ndarray):
    """``(paying, pays)`` for the weighted rewards and the forward pass over visits.

    Where at most :data:`SPARSE_PAY` of the choices have a reward in some objective (Model B: 90 of
    29,900 with 90 objectives, one target reward each; Model C: 13%), ``paying`` is ``(rows, their
    reward rows)`` and ``pays`` a bool per choice: a direction's weighted rewards are a product over
    those rows (on Model B with 90 objectives the product over every row, zeros included, was 1.7 ms
    of each 4 ms oracle call) and the visits collect rewards only there. Otherwise ``(None, pays)``
    with ``pays`` empty (every choice counts). A strided sample of 1024 rows settles dense reward
    matrices (Model A: 70% of the rows pay) without a pass over all rows."""
    from mopmc.engine import numba_kernels as nk

    n = rewards.shape[0]
    every = np.zeros(0, bool)
    if n == 0:
        return None, every
    sample = nk.nonzero_rows(np.ascontiguousarray(rewards[:: max(1, n // 1024)]))
    if sample.mean() > 2 * SPARSE_PAY:
        return None, every
    pays = nk.nonzero_rows(rewards)
    rows = np.flatnonzero(pays)
    if len(rows) > SPARSE_PAY * n:
        return None, every
    return (rows, np.ascontiguousarray(rewards[rows])), pays
