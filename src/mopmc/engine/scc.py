"""SCC decomposition and a processing plan: successors first, cycles batched by level.

States in SCCs of one state (self-loops allowed) are solved in closed form by one compiled backward
pass; states in cyclic SCCs by policy iteration. The condensation DAG is cut into *levels* (height
above the sinks): SCCs of one level do not depend on each other, so all cyclic SCCs of a level form
one block-diagonal problem. The plan alternates compiled passes over runs of acyclic levels with
one policy-iteration block per level that holds cycles.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mopmc.engine.problem import Problem


class Plan(NamedTuple):
    """``steps``: ``("pass", states)`` or ``("cycles", states)``, in processing order; ``order``:
    their states one after the other when known (the steps are then views of it), else None."""

    label: np.ndarray
    level: np.ndarray
    steps: tuple[tuple[str, np.ndarray], ...]
    n_cyclic: int
    order: np.ndarray | None = None


class Sccs(NamedTuple):
    """SCC ``label`` of each state; per SCC its ``height`` in the condensation DAG and whether it
    ``reach``es a seed state (see :func:`state_sccs`)."""

    label: np.ndarray
    height: np.ndarray
    reach: np.ndarray


def state_sccs(p: Problem, seed: np.ndarray | None = None) -> Sccs:
    """The SCCs of ``p``'s state graph (over the CSR: a compiled depth-first search where every
    cycle is a self-loop, else Tarjan; successors' SCCs get smaller labels) and their heights;
    with ``seed`` (bool per state) also ``reach`` per SCC (it holds or reaches a seed state) and
    heights counted over the reaching SCCs only."""
    from mopmc.engine import numba_kernels as nk

    seed = np.ones(p.n_states, bool) if seed is None else np.asarray(seed, bool)
    # most switch models have no cycles but self-loops: a plain depth-first search first (Model A
    # n=200: 0.08 s against Tarjan's 0.15 s); at the first cycle, Tarjan from the start
    acyclic, n_labels, label, height, reach = nk.dag_labels(p.row_groups, p.indptr, p.targets, seed)
    if acyclic:
        return Sccs(label, height[:n_labels], reach[:n_labels])
    _, label, height, reach = nk.scc_labels(p.row_groups, p.indptr, p.targets, seed)
    return Sccs(label, height, reach)


def restrict_sccs(sccs: Sccs, keep_labels: np.ndarray) -> Sccs:
    """The SCCs of the sub-problem of the states whose SCC is in ``keep_labels`` (a bool per label,
    closed under successors: what can reach a seed), renumbered densely in the same order."""
    return split_sccs(sccs, keep_labels)[1]


def split_sccs(sccs: Sccs, keep_labels: np.ndarray) -> tuple[np.ndarray, Sccs]:
    """The states kept (a bool per state) and :func:`restrict_sccs`, in one compiled pass."""
    from mopmc.engine import numba_kernels as nk

    keep_labels = np.ascontiguousarray(keep_labels, np.bool_)
    if keep_labels.all():
        return np.ones(len(sccs.label), bool), sccs
    keep, label = nk.kept_labels(sccs.label, keep_labels)
    return keep, Sccs(label, sccs.height[keep_labels], sccs.reach[keep_labels])


def plan(p: Problem | None, sccs: Sccs | None = None, merge: bool = True) -> Plan:
    """The plan of ``p``; ``sccs``: its SCCs when already computed (then ``p`` is not read);
    ``merge``: with runs of small cyclic SCCs merged (:func:`merge_small_cycles`)."""
    from mopmc.engine import numba_kernels as nk

    label, levels, _ = sccs if sccs is not None else state_sccs(p)
    level, trivial, cyc, t_start, c_start = nk.plan_order(label, levels)
    if len(cyc) == 0:  # no cycles (most switch models): one pass (and two compiled steps fewer to load)
        return Plan(label, level, (("pass", trivial),) if len(trivial) else (), 0, trivial)
    # (compiled: a chain of 200,000 small SCCs is 400,000 steps before they merge)
    order, off, cycles = nk.plan_steps(trivial, cyc, t_start, c_start)
    if merge and np.count_nonzero(cycles) >= 2:  # (with fewer nothing merges)
        first = nk.merge_groups(cycles, np.diff(off), MERGE_SMALL, MERGE_MOST)
        off, cycles = off[first], cycles[first[:-1]]
    steps = tuple(("cycles" if k else "pass", order[a:b]) for k, a, b in zip(cycles.tolist(), off[:-1].tolist(), off[1:].tolist()))
    return Plan(label, level, steps, len(cyc), order)


#: steps of at most this many states are "small"; runs of them merge into blocks of at most MERGE_MOST
MERGE_SMALL = 64
MERGE_MOST = 50_000


def merge_small_cycles(pl: Plan, small: int = MERGE_SMALL, most: int = MERGE_MOST) -> Plan:
    """``pl`` with every run of consecutive small steps (at most ``small`` states each) from its
    first cycles step to its last merged into one cycles step (of at most ``most`` states), when the
    run holds two cycles steps or more. A chain of small SCCs (a retry loop at every step of a
    counter) is one step per SCC, each a block solved on its own with a fixed cost of a few hundred
    microseconds: 20,000 two-state SCCs took 9 s to prepare and 4-5 s a direction. Merged, they are
    one block solved at once (its states' successors outside it come earlier in the order, as for
    any block). Steps stay in order, so contiguous steps stay contiguous. :func:`plan` merges so
    already."""
    from mopmc.engine import numba_kernels as nk

    cycles = np.array([kind == "cycles" for kind, _ in pl.steps], np.bool_)
    sizes = np.array([len(st) for _, st in pl.steps], np.int64)
    first = nk.merge_groups(cycles, sizes, small, most)
    if len(first) == len(pl.steps) + 1:
        return pl
    steps = tuple(pl.steps[a] if b == a + 1 else ("cycles", np.concatenate([st for _, st in pl.steps[a:b]]))
                  for a, b in zip(first[:-1].tolist(), first[1:].tolist()))
    return pl._replace(steps=steps)


def processing_order(pl: Plan) -> np.ndarray:
    """The states of ``pl``'s steps, one after the other."""
    if pl.order is not None:
        return pl.order
    return np.concatenate([s for _, s in pl.steps]) if pl.steps else np.zeros(0, np.int64)


def nearly_sequential(order: np.ndarray) -> bool:
    """Whether visiting states in ``order`` reads memory almost sequentially (fewer than 5% of
    the steps jump by more than 64 states): renumbering in that order would cost a copy of every
    transition and save nothing (Storm's breadth-first numbering read backwards usually is)."""
    if len(order) <= 1:
        return False
    from mopmc.engine import numba_kernels as nk

    _, big = nk.order_steps(np.ascontiguousarray(order, np.int64), 64)
    return big / (len(order) - 1) < 0.05


def in_processing_order(pl: Plan) -> Plan:
    """``pl`` after its states are renumbered in :func:`processing_order`: every step a range."""
    order = processing_order(pl)
    ends = np.cumsum([len(s) for _, s in pl.steps], dtype=np.int64)
    states = np.arange(len(order), dtype=np.int64)
    steps = tuple((k, states[e - len(s):e]) for (k, s), e in zip(pl.steps, ends))
    return Plan(pl.label[order], pl.level[order], steps, pl.n_cyclic, states)
