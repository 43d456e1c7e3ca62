"""The weighted-optimisation kernel: prepare once, then ``optimise(w)`` for many directions.

Convention. Objective ``i`` has a preferred direction ``direction[i]`` (+1 for ``max``, -1 for
``min``). A direction ``w`` lives in the *preferred* space: :meth:`Engine.optimise` finds a
deterministic scheduler maximising ``sum_i w_i * direction_i * value_i`` over all schedulers under
which every objective is finite, so ``w >= 0`` asks for "better in every objective". ``values`` are
returned in original units, sign and objective order; ``point = direction * values``.

Preprocessing (:class:`Engine`), each step keeping the map back to the model:

1. :mod:`~mopmc.engine.reductions.goal_memory`: reachable product with goal memory; objectives
   become rewards ``u_i`` to maximise.
2. :func:`~mopmc.engine.reductions.graph.drop_worthless`: states that can collect nothing.
3. Infinite rewards, as Storm: an objective whose preferred-direction reward lies in a reachable end
   component is infinite: :class:`~mopmc.errors.InfiniteValueError`.
4. :func:`~mopmc.engine.reductions.end_components.collapse` of end components where no objective
   collects reward (with a "stay" choice, value 0, unless ``allow_stay=False``).
5. Keep the states from which the terminal is reached almost surely under some scheduler (others
   collect infinite reward in the non-preferred direction under every scheduler: dominated); if
   the initial state is not among them, no scheduler is finite: error.
6. :mod:`~mopmc.engine.scc` plan; acyclic parts in one compiled pass, cyclic SCCs by
   :mod:`~mopmc.engine.policy_iteration` (exact sparse LU).

Example:
    >>> eng = Engine(model, objectives)                      # doctest: +SKIP
    >>> r = eng.optimise([1.0, 0.5]); r.values, r.scheduler  # doctest: +SKIP
    >>> r2 = eng.optimise([0.9, 0.6], warm=r)                # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from mopmc.engine.policy_iteration import CyclicBlock
from mopmc.engine.problem import Problem, permute, restrict
from mopmc.engine.reductions import end_components as ec
from mopmc.engine.reductions import goal_memory, graph
from mopmc.engine.scc import Plan, plan
from mopmc.engine.scheduler import Scheduler
from mopmc.errors import InfiniteValueError
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective


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
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def scheduler(self) -> Scheduler:
        """The optimal deterministic scheduler, on the model (with goal memory where needed)."""
        if "s" not in self._cache:
            self._cache["s"] = self.engine.scheduler(self.policy)
        return self._cache["s"]


class Engine:
    """Preprocessed weighted optimisation for ``objectives`` on ``model``; see the module docstring.

    Args:
        model: the MDP.
        objectives: total rewards, reachability probabilities, or rewards until a target (inside
            ``multi``: collected until the target, forever on paths that never reach it).
        allow_stay: whether a scheduler may stay forever in a zero-reward end component (False for
            Storm's single-objective ``R[F phi]``, which only counts schedulers reaching phi).
        choice_mask: restrict schedulers to these model choices.
    """

    def __init__(
        self,
        model: SparseMDP,
        objectives: Sequence[Objective],
        *,
        allow_stay: bool = True,
        choice_mask: np.ndarray | None = None,
    ):
        t0 = time.perf_counter()
        self.model = model
        self.objectives = tuple(objectives)
        self.m = len(self.objectives)
        p0, self.pmap, self.orientation = goal_memory.apply(model, self.objectives, choice_mask)
        self.product = p0
        self.worthless = graph.drop_worthless(p0)
        p1 = self.worthless.problem
        self.timings = {"product": time.perf_counter() - t0}
        self.trivial = p1.initial < 0
        if self.trivial:
            self.timings["total"] = time.perf_counter() - t0
            return
        self._check_finite(p1)
        self.quotient = ec.collapse(p1, self.zero_ecs, stay=allow_stay)
        q = self.quotient.problem
        g = graph.Csr(q.row_groups, q.indptr, q.targets)
        good, proper = graph.almost_sure_max(g, np.zeros(q.n_states, bool), q.exits)
        if not good[q.initial]:
            err = InfiniteValueError(
                f"{model.source}: every scheduler collects infinite reward against the preferred direction "
                f"of some objective ({self._names()}): no scheduler keeps all objectives finite"
            )
            err.against = True  # infinite in the non-preferred direction (e.g. +inf for a min objective)
            raise err
        valid = good[q.state_of_choice()] & _all_in(q, good)
        self.good = restrict(q, good, valid)
        proper = _global(self.good, proper[good])
        # renumber states in processing order: the compiled pass then reads memory almost sequentially
        first = plan(self.good.problem)
        order = np.concatenate([s for _, s in first.steps])
        self.perm = permute(self.good.problem, order)
        p = self.problem = self.perm.problem
        self.proper = _global(self.perm, proper[order])
        sm = self.perm.state_map
        self.plan = Plan(first.label[order], first.level[order], tuple((k, sm[s]) for k, s in first.steps), first.n_cyclic)
        self.matrix = p.matrix()
        self.self_only = _self_only(p)
        self.blocks = [CyclicBlock(p, s, self.matrix) if kind == "cycles" else None for kind, s in self.plan.steps]
        self.timings["total"] = time.perf_counter() - t0

    # ------------------------------------------------------------------ preprocessing helpers
    def _names(self) -> str:
        return ", ".join(o.text for o in self.objectives)

    def _check_finite(self, p1: Problem) -> None:
        from scipy.sparse.csgraph import connected_components

        _, label = connected_components(p1.state_graph(), directed=True, connection="strong")
        cand = ec.cyclic_candidates(p1, label)
        every = ec.maximal_end_components(p1, np.ones(p1.n_choices, bool), cand)
        positive = (p1.rewards[every.inside] > 0).any(axis=0) if every.inside.any() else np.zeros(self.m, bool)
        if positive.any():
            bad = [self.objectives[i] for i in np.flatnonzero(positive)]
            what = "; ".join(
                f"{o.text} is infinite ({'positive' if o.sense == 'max' else 'negative'} reward in a reachable end component under {o.sense})"
                for o in bad
            )
            raise InfiniteValueError(f"{self.model.source}: {what}")
        zero = ~np.any(p1.rewards != 0.0, axis=1)
        self.zero_ecs = ec.maximal_end_components(p1, zero, every.component >= 0)

    # ------------------------------------------------------------------ the kernel
    def optimise(self, w: Sequence[float], warm: KernelResult | None = None) -> KernelResult:
        """Maximise ``w . point`` (preferred space); ``warm``: a previous result to start from."""
        from mopmc.engine import numba_kernels as nk

        t0 = time.perf_counter()
        w = np.asarray(w, np.float64).reshape(self.m)
        ori = self.orientation
        if self.trivial:
            return self._result(w, np.zeros(self.m), np.zeros(0, np.int64), t0)
        p = self.problem
        rho = p.rewards @ w
        V = np.zeros(p.n_states)
        X = np.zeros((p.n_states, self.m))
        choice = np.full(p.n_states, -1, np.int64)
        start = warm.policy if warm is not None and warm.engine is self and len(warm.policy) else self.proper
        check = bool((w < 0).any())
        for (kind, states), block in zip(self.plan.steps, self.blocks):
            if kind == "pass":
                at = nk.bellman_pass(states, p.row_groups, p.indptr, p.targets, p.probs, self.self_only, rho, p.rewards, V, X, choice)
                if at >= 0:
                    raise InfiniteValueError(
                        "the weighted optimum is infinite: this direction rewards staying forever in an end component"
                    )
            else:
                chosen, _ = block.solve(rho, p.rewards, V, X, start[states], check)
                choice[states] = chosen
        return self._result(w, X[p.initial], choice, t0)

    def _result(self, w, u, policy, t0) -> KernelResult:
        ori = self.orientation
        values = ori.offset + ori.direction * u
        point = ori.direction * values
        return KernelResult(w, values, point, float(w @ point), 0.0, policy, time.perf_counter() - t0, self)

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
        return Scheduler(pmap.state, pmap.memory, pmap.choice[choice0], pmap.decided, self.model.n_states)

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


def _global(r, choices_of_good: np.ndarray) -> np.ndarray:
    """Choices of the source problem (one per kept state, in order) as choices of the restriction."""
    new_of_old = np.full(len(r.choice_origin) and int(r.choice_origin.max()) + 1, -1, np.int64)
    new_of_old[r.choice_origin] = np.arange(len(r.choice_origin))
    return new_of_old[choices_of_good]


def _self_only(p: Problem) -> np.ndarray:
    """Choices whose every transition returns to their own state (and that cannot exit)."""
    soc = p.state_of_choice()
    cot = p.choice_of_transition()
    away = np.bincount(cot[soc[cot] != p.targets], minlength=p.n_choices)
    return (away == 0) & ~p.exits
