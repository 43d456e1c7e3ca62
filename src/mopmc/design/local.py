"""Local semantics of one component, tabulated over the variables it reads (paper Sec. 3.3).

For a component ``c`` we enumerate every valuation ``d`` of the variables it reads (its location,
its own variables, the variables in its guards, updates and probability conditions) and decide, with
numpy over all ``d`` at once:

* which edges are enabled (data guard true);
* the paper's assumption: the enabled edges are all equivalent (choice; one edge: deterministic) or
  pairwise exclusive (branching); anything else is recorded as an error, raised only if a reachable
  state hits it;
* the local options per action: a branching becomes one tau choice whose outcomes go to one fresh
  location per named-action edge (which then takes that action) or, for a tau edge, straight to its
  target (a fresh state with one tau step of probability 1 is merged into its target);
* each option's effect as a *delta* of the global state code (own variables only change).

The exploration (:mod:`mopmc.design.explore`) then only gathers rows of these tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mopmc.design.automaton import Network, TimedAutomaton
from mopmc.design.expressions import Expr
from mopmc.design.guards import Guard

MAX_LOCAL_TABLE = 50_000_000


@dataclass
class Layout:
    """The global state code: variables in component order (location first), mixed radix."""

    names: list[str]
    lows: np.ndarray
    radix: np.ndarray
    strides: np.ndarray
    kinds: list[str]
    owner: list[int]
    locations: dict[str, tuple[str, ...]]  # location variable -> location names (incl. fresh)

    @property
    def size(self) -> int:
        return int(np.prod(self.radix.astype(object)))

    def position(self, name: str) -> int:
        return self.names.index(name)


@dataclass
class LocalTable:
    """Tabulated options of one component over its read domain ``D``."""

    component: TimedAutomaton
    reads: list[int]  # global variable positions read
    dstrides: np.ndarray
    error: np.ndarray  # int32 per d: 0 ok, else 1 + index into messages
    messages: list[tuple[str | None, str]]  # (where the fix belongs in the spec file or None, the problem)
    tau_ptr: np.ndarray
    tau_delta: np.ndarray
    tau_prob: np.ndarray
    tau_choice: np.ndarray  # local choice number within d (outcomes of a branching share one)
    named: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # action -> (ptr, delta)
    branch_sig: np.ndarray | None = None  # per d: index into signatures, -1 when not branching
    signatures: list[tuple] = field(default_factory=list)  # (edge indices, condition per outcome or None, probabilities)
    fresh: dict[int, int] = field(default_factory=dict)  # edge index -> fresh location index


def fresh_locations(c: TimedAutomaton) -> tuple[dict[int, int], list[str]]:
    """Fresh locations of named-action edges that can branch; edges with the same continuation share one."""
    ext: dict[int, int] = {}
    names: list[str] = []
    keys: dict[tuple, int] = {}
    for i, e in enumerate(c.edges):
        if e.action is None:
            continue
        if not any(o is not e and o.source == e.source and e.guard.exclusive(o.guard) for o in c.edges):
            continue
        key = (e.source, e.action, e.target, tuple((k, str(v)) for k, v in e.updates.items()))
        if key not in keys:
            base = f"{e.source}~{e.action}"
            name = base if base not in names and base not in c.locations else f"{base}#{len(names) + 1}"
            keys[key] = len(c.locations) + len(names)
            names.append(name)
        ext[i] = keys[key]
    return ext, names


def layout_of(network: Network) -> Layout:
    names, lows, radix, kinds, owner = [], [], [], [], []
    locs: dict[str, tuple[str, ...]] = {}
    for ci, c in enumerate(network.components):
        _, extra = fresh_locations(c)
        all_locs = c.locations + tuple(extra)
        locs[c.location_variable] = all_locs
        names.append(c.location_variable), lows.append(0), radix.append(len(all_locs)), kinds.append("int"), owner.append(ci)
        for v in c.variables:
            names.append(v.name), lows.append(int(v.low)), radix.append(v.size), kinds.append(v.kind), owner.append(ci)
    radix_a = np.array(radix, dtype=np.int64)
    strides = np.ones(len(radix), dtype=np.int64)
    for j in range(len(radix) - 2, -1, -1):
        strides[j] = strides[j + 1] * radix_a[j + 1]
    return Layout(names, np.array(lows, dtype=np.int64), radix_a, strides, kinds, owner, locs)


def _resolved(network: Network, expr: Expr, where: str) -> Expr:
    return network.resolved(expr, where)


def build_local_table(network: Network, ci: int, layout: Layout, provider) -> LocalTable:
    """Tabulate component ``ci``; see the module docstring."""
    c = network.components[ci]
    fresh, _ = fresh_locations(c)
    loc_var = c.location_variable
    edges = list(c.edges)
    whens = [_resolved(network, e.when, f"{c.name}: edge {e.describe()}") for e in edges]
    updates = [{k: _resolved(network, v, f"{c.name}: update of {k}") for k, v in e.updates.items()} for e in edges]
    guards = [e.guard for e in edges]
    read = {loc_var, *(v.name for v in c.variables)}
    for w in whens:
        read |= w.names()
    for ups in updates:
        for u in ups.values():
            read |= u.names()
    for g in guards:
        read |= _provider_reads(network, provider, g)
    reads = sorted(layout.position(n) for n in read)
    sizes = layout.radix[reads]
    dsize = int(np.prod(sizes.astype(object)))
    if dsize > MAX_LOCAL_TABLE:
        from mopmc.errors import ConfigError

        raise ConfigError(f"{c.where + ': ' if c.where else ''}{c.name} reads variables with {dsize} combined values "
                          f"(limit {MAX_LOCAL_TABLE}); read fewer variables in its guards")
    dstrides = np.ones(len(reads), dtype=np.int64)
    for j in range(len(reads) - 2, -1, -1):
        dstrides[j] = dstrides[j + 1] * sizes[j + 1]
    d = np.arange(dsize, dtype=np.int64)
    env = {layout.names[p]: (d // dstrides[j]) % sizes[j] + layout.lows[p] for j, p in enumerate(reads)}
    loc = env[loc_var]

    enabled = np.zeros((len(edges), dsize), dtype=bool)
    for i, e in enumerate(edges):
        enabled[i] = (loc == c.locations.index(e.source)) & np.broadcast_to(np.asarray(whens[i].eval(env), dtype=bool), (dsize,))
    messages: list[tuple[str | None, str]] = []
    error = np.zeros(dsize, dtype=np.int32)

    def fail(mask: np.ndarray, text, where: str | None = c.where) -> None:
        """Record the problem ``text`` at the valuations in ``mask``; ``where`` names its place in the spec."""
        new = mask & (error == 0)
        if new.any():
            messages.append((where, text(new) if callable(text) else text))
            error[new] = len(messages)

    def edge_at(i: int, key: str = "") -> str | None:
        return edges[i].where + key if edges[i].where else c.where

    has_excl = np.zeros(dsize, dtype=bool)
    has_eq = np.zeros(dsize, dtype=bool)
    for i in range(len(edges)):
        for j in range(i + 1, len(edges)):
            if edges[i].source != edges[j].source:
                continue
            both = enabled[i] & enabled[j]
            if not both.any():
                continue
            rel = guards[i].relation(guards[j])
            if rel == "overlapping":
                fail(both, f"{c.name}: guards of {edges[i].describe()} [{guards[i].text()}] and {edges[j].describe()} "
                           f"[{guards[j].text()}] are neither exclusive nor equivalent (paper Sec. 3.1 assumption)", edge_at(j))
            elif rel == "exclusive":
                has_excl |= both
            else:
                has_eq |= both
    fail(has_excl & has_eq, f"{c.name}: mixed guards at location with both equivalent and exclusive enabled edges (paper Sec. 3.1 assumption)")
    branching = has_excl
    _check_events_covered(c.name, edges, guards, enabled, lambda m, text, i: fail(m, text, edge_at(i)))

    own = [layout.position(loc_var)] + [layout.position(v.name) for v in c.variables]

    def delta_of(i: int, target_loc: int | np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Code delta of taking edge ``i`` (updates, target location) at the valuations in ``mask``."""
        sub = {k: v[mask] for k, v in env.items()}
        out = (np.broadcast_to(target_loc, loc.shape)[mask] - loc[mask]) * layout.strides[own[0]]
        for name, expr in updates[i].items():
            p = layout.position(name)
            new = np.broadcast_to(np.asarray(expr.eval(sub)), out.shape).astype(np.int64)
            lo, hi = layout.lows[p], layout.lows[p] + layout.radix[p] - 1
            bad = (new < lo) | (new > hi)
            if bad.any():
                m = np.zeros(dsize, dtype=bool)
                m[np.flatnonzero(mask)[bad]] = True
                fail(m, f"{c.name}: edge {edges[i].describe()} sets {name} out of its range [{lo}, {hi}]", edge_at(i, f".updates.{name}"))
                new = np.clip(new, lo, hi)
            out = out + (new - sub[name]) * layout.strides[p]
        return out

    # tau options: branchings (one choice, several outcomes) and plain tau edges (one choice each)
    t_d, t_choice, t_delta, t_prob = [], [], [], []
    branch_sig = np.full(dsize, -1, dtype=np.int64)
    signatures: list[tuple] = []
    if branching.any():
        inb = enabled & branching[None, :]
        probs, rows, cond_list = _branch_probabilities(provider, guards, inb, branching, env)
        p_where = getattr(provider, "where", None) or c.where  # (the probabilities: the spec's or --params file's)
        fail(branching & np.isnan(np.where(inb, probs, 0.0)).any(axis=0),
             lambda m: f"{c.name}: no probability for the guards {_guards_at(edges, guards, inb, m)}; "
                       "give all but one of them in the probability table or a delay distribution", p_where)
        bad_p = (inb & ((probs < -1e-12) | (probs > 1 + 1e-12))).any(axis=0)
        fail(branching & bad_p, lambda m: f"{c.name}: a branching probability is outside [0, 1] at {_guards_at(edges, guards, inb, m)}",
             p_where)
        total = np.where(inb, probs, 0.0).sum(axis=0)
        fail(branching & (np.abs(total - 1.0) > 1e-9), lambda m: f"{c.name}: branching probabilities sum to {total[m][0]:.12g}, not 1, "
                                                                 f"at {_guards_at(edges, guards, inb, m)}", p_where)
        # signature of each branching valuation: enabled edges and the table rows used (for PRISM export)
        idx = np.flatnonzero(branching)
        key = np.concatenate([inb[:, idx], rows[:, idx] + 1], axis=0).T
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        for u in uniq:
            es = tuple(int(i) for i in np.flatnonzero(u[: len(edges)]))
            used = [int(u[len(edges) + i]) - 1 for i in es]
            d0 = idx[int(np.flatnonzero(inv.reshape(-1) == len(signatures))[0])]
            signatures.append((es, tuple(cond_list[r] if r >= 0 else None for r in used), tuple(float(probs[i, d0]) for i in es)))
        branch_sig[idx] = inv.reshape(-1)
        for i, e in enumerate(edges):
            m = inb[i]
            if not m.any():
                continue
            target = c.locations.index(e.target) if e.action is None else fresh[i]
            if e.action is None:
                dl = delta_of(i, target, m)
            else:  # the fresh location remembers the edge; its updates happen when the action is taken
                dl = (target - loc[m]) * layout.strides[own[0]]
            t_d.append(np.flatnonzero(m)), t_choice.append(np.zeros(int(m.sum()), dtype=np.int64))
            t_delta.append(dl), t_prob.append(probs[i, m])
    plain = enabled & ~branching[None, :]
    named: dict[str, list] = {}
    for i, e in enumerate(edges):
        m = plain[i]
        if m.any():
            _add_option(e.action, i + 1, m, delta_of(i, c.locations.index(e.target), m), t_d, t_choice, t_delta, t_prob, named)
    for f, i in sorted({f: i for i, f in sorted(fresh.items(), reverse=True)}.items()):
        m = loc == f
        if m.any():
            e = edges[i]
            _add_option(e.action, len(edges) + 1 + i, m, delta_of(i, c.locations.index(e.target), m), t_d, t_choice, t_delta, t_prob, named)
    table = LocalTable(c, reads, dstrides, error, messages, *_csr(dsize, t_d, t_choice, t_delta, t_prob),
                       branch_sig=branch_sig, signatures=signatures, fresh=fresh)
    for action, parts in named.items():
        ptr, delta, _, _ = _csr(dsize, [p[0] for p in parts], [np.zeros(len(p[0]), np.int64) for p in parts], [p[1] for p in parts], [np.ones(len(p[0])) for p in parts])
        table.named[action] = (ptr, delta)
    return table


def _add_option(action, choice_no, mask, delta, t_d, t_choice, t_delta, t_prob, named) -> None:
    ds = np.flatnonzero(mask)
    if action is None:
        t_d.append(ds), t_choice.append(np.full(len(ds), choice_no, dtype=np.int64))
        t_delta.append(delta), t_prob.append(np.ones(len(ds)))
    else:
        named.setdefault(action, []).append((ds, delta))


def _csr(dsize, ds, choices, deltas, probs):
    if ds:
        d = np.concatenate(ds)
        ch = np.concatenate(choices)
        dl = np.concatenate(deltas).astype(np.int64)
        pr = np.concatenate(probs).astype(np.float64)
        order = np.lexsort((ch, d))  # by d, then choice; outcomes keep edge order
        d, ch, dl, pr = d[order], ch[order], dl[order], pr[order]
    else:
        d = ch = dl = np.zeros(0, np.int64)
        pr = np.zeros(0)
    ptr = np.zeros(dsize + 1, dtype=np.int64)
    np.cumsum(np.bincount(d, minlength=dsize), out=ptr[1:])
    return ptr, dl, pr, ch


def _providers(provider) -> tuple:
    if provider is None:
        return ()
    return tuple(getattr(provider, "providers", (provider,)))


def _check_events_covered(name: str, edges, guards, enabled: np.ndarray, fail) -> None:
    """Edges taken on an environment event need an edge for each of its values where they wait:
    otherwise the automaton has no move there, and the conversion would give the event's outcome the
    probability of the whole branching (the complement) or probability 1 (a single edge).
    ``fail(mask, text, i)`` records the problem at edge ``i`` (one with the event)."""
    from mopmc.design.guards import uncovered_event

    with_events = np.array([bool(g.events) for g in guards], dtype=bool)
    if not with_events.any():
        return
    cols = enabled[:, (enabled & with_events[:, None]).any(axis=0)]
    for pattern in np.unique(cols, axis=1).T:
        on = np.flatnonzero(pattern)
        gap = uncovered_event([guards[i] for i in on])
        if gap is not None:
            at = (enabled == pattern[:, None]).all(axis=0)
            shown = "; ".join(f"{edges[i].describe()} [{guards[i].text()}]" for i in on)
            fail(at, f"{name}: no edge covers {gap.text()} among {shown}: the automaton has no move there; "
                     "give an edge for each value of the event (e.g. one guarded by its negation)",
                 next(i for i in on if guards[i].events))


def _branch_probabilities(provider, guards, inb, branching, env):
    """Outcome probabilities of every branching valuation, and the condition used per outcome.

    Providers are tried in order per valuation: the first that knows all outcomes but at most one
    decides them (the missing one gets the complement), so a measured table is never mixed with a
    distribution within one branching.
    """
    n_edges, dsize = inb.shape
    probs = np.full((n_edges, dsize), np.nan)
    rows = np.full((n_edges, dsize), -1, dtype=np.int64)
    cond_list: list = []
    decided = np.zeros(dsize, dtype=bool)
    n_enabled = inb.sum(axis=0)
    for p in _providers(provider):
        P = np.full((n_edges, dsize), np.nan)
        R = np.full((n_edges, dsize), -1, dtype=np.int64)
        for i, g in enumerate(guards):
            m = inb[i] & ~decided
            if not m.any():
                continue
            ans = p.probability(g, {k: v[m] for k, v in env.items()}, int(m.sum()))
            if ans is not None:
                P[i, m] = ans.values
                R[i, m] = np.where(ans.row >= 0, ans.row + len(cond_list), -1)
                cond_list.extend(ans.conditions)
        unknown = inb & np.isnan(P)
        n_unknown = unknown.sum(axis=0)
        ok = branching & ~decided & (n_unknown <= 1) & (n_unknown < n_enabled)
        known_sum = np.where(inb & ~unknown, P, 0.0).sum(axis=0)
        for i in range(n_edges):
            fill = unknown[i] & ok
            P[i, fill] = 1.0 - known_sum[fill]
        probs[:, ok] = P[:, ok]
        rows[:, ok] = R[:, ok]
        decided |= ok
    return probs, rows, cond_list


def _guards_at(edges, guards, inb, mask) -> str:
    j = int(np.flatnonzero(mask)[0])
    return "; ".join(f"{edges[i].describe()} [{guards[i].text()}]" for i in np.flatnonzero(inb[:, j]))


def _provider_reads(network: Network, provider, guard: Guard) -> set[str]:
    if provider is None or guard.trivial:
        return set()
    reads = getattr(provider, "reads", None)
    if reads is None:
        return set()
    return {n for w in reads(guard) for n in network.resolved(w, "probability condition").names()}


