"""Objectives to total rewards: reachable states, and a goal-memory product for reachability objectives.

Each objective becomes a reward per product choice whose expected total is ``u_i``, oriented so that
it is maximised (rewards of ``min`` objectives are negated). The value in original units is
``v_i = offset_i + direction_i * u_i`` (``direction`` = +1 for max, -1 for min; ``offset`` = 1 for
``G phi`` = 1 - P[F !phi]).

Memory, as Storm's multi-objective preprocessor: one bit per distinct *decision set* of the
reachability-like objectives (``P[F psi]``: psi; ``P[phi U psi]``: psi or !phi; ``R[F phi]`` inside
``multi``: phi). A product state ``(s, b)`` carries the bits decided strictly before ``s``; its
successors get ``b | decided(s)``. ``P[...]`` collects 1 at ``(s, b)`` when ``s`` is a target and its
bit is unset; ``R[F phi]`` collects the choice reward while its bit is unset and ``s`` is not in phi.
When every objective is of this kind, product states with all bits set are dropped (nothing is left
to collect): with a single objective this is exactly "make the targets absorbing", and it is never
done while another objective still needs the run.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from mopmc.engine.problem import Problem
from mopmc.errors import UnsupportedModelError
from mopmc.model.sparse_mdp import SparseMDP, known_reachable
from mopmc.model.unfold import require_unbounded
from mopmc.properties.objectives import Objective

_MAX_PRODUCT_TABLE = 1 << 28


class ProductMap(NamedTuple):
    """How product states and choices relate to the model: ``state[p]``, ``memory[p]`` (bits),
    ``choice[c]`` (model choice of product choice ``c``); ``decided[j]`` is the state mask that sets
    bit ``j``; ``bit_of[i]`` is objective ``i``'s bit or -1."""

    state: np.ndarray
    memory: np.ndarray
    choice: np.ndarray
    decided: np.ndarray  # (n_bits, n_states) bool
    bit_of: tuple[int, ...]
    identity: bool  # product states are the model's states, in order


class Orientation(NamedTuple):
    """``v_i = offset[i] + direction[i] * u_i``; ``direction`` is also the preferred sign."""

    direction: np.ndarray
    offset: np.ndarray


def orientation(objectives: Sequence[Objective]) -> Orientation:
    d = np.array([1.0 if o.sense == "max" else -1.0 for o in objectives])
    off = np.array([1.0 if (o.kind == "probability" and o.negated) else 0.0 for o in objectives])
    return Orientation(d, off)


def decision_set(model: SparseMDP, o: Objective) -> np.ndarray | None:
    """The states that decide a reachability objective (``None`` for total rewards): its target,
    and for ``P[phi U psi]`` also the states where ``phi`` fails."""
    if o.kind == "total_reward":
        return None
    mask = o.target_mask(model)
    if o.kind == "probability" and o.left_text is not None:
        mask = mask | ~o.hold_mask(model)
    return mask


def bit_for(masks: list[np.ndarray], mask: np.ndarray) -> int:
    """The memory bit of ``mask``: an equal set already in ``masks`` shares its bit, else it is appended."""
    for j, other in enumerate(masks):
        if np.array_equal(other, mask):
            return j
    masks.append(mask)
    return len(masks) - 1


def _decision_sets(model: SparseMDP, objectives: Sequence[Objective]):
    masks: list[np.ndarray] = []
    bit_of: list[int] = []
    for o in objectives:
        mask = decision_set(model, o)
        bit_of.append(-1 if mask is None else bit_for(masks, mask))
    decided = np.array(masks, dtype=bool).reshape(len(masks), model.n_states)
    return decided, tuple(bit_of)


def apply(
    model: SparseMDP,
    objectives: Sequence[Objective],
    choice_mask: np.ndarray | None = None,
) -> tuple[Problem, ProductMap, Orientation]:
    """Build the reachable product with one memory bit per decision set; see the module docstring."""
    from mopmc.engine import numba_kernels as nk

    n = model.n_states
    require_unbounded(objectives)
    decided, bit_of = _decision_sets(model, objectives)
    k = decided.shape[0]
    if n * (1 << k) > _MAX_PRODUCT_TABLE:
        raise UnsupportedModelError(
            f"{model.source}: the goal-memory product needs {k} memory bits over {n} states "
            f"({n * (1 << k)} product states at most), more than this engine indexes; "
            "use fewer reachability objectives with distinct targets"
        )
    dbits = np.zeros(n, np.int64)
    for j in range(k):
        dbits |= decided[j].astype(np.int64) << j
    ok = np.ones(model.n_choices, bool) if choice_mask is None else np.asarray(choice_mask, bool)
    drop_full = k > 0 and all(b >= 0 for b in bit_of)
    full = (1 << k) - 1
    # the identity product of a model known reachable (Storm built it): nothing to search
    known = k == 0 and choice_mask is None and known_reachable(model)
    if not known:
        index = np.zeros(n << k, np.int64)  # product state + 1; untouched pages cost nothing
        st, mem = nk.product_bfs(model.row_groups, model.indptr, model.targets, ok, n, dbits, model.initial,
                                 drop_full, full, index)
    identity = known or (k == 0 and len(st) == n and choice_mask is None)
    if identity:
        st = np.arange(n, dtype=np.int64)
        mem = np.zeros(n, np.int64)
        pc = np.arange(model.n_choices, dtype=np.int64)
        rg = model.row_groups
        ip, tg, pr = model.indptr, model.targets, model.probs
        exits = np.zeros(model.n_choices, bool)
        mass = np.zeros(model.n_choices)
        init = model.initial
    else:
        if k == 0:  # keep the model's state order: nicer schedulers, better locality
            order = np.sort(st)
            st, mem = order, np.zeros(len(order), np.int64)
            index = np.zeros(n, np.int64)
            index[st] = np.arange(1, len(st) + 1, dtype=np.int64)
        rg, pc, ip, tg, pr, exits, mass = nk.product_arrays(model.row_groups, model.indptr, model.targets, model.probs, ok,
                                                      n, dbits, st, mem, index, drop_full, full)
        init = 0 if k else int(index[model.initial]) - 1
    ori = orientation(objectives)
    R = np.empty((len(pc), len(objectives)), np.float64)
    if identity:  # total rewards only: the model's reward vectors
        for i, o in enumerate(objectives):
            np.multiply(model.reward(o.reward_model), ori.direction[i], out=R[:, i])
    else:  # every column in one compiled pass over R's rows (see product_columns)
        kind = np.array([{"total_reward": 0, "probability": 1}.get(o.kind, 2) for o in objectives], np.int64)
        rewards = [model.reward(o.reward_model) for o, k in zip(objectives, kind) if k != 1]
        targets = [o.target_mask(model) for o, k in zip(objectives, kind) if k != 0]
        reward_row = np.cumsum(kind != 1) - 1
        target_row = np.cumsum(kind != 0) - 1
        nk.product_columns(
            R, rg, st, mem, kind, np.array([max(b, 0) for b in bit_of], np.int64), target_row, reward_row,
            np.array([-1.0 if k == 1 and o.negated else 1.0 for o, k in zip(objectives, kind)]),
            np.ascontiguousarray(ori.direction, np.float64),
            np.array(targets, np.bool_).reshape(len(targets), n),
            np.array(rewards, np.float64).reshape(len(rewards), model.n_choices), pc)
    problem = Problem(rg, ip, tg, pr, R, exits, int(init), mass)
    return problem, ProductMap(st, mem, pc, decided, bit_of, identity), ori
