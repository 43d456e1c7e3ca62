"""Conversion of a composed network to a :class:`~mopmc.model.SparseMDP` (paper Sec. 3.3).

Breadth-first exploration of the reachable discrete states, level by level with numpy: every level
gathers the options of all frontier states from the components' local tables
(:mod:`mopmc.design.local`), composes named actions across the components that share them, and
looks successor codes up in a dense index (one entry per valuation of the bounded variables).

Semantics (as PRISM composes modules, and as the paper's reference model does):

* each component's tau choices (plain tau edges; a branching's one probabilistic step) interleave;
* a named action is one choice per combination of enabled edges of all components that have the
  action in their alphabet; it is blocked if one of them has none enabled;
* a state without any choice (the end of the episode) gets a tau self-loop, as Storm and PRISM do.

Rewards: each :class:`~mopmc.design.automaton.RewardItem` adds its value to the choices with its
action whose source state satisfies its condition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mopmc.design.automaton import TAU, Network
from mopmc.design.local import Layout, LocalTable, build_local_table, layout_of
from mopmc.errors import InvalidModelError
from mopmc.model import SparseMDP, StateValuations

DENSE_INDEX_LIMIT = 1 << 28


@dataclass(frozen=True)
class Conversion:
    """The MDP with what export needs: the layout, the local tables, the codes of the states."""

    model: SparseMDP
    network: Network
    layout: Layout
    tables: tuple[LocalTable, ...]
    codes: np.ndarray

    def local_indices(self, ci: int) -> np.ndarray:
        """Index into component ``ci``'s local table for every state."""
        return _local(self.tables[ci], self.layout, self.codes)


def _values(layout: Layout, codes: np.ndarray) -> np.ndarray:
    return (codes[:, None] // layout.strides[None, :]) % layout.radix[None, :]


def _local(table: LocalTable, layout: Layout, codes: np.ndarray, vals: np.ndarray | None = None) -> np.ndarray:
    if vals is None:
        vals = _values(layout, codes)
    return vals[:, table.reads] @ table.dstrides


def _expand(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``repeat(arange(len), counts)`` and the table positions ``starts[row] + k``."""
    if len(counts) and counts.max() <= 1:  # the common case: at most one option per row
        rows = np.flatnonzero(counts)
        return rows, starts[rows]
    rows = np.repeat(np.arange(len(counts)), counts)
    offs = np.cumsum(counts) - counts
    pos = np.repeat(starts - offs, counts) + np.arange(int(counts.sum()))
    return rows, pos


class _Index:
    """Code -> state index: a dense array when the code space is small enough, else a dict."""

    def __init__(self, size: int):
        self.dense = np.full(size, -1, dtype=np.int64) if size <= DENSE_INDEX_LIMIT else None
        self.table: dict[int, int] = {}

    def get(self, codes: np.ndarray) -> np.ndarray:
        if self.dense is not None:
            return self.dense[codes]
        return np.fromiter((self.table.get(int(c), -1) for c in codes), dtype=np.int64, count=len(codes))

    def put(self, codes: np.ndarray, start: int) -> None:
        if self.dense is not None:
            self.dense[codes] = np.arange(start, start + len(codes))
        else:
            self.table.update(zip(codes.tolist(), range(start, start + len(codes))))


def convert(network: Network, provider=None, *, source: str | None = None) -> Conversion:
    """Convert ``network`` to an MDP; ``provider`` answers Pr(guard | state) for branchings.

    Raises :class:`~mopmc.errors.InvalidModelError` naming the first reachable state that violates
    the paper's assumption or lacks probabilities.
    """
    if provider is not None and hasattr(provider, "resolved"):
        provider = provider.resolved(network)
    layout = layout_of(network)
    tables = tuple(build_local_table(network, ci, layout, provider) for ci in range(len(network.components)))
    actions = (TAU, *network.actions)
    participants = {a: [t for t in tables if a in t.component.alphabet] for a in network.actions}

    init_vals = []
    for c in network.components:
        init_vals.append(c.locations.index(c.initial))
        init_vals.extend(int(v.init) - int(v.low) for v in c.variables)
    init_code = int(np.dot(np.array(init_vals, dtype=np.int64), layout.strides))
    index = _Index(layout.size)
    index.put(np.array([init_code]), 0)
    all_codes = [np.array([init_code], dtype=np.int64)]
    frontier = all_codes[0]
    n_states = 1
    ch_act, tr_dst, tr_prob, ch_ntr, ch_src = [], [], [], [], []
    first = 0
    while len(frontier):
        vals = _values(layout, frontier)
        blocks = []  # (src rows, action id, per-choice transition counts, dst codes, probs)
        local = {id(t): _local(t, layout, frontier, vals) for t in tables}
        for t in tables:
            d = local[id(t)]
            err = t.error[d]
            if err.any():
                k = int(np.flatnonzero(err)[0])
                where, text = t.messages[err[k] - 1]  # where: the place in the spec file (None: a design without one)
                raise InvalidModelError(f"{where or network.name}: state {_describe(layout, frontier[k])}: {text}")
            start, cnt = t.tau_ptr[d], t.tau_ptr[d + 1] - t.tau_ptr[d]
            if cnt.any():
                rows, pos = _expand(start, cnt)
                key = rows * (len(t.component.edges) * 2 + 2) + t.tau_choice[pos]
                new_choice = np.ones(len(key), dtype=bool)
                new_choice[1:] = key[1:] != key[:-1]
                cid = np.cumsum(new_choice) - 1
                blocks.append((rows[new_choice], 0, np.bincount(cid), frontier[rows] + t.tau_delta[pos], t.tau_prob[pos]))
        for ai, a in enumerate(network.actions, start=1):
            parts = participants[a]
            rows = np.arange(len(frontier))
            delta = np.zeros(len(frontier), dtype=np.int64)
            for t in parts:
                if a not in t.named:
                    rows = rows[:0]
                    break
                ptr, dl = t.named[a]
                d = local[id(t)][rows]
                start, cnt = ptr[d], ptr[d + 1] - ptr[d]
                sel, pos = _expand(start, cnt)
                rows, delta = rows[sel], delta[sel] + dl[pos]
                if not len(rows):
                    break
            if len(rows):
                blocks.append((rows, ai, np.ones(len(rows), dtype=np.int64), frontier[rows] + delta, np.ones(len(rows))))
        has = np.zeros(len(frontier), dtype=bool)
        for b in blocks:
            has[b[0]] = True
        if not has.all():  # deadlock: tau self-loop
            dead = np.flatnonzero(~has)
            blocks.append((dead, 0, np.ones(len(dead), dtype=np.int64), frontier[dead], np.ones(len(dead))))
        src = np.concatenate([b[0] for b in blocks])
        act = np.concatenate([np.full(len(b[0]), b[1], dtype=np.int64) for b in blocks])
        ntr = np.concatenate([b[2] for b in blocks])
        dst = np.concatenate([b[3] for b in blocks])
        prob = np.concatenate([b[4] for b in blocks])
        order = np.argsort(src, kind="stable")
        tr_choice = np.repeat(np.arange(len(src)), ntr)
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        tr_order = np.argsort(rank[tr_choice], kind="stable")
        dst, prob = dst[tr_order], prob[tr_order]
        idx = index.get(dst)
        new = idx < 0
        if new.any():
            codes, first_pos = np.unique(dst[new], return_index=True)
            codes = codes[np.argsort(first_pos)]
            index.put(codes, n_states)
            n_states += len(codes)
            all_codes.append(codes)
            idx = index.get(dst)
            frontier = codes
        else:
            frontier = frontier[:0]
        ch_src.append(src[order] + first), ch_act.append(act[order]), ch_ntr.append(ntr[order])
        tr_dst.append(idx), tr_prob.append(prob)
        first = n_states - len(frontier)

    codes = np.concatenate(all_codes)
    src = np.concatenate(ch_src)
    ntr = np.concatenate(ch_ntr)
    row_groups = np.zeros(n_states + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n_states), out=row_groups[1:])
    indptr = np.zeros(len(src) + 1, dtype=np.int64)
    np.cumsum(ntr, out=indptr[1:])
    act = np.concatenate(ch_act)
    values = _values(layout, codes) + layout.lows[None, :]
    valuations = StateValuations(tuple(layout.names), tuple(layout.kinds), values)
    rewards = _rewards(network, layout, values, src, act, actions)
    model = SparseMDP(
        row_groups, indptr, np.concatenate(tr_dst), np.concatenate(tr_prob), 0,
        rewards=rewards, labels={"init": np.arange(n_states) == 0}, action_names=actions, actions=act,
        valuations=valuations, source=source or network.name,
    )
    return Conversion(model, network, layout, tables, codes)


def _rewards(network: Network, layout: Layout, values: np.ndarray, src: np.ndarray, act: np.ndarray, actions) -> dict:
    env = {n: values[:, j] for j, n in enumerate(layout.names)}
    out = {}
    for name, items in network.rewards.items():
        r = np.zeros(len(src))
        for item in items:
            holds = np.broadcast_to(np.asarray(network.resolved(item.when, name).eval(env), dtype=bool), (len(values),))
            mask = holds[src]
            if item.action is not None:
                mask = mask & (act == actions.index(item.action))
            r[mask] += float(item.value)
        out[name] = r
    return out


def _describe(layout: Layout, code: int) -> str:
    vals = _values(layout, np.array([code]))[0] + layout.lows
    parts = []
    for n, v in zip(layout.names, vals):
        locs = layout.locations.get(n)
        parts.append(f"{n}={locs[v]}" if locs else f"{n}={v}")
    return "(" + ", ".join(parts) + ")"
