"""The occupation-measure polytope of an MDP and a list of objectives (the exact LP oracle's model).

Variables ``x(s, a) >= 0`` are the expected number of times choice ``a`` is taken in state ``s``;
``stop(s) >= 0`` is the probability of staying forever in a zero-reward end component from ``s``
(or of ending in a state where nothing more can be collected). Flow conservation per state::

    sum_a x(s, a) + stop(s) - sum_{s', a'} P(s | s', a') x(s', a') = [s == initial]

Every objective is affine in ``x``: ``value_i = offset_i + scale_i * gain_i . x``.

Stop variables sit on the states of the maximal end components of the *zero-reward* choices (zero in
every objective), not only on MECs without reward: a MEC that collects reward on some of its choices
may still contain a zero-reward EC in which a scheduler can stay for free.

Reachability objectives need goal memory: the LP is built on a product of the model with one bit
per reachability objective (``P[...]`` and ``R[F phi]`` inside ``multi``), set when the objective is
*decided* (its target entered; for ``phi U psi`` also when ``phi`` fails). A probability objective
gains 1 on the step that enters its target while its bit is unset; ``R{"r"}[F phi]`` collects ``r``
only while its bit is unset. Bits only grow, so the product is built layer by layer in increasing
bit-mask order. This construction shares nothing with the iterative kernel on purpose: it checks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from mopmc.engine.mec import maximal_end_components
from mopmc.errors import PropertyError, UnsupportedModelError
from mopmc.model.sparse_mdp import SparseMDP, ranges
from mopmc.model.unfold import require_unbounded
from mopmc.properties.objectives import Objective


@dataclass(frozen=True, eq=False)
class OccupationLP:
    """The polytope ``{offset + scale * (gain @ x) : flow @ x = e_initial, x >= 0}``.

    Columns of ``flow`` and ``gain`` are the product choices, then one stop variable per entry of
    ``stop_states``. ``product`` is the product MDP (the model itself when there is no goal memory);
    ``state[p]``/``memory[p]`` are the model state and goal bits of product state ``p``;
    ``choice[j]`` is the model choice behind product choice ``j``.
    """

    objectives: tuple[Objective, ...]
    product: SparseMDP
    state: np.ndarray
    memory: np.ndarray
    choice: np.ndarray
    stop_states: np.ndarray
    flow: csr_matrix
    gain: csr_matrix
    offset: np.ndarray
    scale: np.ndarray

    @property
    def n_states(self) -> int:
        return self.product.n_states

    @property
    def n_choices(self) -> int:
        return self.product.n_choices

    @property
    def n_vars(self) -> int:
        return self.product.n_choices + len(self.stop_states)

    @property
    def has_memory(self) -> bool:
        """True when the product has goal bits (schedulers then need that memory)."""
        return len(np.unique(self.memory)) > 1

    @cached_property
    def end_components(self):
        """The maximal end components of the product over the :attr:`usable` choices, computed once."""
        return maximal_end_components(self.product, self.usable[: self.n_choices])

    @cached_property
    def usable(self) -> np.ndarray:
        """Per variable: whether it can be positive in the occupation measure of a scheduler.

        Without this, ``flow @ x = e_initial`` also admits circulations on end components that no
        finite-valued scheduler can run: unreachable ones, and ones from which the stop variables
        (the only way out of a stochastic model) cannot be reached almost surely. A circulation
        gaining in the direction makes the LP unbounded although every real scheduler is finite.
        Usable choices belong to states reachable from the initial state, from which some scheduler
        stops almost surely, and keep every successor among those states.
        """
        prod = self.product
        n, n_c = prod.n_states, prod.n_choices
        owner = prod.state_of_choice()
        t_choice = prod.choice_of_transition()
        live_t = prod.probs > 0
        stop = np.zeros(n, dtype=bool)
        stop[self.stop_states] = True
        inside = np.ones(n, dtype=bool)
        while True:
            valid = inside[owner].copy()
            valid[t_choice[live_t & ~inside[prod.targets]]] = False
            e = live_t & valid[t_choice]
            seeds = np.flatnonzero(stop & inside)
            rows = np.concatenate((prod.targets[e], np.full(len(seeds), n)))
            cols = np.concatenate((owner[t_choice[e]], seeds))
            graph = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n + 1, n + 1))
            order = breadth_first_order(graph, n, directed=True, return_predecessors=False)
            new = np.zeros(n, dtype=bool)
            new[order[order != n]] = True
            if np.array_equal(new, inside):
                break
            inside = new
        live = np.zeros(n, dtype=bool)
        if inside[prod.initial]:
            e = live_t & valid[t_choice]
            fwd = csr_matrix((np.ones(int(e.sum()), dtype=np.int8), (owner[t_choice[e]], prod.targets[e])), shape=(n, n))
            live[breadth_first_order(fwd, prod.initial, directed=True, return_predecessors=False)] = True
        out = np.zeros(self.n_vars, dtype=bool)
        out[:n_c] = valid & live[owner]
        out[n_c:] = live[self.stop_states]
        return out

    def bounds(self) -> np.ndarray:
        """``(lower, upper)`` per variable for ``scipy.optimize.linprog``: 0 on unusable variables."""
        return np.column_stack((np.zeros(self.n_vars), np.where(self.usable, np.inf, 0.0)))

    def rhs(self) -> np.ndarray:
        """The right-hand side of the flow constraints: 1 at the initial product state."""
        b = np.zeros(self.n_states)
        b[self.product.initial] = 1.0
        return b

    def values(self, x: np.ndarray) -> np.ndarray:
        """The objective vector (original units) of an occupation vector ``x``."""
        return self.offset + self.scale * (self.gain @ np.asarray(x, dtype=float))


@dataclass(frozen=True)
class _Track:
    gain: np.ndarray  # per model choice
    decided: np.ndarray | None  # model states that decide the objective on entry; None = no bit
    offset: float
    scale: float


def _track(obj: Objective, model: SparseMDP, hit_cache: dict) -> _Track:
    if obj.kind == "total_reward":
        return _Track(model.reward(obj.reward_model), None, 0.0, 1.0)
    if obj.kind == "reach_reward":
        return _Track(model.reward(obj.reward_model), obj.target_mask(model), 0.0, 1.0)
    if obj.kind == "probability":
        psi = obj.target_mask(model)
        phi = obj.hold_mask(model)
        key = obj.right_text
        if key not in hit_cache:
            per_t = model.probs * psi[model.targets]
            hit_cache[key] = np.bincount(model.choice_of_transition(), weights=per_t, minlength=model.n_choices)
        start = float(psi[model.initial])
        if obj.negated:
            return _Track(hit_cache[key], psi | ~phi, 1.0 - start, -1.0)
        return _Track(hit_cache[key], psi | ~phi, start, 1.0)
    raise PropertyError(f"objective {obj.text}: kind {obj.kind!r} is not supported by the LP engine")


def _layer(model: SparseMDP, seeds: np.ndarray, inside: np.ndarray, t_src: np.ndarray) -> np.ndarray:
    """States reachable from ``seeds`` along transitions marked ``inside`` (sorted)."""
    n = model.n_states
    rows = np.concatenate((t_src[inside], np.full(len(seeds), n)))
    cols = np.concatenate((model.targets[inside], seeds))
    graph = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n + 1, n + 1))
    order = breadth_first_order(graph, n, directed=True, return_predecessors=False)
    return np.sort(order[order != n])


SMALLEST = 1e-9
"""HiGHS reads a constraint coefficient below this as 0 (its ``small_matrix_value``)."""


def _check_scale(model: SparseMDP, source: np.ndarray, targets: np.ndarray, probs: np.ndarray) -> None:
    """Refuse, in one line, a program whose flow constraints have a coefficient that HiGHS would
    read as 0: a probability below :data:`SMALLEST` of moving to another state (``source`` and
    ``targets``: each transition's state and successor). Its answer would be wrong, not merely
    imprecise (a state left with probability 1e-12 a step: 0 for a probability of 1, and infinity
    for an expected reward of 1e12). ``1 - p`` of a self-loop is that small only where its choice
    moves elsewhere with a probability that small, or nowhere (a loop of ``1 - 1e-16``: the rounding
    of a closed loop, which HiGHS reads as the closed loop it is)."""
    small = probs[(targets != source) & (probs > 0) & (probs < SMALLEST)]
    if len(small):
        raise UnsupportedModelError(
            f"{model.source}: the occupation LP has a coefficient of {float(small.min()):.3g} (a transition probability), "
            f"below the {SMALLEST:g} under which HiGHS reads one as 0: its answer would be wrong; the kernel engine "
            "(--engine kernel) answers this model")


def occupation_polytope(
    model: SparseMDP,
    objectives: Sequence[Objective],
    *,
    ec_stops: bool = True,
) -> OccupationLP:
    """Build the occupation-measure polytope of ``objectives`` on ``model``.

    Args:
        model: the MDP.
        objectives: the objectives, in order; their ``sense`` is not used here.
        ec_stops: give a stop variable to every state of a zero-reward end component (of the
            product, zero in all objectives), so that staying there forever is representable. With
            ``False`` only fully decided product states can stop: every represented scheduler
            then decides all reachability objectives almost surely (used for Storm's single
            ``R[F phi]`` semantics).

    Example:
        >>> from mopmc.properties.objectives import Objective
        >>> m = SparseMDP.from_arrays([0, 2, 3], [0, 1, 2, 3], [0, 1, 1], [1.0, 1.0, 1.0],
        ...                           rewards={"r": [0.0, 2.0, 0.0]})
        >>> lp = occupation_polytope(m, [Objective(0, "R[C]", "total_reward", "max", "r")])
        >>> lp.n_vars, lp.stop_states.tolist()
        (5, [0, 1])
    """
    objectives = tuple(objectives)
    require_unbounded(objectives)
    hit_cache: dict = {}
    tracks = [_track(o, model, hit_cache) for o in objectives]
    bit_of = {}
    for i, t in enumerate(tracks):
        if t.decided is not None:
            bit_of[i] = len(bit_of)
    k = len(bit_of)
    if k > 20:
        raise PropertyError(f"{k} reachability objectives need 2^{k} goal-memory layers; at most 20 are supported")
    n = model.n_states
    decided = np.zeros(n, dtype=np.int64)
    for i, j in bit_of.items():
        decided |= tracks[i].decided.astype(np.int64) << j
    full = (1 << k) - 1
    has_total = any(t.decided is None for t in tracks)
    t_choice = model.choice_of_transition()
    t_src = model.state_of_choice()[t_choice]

    seeds: dict[int, np.ndarray] = {int(decided[model.initial]): np.array([model.initial])}
    layers: dict[int, np.ndarray] = {}
    for b in range(full + 1):
        if b not in seeds:
            continue
        start = np.unique(seeds.pop(b))
        if b == full and not has_total:
            layers[b] = start  # all decided and nothing else to collect: terminal states
            continue
        stays = (decided[model.targets] | b) == b
        states = _layer(model, start, stays, t_src)
        layers[b] = states
        in_layer = np.zeros(n, dtype=bool)
        in_layer[states] = True
        out = in_layer[t_src] & ~stays
        for nb in np.unique(decided[model.targets[out]] | b):
            hit = out & ((decided[model.targets] | b) == nb)
            prev = seeds.get(int(nb))
            new = model.targets[hit]
            seeds[int(nb)] = new if prev is None else np.concatenate((prev, new))

    masks = sorted(layers)
    state = np.concatenate([layers[b] for b in masks])
    memory = np.concatenate([np.full(len(layers[b]), b, dtype=np.int64) for b in masks])
    index = {}
    base = 0
    for b in masks:
        idx = np.full(n, -1, dtype=np.int64)
        idx[layers[b]] = np.arange(base, base + len(layers[b]))
        index[b] = idx
        base += len(layers[b])
    terminal = (memory == full) & (not has_total)
    lo = np.where(terminal, 0, model.row_groups[state])
    hi = np.where(terminal, 0, model.row_groups[state + 1])
    choice = ranges(lo, hi)
    row_groups = np.concatenate(([0], np.cumsum(hi - lo)))
    owner = np.repeat(np.arange(len(state)), hi - lo)
    trans = ranges(model.indptr[choice], model.indptr[choice + 1])
    indptr = np.concatenate(([0], np.cumsum(model.indptr[choice + 1] - model.indptr[choice])))
    t_owner = np.repeat(owner, np.diff(indptr))
    succ = model.targets[trans]
    succ_mask = memory[t_owner] | decided[succ]
    p_targets = np.empty(len(trans), dtype=np.int64)
    for b in np.unique(succ_mask):
        sel = succ_mask == b
        p_targets[sel] = index[int(b)][succ[sel]]
    product = SparseMDP.from_arrays(
        row_groups, indptr, p_targets, model.probs[trans], initial=int(index[masks[0]][model.initial]),
        source=f"goal-memory product of {model.source}",
    )

    m = len(objectives)
    n_c = len(choice)
    gains = np.zeros((m, n_c))
    for i, t in enumerate(tracks):
        g = t.gain[choice]
        if i in bit_of:
            g = np.where((memory[owner] >> bit_of[i]) & 1, 0.0, g)
        gains[i] = g
    stop = terminal.copy()
    if ec_stops:
        zero = ~np.any(gains != 0, axis=0) if m else np.ones(n_c, dtype=bool)
        stop |= maximal_end_components(product, zero).component >= 0
    stop_states = np.flatnonzero(stop)
    n_s = len(stop_states)

    out_part = coo_matrix((np.ones(n_c), (owner, np.arange(n_c))), shape=(len(state), n_c))
    in_part = coo_matrix((product.probs, (p_targets, np.repeat(np.arange(n_c), np.diff(indptr)))), shape=(len(state), n_c))
    stop_part = coo_matrix((np.ones(n_s), (stop_states, np.arange(n_s))), shape=(len(state), n_s))
    from scipy.sparse import hstack

    _check_scale(model, t_owner, p_targets, product.probs)
    flow = hstack([out_part - in_part, stop_part], format="csr")
    gain = hstack([csr_matrix(gains), csr_matrix((m, n_s))], format="csr")
    return OccupationLP(
        objectives, product, state, memory, choice, stop_states, flow, gain,
        np.array([t.offset for t in tracks]), np.array([t.scale for t in tracks]),
    )
