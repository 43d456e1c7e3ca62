"""Compiled loops of the CPU engine: the only module that imports numba, lazily, with ``cache=True``.

Every function here is a plain loop over CSR arrays (``row_groups`` state -> choices, ``indptr``
choice -> transitions, ``targets``, ``probs``). Each public name is a :class:`_Lazy` wrapper that
compiles the function on first call, so ``import mopmc.engine`` stays cheap.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import numpy as np


_COMPILING = threading.Lock()
_LOCAL = threading.local()


def _python_work() -> int:
    raw = os.environ.get("MOPMC_PY_KERNELS", "")
    try:
        return max(0, int(raw)) if raw else 4096
    except ValueError:
        return 4096


PY_WORK = _python_work()
"""Kernels whose work on a call is at most this (by default the size of its largest array
argument) run as plain Python while they are not compiled yet: importing numba and loading a
kernel's compiled code costs about 1 s, where a model of a few dozen states needs milliseconds of
Python. ``MOPMC_PY_KERNELS=0`` compiles every kernel on its first call; ``MOPMC_PY_KERNELS=N``
sets the bound. A kernel compiled once (by a larger call, or the warm-up thread,
:func:`compiling`) stays compiled, and once the process has spent :data:`PY_BUDGET` seconds in
plain Python kernels (many small queries in one process) every kernel compiles. The plain Python
runs the same arithmetic in the same order: the same results bit for bit
(``tests/engine/test_python_kernels.py``)."""
PY_BUDGET = 0.5
"""Seconds of plain Python kernels a process may spend before every kernel compiles (about what
compiling costs: so small models never lose more than that against compiled kernels)."""
_spent = [0.0]


@contextlib.contextmanager
def compiling():
    """Within it, this thread's kernel calls compile (the warm-up: it loads compiled code ahead of
    the real calls, so it must not take the plain Python path)."""
    before = getattr(_LOCAL, "compile", False)
    _LOCAL.compile = True
    try:
        yield
    finally:
        _LOCAL.compile = before


def _largest(args) -> int:
    return max((a.size for a in args if isinstance(a, np.ndarray)), default=0)


class _Lazy:
    """Compile ``fn`` with ``numba.njit(cache=True)`` on first call, unless the call's ``work``
    (a function of the arguments; by default the largest array's size) is at most
    :data:`PY_WORK`: then run ``fn`` as Python (``python=False``: never)."""

    def __init__(self, fn, work=_largest, python: bool = True):
        self.fn = fn
        self.compiled = None
        self.work = work
        self.python = python
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__

    def __call__(self, *args):
        compiled = self.compiled
        if compiled is None:
            if (self.python and PY_WORK and _spent[0] <= PY_BUDGET and not getattr(_LOCAL, "compile", False)
                    and self.work(args) <= PY_WORK):
                t = time.perf_counter()
                try:
                    with np.errstate(all="ignore"):  # (IEEE arithmetic without warnings, as compiled)
                        return self.fn(*args)
                finally:
                    _spent[0] += time.perf_counter() - t
            with _COMPILING:  # the warm-up thread (mopmc.engine.warmup) may get here at the same time
                if self.compiled is None:
                    import numba

                    self.compiled = numba.njit(cache=True, nogil=True)(self.fn)
            compiled = self.compiled
        return compiled(*args)


def _lazy(fn=None, *, work=_largest, python: bool = True):
    """``@_lazy`` or ``@_lazy(work=..., python=...)``: a :class:`_Lazy` kernel."""
    if fn is None:
        return lambda f: _Lazy(f, work, python)
    return _Lazy(fn, work, python)


def jit(fn):
    """``fn`` compiled with ``numba.njit(cache=True, nogil=True)`` now (for kernels elsewhere, such as
    :mod:`mopmc.io.explicit.explore`, whose compiled functions call each other)."""
    import numba

    return numba.njit(cache=True, nogil=True)(fn)


@_lazy
def nonzero_rows(a):
    """Per row of the 2-D ``a``: whether some entry is not 0 (NaN counts), as
    ``np.any(a != 0, axis=1)`` without its temporary of ``a``'s shape (10x faster on 2M rows of 4)."""
    out = np.zeros(a.shape[0], np.bool_)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if a[i, j] != 0.0:
                out[i] = True
                break
    return out


@_lazy
def reverse_index_csr(n_states, indptr, targets):
    """Transitions grouped by target (counting sort): ``rev_ptr`` over states and ``rev_choice``,
    the choice of each transition read off ``indptr``."""
    counts = np.zeros(n_states + 1, np.int64)
    for k in range(targets.shape[0]):
        counts[targets[k] + 1] += 1
    for s in range(n_states):
        counts[s + 1] += counts[s]
    fill = counts[:-1].copy()
    rev_choice = np.empty(targets.shape[0], np.int64)
    for c in range(indptr.shape[0] - 1):
        for k in range(indptr[c], indptr[c + 1]):
            t = targets[k]
            rev_choice[fill[t]] = c
            fill[t] += 1
    return counts, rev_choice


@_lazy
def self_loop_den(row_groups, indptr, targets, probs, exit_mass):
    """Per choice, ``1 - p_self`` as the engines divide by it: 1.0 without a self-loop, else what
    it sends elsewhere, summed (other states, then ``exit_mass``; :func:`mopmc.engine.problem.denominators`)."""
    out = np.ones(indptr.shape[0] - 1, np.float64)
    for s in range(row_groups.shape[0] - 1):
        for c in range(row_groups[s], row_groups[s + 1]):
            loops = False
            other = 0.0
            for k in range(indptr[c], indptr[c + 1]):
                if targets[k] == s:
                    loops = True
                else:
                    other += probs[k]
            if loops:
                out[c] = other + exit_mass[c]
    return out


@_lazy
def self_loop_states(row_groups, indptr, targets):
    """Per state: some transition of one of its choices leads back to it."""
    n = row_groups.shape[0] - 1
    out = np.zeros(n, np.bool_)
    for s in range(n):
        for k in range(indptr[row_groups[s]], indptr[row_groups[s + 1]]):
            if targets[k] == s:
                out[s] = True
                break
    return out


@_lazy
def dag_labels(row_groups, indptr, targets, seed):
    """``scc_labels`` of a graph whose cycles are all self-loops, by a plain depth-first search (no
    lowlinks, no SCC stack): the same traversal, so the same labels (each state its own SCC, in
    post-order), heights and reach. Returns ``(acyclic, n_labels, label, height, reach)``;
    ``acyclic`` is False, and the rest meaningless, at the first edge back into the search path
    (a cycle through two or more states: ``scc_labels`` then)."""
    n = row_groups.shape[0] - 1
    state = np.zeros(n, np.int8)  # 0 new, 1 on the path, 2 done
    label = np.empty(n, np.int64)
    height = np.empty(n, np.int64)
    reach = np.empty(n, np.bool_)
    call_node = np.empty(n, np.int64)
    call_edge = np.empty(n, np.int64)
    n_labels = 0
    for root in range(n):
        if state[root] != 0:
            continue
        state[root] = 1
        call_node[0] = root
        call_edge[0] = indptr[row_groups[root]]
        depth = 1
        while depth > 0:
            v = call_node[depth - 1]
            e = call_edge[depth - 1]
            end = indptr[row_groups[v + 1]]
            descended = False
            while e < end:
                w = targets[e]
                e += 1
                sw = state[w]
                if sw == 0:
                    call_edge[depth - 1] = e
                    state[w] = 1
                    call_node[depth] = w
                    call_edge[depth] = indptr[row_groups[w]]
                    depth += 1
                    descended = True
                    break
                if sw == 1 and w != v:
                    return False, 0, label, height, reach
            if descended:
                continue
            h = 0
            r = seed[v]
            for k in range(indptr[row_groups[v]], indptr[row_groups[v + 1]]):
                t = targets[k]
                if t != v:
                    b = label[t]
                    if reach[b]:
                        r = True
                        if height[b] + 1 > h:
                            h = height[b] + 1
            label[v] = n_labels
            height[n_labels] = h
            reach[n_labels] = r
            n_labels += 1
            state[v] = 2
            depth -= 1
    return True, n_labels, label, height, reach


@_lazy
def scc_labels(row_groups, indptr, targets, seed):
    """Strongly connected components of the state graph (Tarjan, iterative), read off the CSR.

    Returns ``(n_labels, label, height, reach)``; labels come out in reverse topological order
    (every edge between two SCCs goes from a larger label to a smaller one); ``reach[l]``: SCC ``l``
    holds or reaches a ``seed`` state; ``height[l]`` is SCC ``l``'s height in the condensation DAG
    restricted to the SCCs that reach (0 = no such successor SCC): the longest path to a sink."""
    n = row_groups.shape[0] - 1
    index = np.full(n, -1, np.int64)
    low = np.empty(n, np.int64)
    on_stack = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    label = np.full(n, -1, np.int64)
    height = np.zeros(n, np.int64)
    reach = np.zeros(n, np.bool_)
    call_node = np.empty(n, np.int64)
    call_edge = np.empty(n, np.int64)
    sp = 0
    counter = 0
    n_labels = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        w = root
        depth = 0
        descend = True
        while True:
            if descend:  # visit w: number it, push it on both stacks
                index[w] = counter
                low[w] = counter
                counter += 1
                stack[sp] = w
                sp += 1
                on_stack[w] = True
                call_node[depth] = w
                call_edge[depth] = indptr[row_groups[w]]
                depth += 1
                descend = False
            if depth == 0:
                break
            v = call_node[depth - 1]
            e = call_edge[depth - 1]
            end = indptr[row_groups[v + 1]]
            while e < end:
                w = targets[e]
                e += 1
                if index[w] < 0:
                    call_edge[depth - 1] = e
                    descend = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if descend:
                continue
            if low[v] == index[v]:
                top = sp
                while True:
                    sp -= 1
                    x = stack[sp]
                    on_stack[x] = False
                    label[x] = n_labels
                    if x == v:
                        break
                h = 0  # every successor SCC is complete: its height and reach are known
                r = False
                for i in range(sp, top):
                    x = stack[i]
                    if seed[x]:
                        r = True
                    for k in range(indptr[row_groups[x]], indptr[row_groups[x + 1]]):
                        b = label[targets[k]]
                        if b != n_labels and reach[b]:
                            r = True
                            if height[b] + 1 > h:
                                h = height[b] + 1
                height[n_labels] = h
                reach[n_labels] = r
                n_labels += 1
            depth -= 1
            if depth > 0:
                u = call_node[depth - 1]
                if low[v] < low[u]:
                    low[u] = low[v]
    return n_labels, label, height[:n_labels].copy(), reach[:n_labels].copy()


@_lazy
def plan_order(label, height):
    """The states of a plan by level (``level[s] = height[label[s]]``), apart for the states of
    one-state SCCs (``trivial``) and of larger ones (``cyclic``), each sorted by level and then by
    state (a counting sort: two passes over the states instead of two stable argsorts).

    Returns ``(level, trivial, cyclic, trivial_start, cyclic_start)``; ``*_start[l]``: how many of
    those states lie below level ``l`` (length ``max level + 2``)."""
    n = label.shape[0]
    n_labels = height.shape[0]
    acyclic = n_labels == n  # as many SCCs as states: every SCC is one state
    big = np.zeros(0 if acyclic else n_labels, np.bool_)
    if not acyclic:
        size = np.zeros(n_labels, np.int64)
        for s in range(n):
            size[label[s]] += 1
        for i in range(n_labels):
            big[i] = size[i] > 1
    level = np.empty(n, np.int64)
    top = 0
    for i in range(n_labels):
        if height[i] > top:
            top = height[i]
    ts = np.zeros(top + 2, np.int64)
    cs = np.zeros(top + 2, np.int64)
    for s in range(n):
        h = height[label[s]]
        level[s] = h
        if not acyclic and big[label[s]]:
            cs[h + 1] += 1
        else:
            ts[h + 1] += 1
    for h in range(top + 1):
        ts[h + 1] += ts[h]
        cs[h + 1] += cs[h]
    trivial = np.empty(ts[top + 1], np.int64)
    cyclic = np.empty(cs[top + 1], np.int64)
    tf = ts[:-1].copy()
    cf = cs[:-1].copy()
    for s in range(n):
        h = level[s]
        if not acyclic and big[label[s]]:
            cyclic[cf[h]] = s
            cf[h] += 1
        else:
            trivial[tf[h]] = s
            tf[h] += 1
    return level, trivial, cyclic, ts, cs


@_lazy
def plan_steps(trivial, cyclic, ts, cs):
    """The steps of a plan from :func:`plan_order`'s output: per level that holds cycles, upwards,
    the one-state SCCs up to it (a "pass", when there are any) and then its cyclic states; the
    one-state SCCs above the last such level close it.

    Returns ``(order, off, cycles)``: the states of all steps one after the other (the processing
    order), step ``i`` being ``order[off[i]:off[i + 1]]``, a cycles step where ``cycles[i]``."""
    n_levels = ts.shape[0] - 1
    lo = np.empty(2 * n_levels + 1, np.int64)
    hi = np.empty(2 * n_levels + 1, np.int64)
    cyc = np.empty(2 * n_levels + 1, np.bool_)
    k = 0
    start = 0
    for L in range(n_levels):
        if cs[L + 1] > cs[L]:
            stop = ts[L + 1]
            if stop > start:
                lo[k], hi[k], cyc[k] = start, stop, False
                k += 1
            start = stop
            lo[k], hi[k], cyc[k] = cs[L], cs[L + 1], True
            k += 1
    if start < trivial.shape[0]:
        lo[k], hi[k], cyc[k] = start, trivial.shape[0], False
        k += 1
    order = np.empty(trivial.shape[0] + cyclic.shape[0], np.int64)
    off = np.empty(k + 1, np.int64)
    at = 0
    for i in range(k):
        off[i] = at
        for j in range(lo[i], hi[i]):
            order[at] = cyclic[j] if cyc[i] else trivial[j]
            at += 1
    off[k] = at
    return order, off, cyc[:k].copy()


@_lazy
def merge_groups(cycles, sizes, small, most):
    """Runs of consecutive small steps (at most ``small`` states each, at most ``most`` states a run)
    grouped from their first cycles step to their last, where a run holds two cycles steps or more
    (see :func:`mopmc.engine.scc.merge_small_cycles`); every other step a group of its own.

    Returns ``first``: group ``g`` is steps ``first[g]`` to ``first[g + 1] - 1`` (a cycles step
    where its first step is one: a merged group starts at its run's first cycles step)."""
    n = sizes.shape[0]
    first = np.empty(n + 1, np.int64)
    g = 0
    run = 0  # the open run: steps run .. i - 1
    size = 0
    for i in range(n + 1):
        big = False
        if i < n:
            big = sizes[i] > small
            if not big and size + sizes[i] <= most:
                size += sizes[i]
                continue
        # close the run
        a = -1
        b = -1
        n_cyc = 0
        for j in range(run, i):
            if cycles[j]:
                if a < 0:
                    a = j
                b = j
                n_cyc += 1
        for j in range(run, i):
            if n_cyc >= 2 and a < j <= b:
                continue  # inside the merged group
            first[g] = j
            g += 1
        if i == n:
            break
        if big:
            first[g] = i
            g += 1
            run = i + 1
            size = 0
        else:
            run = i
            size = sizes[i]
    first[g] = n
    return first[:g + 1].copy()


@_lazy
def kept_labels(label, keep_labels):
    """The states whose SCC ``keep_labels`` keeps, and their SCCs renumbered densely in the same
    order: ``(keep_states, new_label)`` (``new_label`` over the kept states only)."""
    new = np.empty(keep_labels.shape[0], np.int64)
    k = 0
    for i in range(keep_labels.shape[0]):
        new[i] = k
        if keep_labels[i]:
            k += 1
    n = label.shape[0]
    keep = np.empty(n, np.bool_)
    out = np.empty(n, np.int64)
    j = 0
    for s in range(n):
        b = label[s]
        keep[s] = keep_labels[b]
        if keep_labels[b]:
            out[j] = new[b]
            j += 1
    return keep, out[:j]


@_lazy
def order_steps(order, jump):
    """Between consecutive entries of ``order``: how many steps are not ``+1``, and how many
    jump by more than ``jump`` either way."""
    off = 0
    big = 0
    for i in range(order.shape[0] - 1):
        d = order[i + 1] - order[i]
        if d != 1:
            off += 1
        if d > jump or d < -jump:
            big += 1
    return off, big


@_lazy
def leave_surely_in_order(order, row_groups, indptr, targets, exits):
    """Where every SCC is one state (self-loops allowed): the states from which some scheduler
    reaches the terminal (``exits``) almost surely, and such a choice of each (``-1`` elsewhere),
    in one pass over ``order`` (every state, each after its successors).

    A state has one iff one of its choices leaves it (an exit or a transition elsewhere; its
    self-loop then holds it with probability below 1) and has every other successor among them."""
    n = row_groups.shape[0] - 1
    good = np.zeros(n, np.bool_)
    via = np.full(n, -1, np.int64)
    for i in range(order.shape[0]):
        s = order[i]
        for c in range(row_groups[s], row_groups[s + 1]):
            ok = True
            leaves = exits[c]
            for k in range(indptr[c], indptr[c + 1]):
                t = targets[k]
                if t != s:
                    if not good[t]:
                        ok = False
                        break
                    leaves = True
            if ok and leaves:
                good[s] = True
                via[s] = c
                break
    return good, via


@_lazy
def backward_reach(seed, rev_ptr, rev_choice, state_of_choice, allowed_choice, allowed_state):
    """States (within ``allowed_state``) that reach ``seed`` in the graph of the allowed choices.

    Returns the mask and, per state, the choice through which it was first attracted (-1 for seeds).
    """
    n = seed.shape[0]
    mark = seed.copy()
    via = np.full(n, -1, np.int64)
    queue = np.empty(n, np.int64)
    head = 0
    tail = 0
    for s in range(n):
        if mark[s]:
            queue[tail] = s
            tail += 1
    while head < tail:
        t = queue[head]
        head += 1
        for k in range(rev_ptr[t], rev_ptr[t + 1]):
            c = rev_choice[k]
            if not allowed_choice[c]:
                continue
            s = state_of_choice[c]
            if mark[s] or not allowed_state[s]:
                continue
            mark[s] = True
            via[s] = c
            queue[tail] = s
            tail += 1
    return mark, via


@_lazy
def all_successors_in(indptr, targets, inside, n_choices):
    """Per choice: every successor lies in ``inside``."""
    out = np.ones(n_choices, np.bool_)
    for c in range(n_choices):
        for k in range(indptr[c], indptr[c + 1]):
            if not inside[targets[k]]:
                out[c] = False
                break
    return out


@_lazy
def product_bfs(row_groups, indptr, targets, choice_ok, n_states, decided, initial, drop_full, full, index):
    """Reachable states ``(s, b)`` of the goal-memory product, in BFS order.

    ``b`` is the memory before observing ``s``; a successor of ``(s, b)`` gets ``b | decided[s]``.
    With ``drop_full`` successors whose memory is ``full`` are dropped (nothing is left to collect).
    ``index`` (dense over ``b * n + s``, all zeros) receives product state + 1 (0: unreached); the
    caller allocates it with ``np.zeros``, so that only the pages of memory values the search
    reaches are ever touched (with 8 bits the table spans 256 copies of the states). Returns the
    product states' ``s`` and ``b``.
    """
    cap = 1024
    st = np.empty(cap, np.int64)
    mem = np.empty(cap, np.int64)
    count = 0
    index[initial] = 1
    st[0] = initial
    mem[0] = 0
    count = 1
    head = 0
    while head < count:
        s = st[head]
        b2 = mem[head] | decided[s]
        head += 1
        if drop_full and b2 == full:
            continue
        for c in range(row_groups[s], row_groups[s + 1]):
            if not choice_ok[c]:
                continue
            for k in range(indptr[c], indptr[c + 1]):
                key = b2 * n_states + targets[k]
                if index[key] == 0:
                    if count == cap:
                        cap *= 2
                        st2 = np.empty(cap, np.int64)
                        mem2 = np.empty(cap, np.int64)
                        st2[:count] = st[:count]
                        mem2[:count] = mem[:count]
                        st = st2
                        mem = mem2
                    count += 1
                    index[key] = count
                    st[count - 1] = targets[k]
                    mem[count - 1] = b2
    return st[:count].copy(), mem[:count].copy()


@_lazy
def product_arrays(row_groups, indptr, targets, probs, choice_ok, n_states, decided, st, mem, index, drop_full, full):
    """The goal-memory product's CSR over the product states ``(st[p], mem[p])`` (``product_bfs``'s
    search, ``index`` its table): each state's allowed model choices in order, a transition to
    ``(t, b2)`` with ``b2 = mem[p] | decided[st[p]]`` as product state ``index[b2 * n + t] - 1``.
    Transitions to product states not searched, and with ``drop_full`` every transition out of a
    state whose ``b2`` is ``full``, go to the terminal (their choice becomes an exit, their
    probabilities its exit mass). Returns ``(row_groups, choice, indptr, targets, probs, exits,
    exit_mass)`` (``choice``: the model choice of each)."""
    n_p = st.shape[0]
    nc = 0
    nt = 0
    for p in range(n_p):
        s = st[p]
        for c in range(row_groups[s], row_groups[s + 1]):
            if choice_ok[c]:
                nc += 1
                nt += indptr[c + 1] - indptr[c]
    rg = np.empty(n_p + 1, np.int64)
    pc = np.empty(nc, np.int64)
    ip = np.empty(nc + 1, np.int64)
    tg = np.empty(nt, np.int64)
    pr = np.empty(nt, np.float64)
    exits = np.empty(nc, np.bool_)
    mass = np.zeros(nc, np.float64)
    rg[0] = 0
    ip[0] = 0
    i = 0
    k = 0
    for p in range(n_p):
        s = st[p]
        b2 = mem[p] | decided[s]
        gone = drop_full and b2 == full
        for c in range(row_groups[s], row_groups[s + 1]):
            if not choice_ok[c]:
                continue
            pc[i] = c
            lost = False
            for j in range(indptr[c], indptr[c + 1]):
                t = -1 if gone else index[b2 * n_states + targets[j]] - 1
                if t >= 0:
                    tg[k] = t
                    pr[k] = probs[j]
                    k += 1
                else:
                    lost = True
                    mass[i] += probs[j]
            exits[i] = lost
            i += 1
            ip[i] = k
        rg[p + 1] = i
    return rg, pc, ip, tg[:k], pr[:k], exits, mass


@_lazy
def product_columns(R, rg, st, mem, kind, bit, target_row, reward_row, sign, direction, targets, rewards, pc):
    """The objective columns ``R[:, i]`` over the product's choices, row by row (one pass over
    ``R``), times ``direction[i]``: ``kind[i]`` 0 the model choice's reward (total reward); 1
    ``sign[i]`` (``-1`` negated) where the state is a target and memory ``bit[i]`` is unset, else 0
    (probability); 2 the choice's reward while ``bit[i]`` is unset and the state is not a target
    (reward until). Objective ``i`` reads ``targets[target_row[i]]`` (a mask over the model's
    states) and ``rewards[reward_row[i]]`` (over its choices)."""
    m = kind.shape[0]
    for p in range(st.shape[0]):
        s = st[p]
        for c in range(rg[p], rg[p + 1]):
            for i in range(m):
                k = kind[i]
                if k == 0:
                    v = rewards[reward_row[i], pc[c]]
                else:
                    unset = ((mem[p] >> bit[i]) & 1) == 0
                    hit = targets[target_row[i], s]
                    if k == 1:
                        v = (1.0 if (unset and hit) else 0.0) * sign[i]
                    else:
                        v = rewards[reward_row[i], pc[c]] if (unset and not hit) else 0.0
                R[c, i] = v * direction[i]


@_lazy
def bellman_pass(order, row_groups, indptr, targets, probs, self_only, den, rho, rewards, value, values, choice):
    """One backward pass over states without cycles through other states (self-loops allowed).

    For each state in ``order`` (successors first) pick the choice maximising
    ``(rho[c] + sum_{t != s} p * value[t]) / den[c]`` (``den``: ``1 - p_self`` as
    :func:`self_loop_den` computes it) and set ``value[s]`` (weighted) and
    ``values[s, :]`` (per objective) from it. Choices that only loop on ``s`` are skipped; the first
    state where such a loop has positive weighted reward is returned (-1 if none).
    """
    m = rewards.shape[1]
    infinite_at = -1
    for i in range(order.shape[0]):
        s = order[i]
        c0 = row_groups[s]
        if row_groups[s + 1] == c0 + 1 and not self_only[c0]:
            # one choice (most states of many models): value and per-objective values in one sweep
            acc = rho[c0]
            for j in range(m):
                values[s, j] = rewards[c0, j]
            for k in range(indptr[c0], indptr[c0 + 1]):
                t = targets[k]
                if t != s:
                    pk = probs[k]
                    acc += pk * value[t]
                    for j in range(m):
                        values[s, j] += pk * values[t, j]
            scale = 1.0 / den[c0]
            value[s] = acc / den[c0]
            choice[s] = c0
            for j in range(m):
                values[s, j] *= scale
            continue
        best = -np.inf
        bc = -1
        for c in range(row_groups[s], row_groups[s + 1]):
            if self_only[c]:
                if rho[c] > 0.0 and infinite_at < 0:
                    infinite_at = s
                continue
            acc = rho[c]
            for k in range(indptr[c], indptr[c + 1]):
                t = targets[k]
                if t != s:
                    acc += probs[k] * value[t]
            v = acc / den[c]
            if v > best:
                best = v
                bc = c
        value[s] = best
        choice[s] = bc
        if bc < 0:
            continue
        scale = 1.0 / den[bc]
        for j in range(m):
            values[s, j] = rewards[bc, j]
        for k in range(indptr[bc], indptr[bc + 1]):
            t = targets[k]
            if t != s:
                pk = probs[k]
                for j in range(m):
                    values[s, j] += pk * values[t, j]
        for j in range(m):
            values[s, j] *= scale
    return infinite_at


@_lazy
def occupation_values(order, indptr, targets, probs, den, choice, rewards, pays, initial):
    """The objective values at ``initial`` of the fixed ``choice`` per state on an acyclic part
    (self-loops allowed; ``order`` successors first, as :func:`bellman_pass`), by expected visits:
    one forward push of a scalar per state instead of the ``m`` values per state of a backward pass.
    A state's visits, ``x[s] / den[c]`` (``1 - p_self``), collect its choice's rewards; mass that leaves to
    the terminal is lost. States with ``choice`` -1 collect nothing. ``pays`` (bool per choice, or
    empty: all) skips the rows without a reward (adding their ``+0.0`` changes no sum: the same
    values bit for bit)."""
    n = order.shape[0]
    m = rewards.shape[1]
    x = np.zeros(choice.shape[0], np.float64)
    out = np.zeros(m, np.float64)
    x[initial] = 1.0
    for i in range(n - 1, -1, -1):
        s = order[i]
        c = choice[s]
        xs = x[s]
        if c < 0 or xs == 0.0:
            continue
        xs = xs / den[c]
        if pays.shape[0] == 0 or pays[c]:
            for j in range(m):
                out[j] += xs * rewards[c, j]
        for k in range(indptr[c], indptr[c + 1]):
            t = targets[k]
            if t != s:
                x[t] += xs * probs[k]
    return out


@_lazy
def bellman_pass_many(order, row_groups, indptr, targets, probs, self_only, den, rho, value, choice):
    """:func:`bellman_pass` for ``k`` directions at once, weighted values only: ``rho`` is
    ``(n_choices, k)``, ``value`` ``(n_states, k)`` and ``choice`` ``(k, n_states)``. Each
    direction's arithmetic is :func:`bellman_pass`'s in the same order (bit-for-bit the same
    values and choices); a state's transitions are read once for all ``k``. Returns per direction
    the first state where a self-loop-only choice has positive weighted reward (-1 if none)."""
    k = rho.shape[1]
    infinite_at = np.full(k, -1, np.int64)
    acc = np.empty(k, np.float64)
    for i in range(order.shape[0]):
        s = order[i]
        c0 = row_groups[s]
        if row_groups[s + 1] == c0 + 1 and not self_only[c0]:
            for d in range(k):
                acc[d] = rho[c0, d]
            for q in range(indptr[c0], indptr[c0 + 1]):
                t = targets[q]
                if t != s:
                    pq = probs[q]
                    for d in range(k):
                        acc[d] += pq * value[t, d]
            for d in range(k):
                value[s, d] = acc[d] / den[c0]
                choice[d, s] = c0
            continue
        for d in range(k):
            best = -np.inf
            bc = -1
            for c in range(row_groups[s], row_groups[s + 1]):
                if self_only[c]:
                    if rho[c, d] > 0.0 and infinite_at[d] < 0:
                        infinite_at[d] = s
                    continue
                a = rho[c, d]
                for q in range(indptr[c], indptr[c + 1]):
                    t = targets[q]
                    if t != s:
                        a += probs[q] * value[t, d]
                v = a / den[c]
                if v > best:
                    best = v
                    bc = c
            value[s, d] = best
            choice[d, s] = bc
    return infinite_at


@_lazy
def occupation_values_many(order, indptr, targets, probs, den, choice, rewards, pays, initial, x):
    """:func:`occupation_values` for ``k`` policies at once (``choice`` ``(k, n_states)``), each
    with :func:`occupation_values`'s arithmetic in the same order; a state's transitions are read
    once for all policies that choose the same choice there (``pays``: as there). ``x``: an ``(n_states, k)`` buffer
    (overwritten; the backward pass's values, no longer needed, so no fresh memory is touched).
    Returns ``(k, m)``."""
    n = order.shape[0]
    k = choice.shape[0]
    m = rewards.shape[1]
    for s in range(x.shape[0]):
        for d in range(k):
            x[s, d] = 0.0
    out = np.zeros((k, m), np.float64)
    xl = np.zeros(k, np.float64)
    for d in range(k):
        x[initial, d] = 1.0
    for i in range(n - 1, -1, -1):
        s = order[i]
        c = choice[0, s]
        same = True
        for d in range(1, k):
            if choice[d, s] != c:
                same = False
                break
        if same:
            if c < 0:
                continue
            moved = False
            for d in range(k):
                xs = x[s, d]
                if xs == 0.0:
                    xl[d] = 0.0
                    continue
                xs = xs / den[c]
                xl[d] = xs
                moved = True
                if pays.shape[0] == 0 or pays[c]:
                    for j in range(m):
                        out[d, j] += xs * rewards[c, j]
            if not moved:
                continue
            # (a policy with no mass here adds +0.0 to values >= +0.0: unchanged, bit for bit)
            for q in range(indptr[c], indptr[c + 1]):
                t = targets[q]
                if t != s:
                    pq = probs[q]
                    for d in range(k):
                        x[t, d] += xl[d] * pq
            continue
        for d in range(k):
            c = choice[d, s]
            xs = x[s, d]
            if c < 0 or xs == 0.0:
                continue
            xs = xs / den[c]
            if pays.shape[0] == 0 or pays[c]:
                for j in range(m):
                    out[d, j] += xs * rewards[c, j]
            for q in range(indptr[c], indptr[c + 1]):
                t = targets[q]
                if t != s:
                    x[t, d] += xs * probs[q]
    return out


@_lazy
def restrict_maps(row_groups, keep_states, keep_choices, use_choices):
    """One pass of a restriction: the new number of each kept state (``-1``: removed), the kept
    choices in order (``origin``) and the new row groups; ``keep_choices`` only when ``use_choices``."""
    n = row_groups.shape[0] - 1
    state_map = np.full(n, -1, np.int64)
    origin = np.empty(row_groups[n], np.int64)
    rg = np.zeros(n + 1, np.int64)
    kept = 0
    i = 0
    for s in range(n):
        if not keep_states[s]:
            continue
        for c in range(row_groups[s], row_groups[s + 1]):
            if not use_choices or keep_choices[c]:
                origin[i] = c
                i += 1
        state_map[s] = kept
        kept += 1
        rg[kept] = i
    return state_map, origin[:i], rg[:kept + 1]  # views: no second copy (first touches) of either


@_lazy
def permute_maps(row_groups, order):
    """One pass of a renumbering (``order[i]`` becomes state ``i``, choices follow their states):
    the new number of each state (``-1`` for a state ``order`` leaves out), the old choice of each
    new one (``origin``) and the new row groups."""
    n = order.shape[0]
    state_map = np.full(row_groups.shape[0] - 1, -1, np.int64)
    rg = np.empty(n + 1, np.int64)
    rg[0] = 0
    for i in range(n):
        s = order[i]
        state_map[s] = i
        rg[i + 1] = rg[i] + row_groups[s + 1] - row_groups[s]
    origin = np.empty(rg[n], np.int64)
    for i in range(n):
        c0 = row_groups[order[i]]
        base = rg[i]
        for j in range(rg[i + 1] - base):
            origin[base + j] = c0 + j
    return state_map, origin, rg


@_lazy
def gather_total(indptr, origin):
    """How many transitions the choices ``origin`` have."""
    total = 0
    for c in range(origin.shape[0]):
        o = origin[c]
        total += indptr[o + 1] - indptr[o]
    return total


@_lazy
def gather_count(indptr, targets, origin, state_map, c0, c1):
    """How many transitions of the choices ``origin[c0:c1]`` ``gather_fill`` keeps."""
    k = 0
    for c in range(c0, c1):
        o = origin[c]
        for j in range(indptr[o], indptr[o + 1]):
            if state_map[targets[j]] >= 0:
                k += 1
    return k


@_lazy
def gather_arrays(n, m, total):
    """``gather_fill``'s arrays for ``n`` choices and ``total`` transitions, unfilled."""
    ip = np.empty(n + 1, np.int64)
    ip[0] = 0
    return (ip, np.empty(total, np.int64), np.empty(total, np.float64), np.empty((n, m), np.float64),
            np.empty(n, np.bool_), np.empty(n, np.float64))


@_lazy
def gather_fill(ip, tg, pr, rw, ex, em, indptr, targets, probs, rewards, exits, mass, origin, state_map, c0, c1, k):
    """The choices ``origin[c0:c1]`` of a problem as new choices ``c0 .. c1 - 1``, their transitions
    from ``k`` on (what ``gather_count`` counted before them), targets renumbered by ``state_map``:
    transitions into removed states (``state_map < 0``) are dropped and make their choice an exit,
    their probabilities added to its exit mass (``mass`` the source's). Fills ``ip[c0 + 1 .. c1]``,
    ``tg``, ``pr``, the ``rw`` rows, ``ex`` and ``em``."""
    m = rewards.shape[1]
    for c in range(c0, c1):
        o = origin[c]
        lost = exits[o]
        gone = mass[o]
        for j in range(indptr[o], indptr[o + 1]):
            t = state_map[targets[j]]
            if t >= 0:
                tg[k] = t
                pr[k] = probs[j]
                k += 1
            else:
                lost = True
                gone += probs[j]
        ip[c + 1] = k
        ex[c] = lost
        em[c] = gone
        for i in range(m):
            rw[c, i] = rewards[o, i]


@_lazy
def self_only(row_groups, indptr, targets, exits):
    """Choices whose every transition returns to their own state and that cannot exit."""
    n = row_groups.shape[0] - 1
    out = np.zeros(indptr.shape[0] - 1, np.bool_)
    for s in range(n):
        for c in range(row_groups[s], row_groups[s + 1]):
            if exits[c]:
                continue
            ok = True
            for k in range(indptr[c], indptr[c + 1]):
                if targets[k] != s:
                    ok = False
                    break
            out[c] = ok
    return out


@_lazy
def pad_plan(row_groups, indptr, targets, bounds, waste, small):
    """The padded shape of each level ``bounds[i] = (a, b)`` (states): ``K`` (most choices of a
    state, at least 1) and ``T`` (transition slots per choice slot, minimising ``slots * T + 3 *
    overflow``, where an overflow entry costs about three padded ones: a gather, a product and an
    atomic add), the overflow count, and whether the level is padded (``n_l * K <= waste * choices +
    small``); ``T = over = 0`` when it is not."""
    L = bounds.shape[0]
    K = np.ones(L, np.int64)
    T = np.zeros(L, np.int64)
    over = np.zeros(L, np.int64)
    padded = np.zeros(L, np.bool_)
    for i in range(L):
        a, b = bounds[i, 0], bounds[i, 1]
        k = 1
        for s in range(a, b):
            k = max(k, row_groups[s + 1] - row_groups[s])
        K[i] = k
        nc = row_groups[b] - row_groups[a]
        slots = (b - a) * k
        if slots > waste * nc + small:
            continue
        padded[i] = True
        if nc == 0:
            T[i] = 1
            continue
        moves = np.zeros(nc, np.int64)  # per choice: its transitions to other states
        for s in range(a, b):
            for c in range(row_groups[s], row_groups[s + 1]):
                for j in range(indptr[c], indptr[c + 1]):
                    if targets[j] != s:
                        moves[c - row_groups[a]] += 1
        top = moves.max()  # the most transitions to other states of a choice
        hist = np.zeros(top + 1, np.int64)
        for v in moves:
            hist[v] += 1
        # above[t], above_sum[t]: choices with more than t transitions, and their transitions
        above = 0
        above_sum = 0
        best_t, best = 1, -1
        costs = np.zeros(max(top, 1) + 1, np.int64)
        for t in range(top, -1, -1):
            if t >= 1:
                costs[t] = slots * t + 3 * (above_sum - t * above)
            above += hist[t]
            above_sum += t * hist[t]
        if top < 1:
            costs[1] = slots  # no choice has a transition to another state: no overflow
        for t in range(1, max(top, 1) + 1):
            if best < 0 or costs[t] < best:
                best, best_t = costs[t], t
        T[i] = best_t
        o = 0
        for v in range(best_t + 1, top + 1):
            o += (v - best_t) * hist[v]
        over[i] = o
    return K, T, over, padded


@_lazy
def pad_arrays(n, m, n_slots, n_tslots, n_over):
    """The padded layout's arrays, unfilled (``pad_fill`` fills them level by level, so that
    threads filling different levels also touch their memory first); ``slot_base`` is -1."""
    return (np.empty(n_tslots, np.int64), np.empty(n_tslots, np.float64), np.empty(n_slots, np.float64),
            np.empty(n_slots, np.float64), np.empty((n_slots, m + 1), np.float64), np.empty(n_slots, np.int64),
            np.full(n, -1, np.int64), np.empty(n_over, np.int64), np.empty(n_over, np.int64), np.empty(n_over, np.float64))


@_lazy
def pad_fill(target, prob, dens, neg, RR, choice, slot_base, over_slot, over_target, over_prob,
             row_groups, indptr, targets, probs, rewards, self_only, den, bounds, K, T, s0, t0, o0, i0, i1):
    """Fill the padded layout's arrays (see :class:`mopmc.engine.torch_levels.PaddedLayout`) of
    the levels ``bounds[i0:i1]`` with shapes ``K, T`` at slot offsets ``s0``, ``t0`` and overflow
    ``o0``: their slots, transition slots and overflow entries, and ``slot_base`` of their states
    (levels own disjoint parts of every array)."""
    n = row_groups.shape[0] - 1
    m = rewards.shape[1]
    for i in range(i0, i1):
        a, b, k, t = bounds[i, 0], bounds[i, 1], K[i], T[i]
        o = o0[i]
        for g in range(s0[i], s0[i] + (b - a) * k):
            dens[g] = 1.0
            neg[g] = -np.inf
            choice[g] = -1
            for r in range(m + 1):
                RR[g, r] = 0.0
        for at in range(t0[i], t0[i] + (b - a) * k * t):
            target[at] = n
            prob[at] = 0.0
        for s in range(a, b):
            slot_base[s] = s0[i] + (s - a) * k
            for c in range(row_groups[s], row_groups[s + 1]):
                slot = (s - a) * k + (c - row_groups[s])  # within the level
                g = s0[i] + slot
                if not self_only[c]:
                    choice[g] = c
                    dens[g] = den[c]
                    neg[g] = 0.0
                    for r in range(m):
                        RR[g, r + 1] = rewards[c, r]
                pos = 0
                for j in range(indptr[c], indptr[c + 1]):
                    if targets[j] == s:
                        continue
                    if pos < t:
                        at = t0[i] + slot * t + pos
                        target[at] = targets[j]
                        prob[at] = probs[j]
                    else:
                        over_slot[o] = slot
                        over_target[o] = targets[j]
                        over_prob[o] = probs[j]
                        o += 1
                    pos += 1


@_lazy
def sums_dd(rows, weights, n, hi, lo):
    """Per row ``i < n``, the sum of the ``weights`` whose ``rows`` entry is ``i`` (any order), added
    to the double-double ``hi[i] + lo[i]`` in place by Knuth's error-free sums: ``hi`` the sum
    rounded once, ``lo`` what that rounding lost (the diagonal of ``D - P`` as exactly as the
    model's doubles give it, :func:`mopmc.engine.banded.conserving_split`)."""
    for k in range(rows.shape[0]):
        i = rows[k]
        p = weights[k]
        s = hi[i] + p
        z = s - hi[i]
        lo[i] += (hi[i] - (s - z)) + (p - z)
        hi[i] = s
    for i in range(n):  # renormalise: hi the rounded sum
        s = hi[i] + lo[i]
        lo[i] = lo[i] - (s - hi[i])
        hi[i] = s


@_lazy
def residual_dd(indptr, indices, data, diag, diag_lo, x, b, r):
    """``r = b - (D - P) x`` for the CSR matrix ``P``, the diagonal ``diag + diag_lo`` of ``D`` (a
    double-double: ``diag_lo`` what rounding the diagonal's sum lost, or an empty array) and 2-D
    ``x``, ``b``, ``r`` (one column per right-hand side), each entry summed in double-double
    arithmetic (Dekker's error-free products, Knuth's error-free sums) and rounded once: accurate to
    its own size however much ``b`` and ``(D - P) x`` cancel, which is what lets iterative
    refinement correct ``x`` beyond the condition number's reach (:func:`mopmc.engine.refine.refine`)."""
    n, m = x.shape
    split = 134217729.0  # 2^27 + 1
    has_lo = diag_lo.shape[0] > 0
    for i in range(n):
        for j in range(m):
            hi = b[i, j]
            lo = 0.0
            if has_lo:  # (the diagonal's lost part: its product's own rounding is far below the rest)
                lo -= diag_lo[i] * x[i, j]
            for k in range(indptr[i] - 1, indptr[i + 1]):  # (the first term: -d x)
                if k < indptr[i]:
                    u, v = -diag[i], x[i, j]
                else:
                    u, v = data[k], x[indices[k], j]
                p = u * v
                # the product's rounding error (Dekker: both factors split in halves)
                t = split * u
                uh = t - (t - u)
                ul = u - uh
                t = split * v
                vh = t - (t - v)
                vl = v - vh
                pe = ((uh * vh - p) + uh * vl + ul * vh) + ul * vl
                # the sum's rounding error (Knuth's TwoSum)
                s = hi + p
                z = s - hi
                lo += ((hi - (s - z)) + (p - z)) + pe
                hi = s
            r[i, j] = hi + lo
    return r


@_lazy(work=lambda a: a[2].size * max(int(a[5]), 1))  # (transitions x steps)
def horizon_backups(row_groups, indptr, targets, probs, rewards, steps, lo, hi, maximise, stop_one, stop_zero, initial):
    """Finite-horizon backward induction of one objective from the state ``initial``: ``steps``
    backups of ``V_t[s] = opt_c (rewards[c] + sum_k probs[k] V_{t+1}[targets[k]])`` with
    ``V_steps = 0``; returns ``V_0[initial]``. At step ``t`` (counted down from ``steps - 1`` to 0),
    a state with ``stop_one`` is worth 1 when ``lo <= t <= hi``, and one with ``stop_zero`` (and not
    that) is worth 0 (a probability objective's target and the states failing its left side); pass
    all-False masks for a cumulative reward.

    Step ``t`` backs up only the states within ``t`` steps of ``initial`` (the first ``within[t]``
    states of a breadth-first order that does not expand states whose value is fixed): their
    successors are within ``t + 1`` steps, so what they read was backed up at step ``t + 1``, and no
    other state's value reaches ``V_0[initial]``. A model whose states are reached step by step (a
    step counter, a layered design) costs the states it can reach, not ``steps`` passes over all
    of them; where everything is reached in a few steps it costs what the plain passes cost."""
    n = row_groups.shape[0] - 1
    if steps <= 0:
        return 0.0
    # breadth-first order from initial; within[t] = how many states are within t steps
    fixed_one = lo == 0  # then a target is worth 1 at every step of the horizon: nothing past it counts
    order = np.empty(n, np.int64)
    seen = np.zeros(n, np.bool_)
    within = np.empty(steps, np.int64)
    order[0] = initial
    seen[initial] = True
    size = 1
    head = 0
    for t in range(steps):
        end = size
        if t > 0:
            for i in range(head, end):
                s = order[i]
                if stop_zero[s] or (stop_one[s] and fixed_one):  # its value never reads a successor
                    continue
                for c in range(row_groups[s], row_groups[s + 1]):
                    for k in range(indptr[c], indptr[c + 1]):
                        u = targets[k]
                        if not seen[u]:
                            seen[u] = True
                            order[size] = u
                            size += 1
            head = end
        within[t] = size
        if size == head:  # nothing new: every later step backs up the same states
            for r in range(t + 1, steps):
                within[r] = size
            break
    nxt = np.zeros(n, np.float64)
    cur = np.zeros(n, np.float64)
    for t in range(steps - 1, -1, -1):
        inside = lo <= t <= hi
        for i in range(within[t]):
            s = order[i]
            if stop_one[s] and inside:
                cur[s] = 1.0
                continue
            if stop_zero[s]:
                cur[s] = 0.0
                continue
            best = 0.0
            first = True
            for c in range(row_groups[s], row_groups[s + 1]):
                acc = rewards[c]
                for k in range(indptr[c], indptr[c + 1]):
                    acc += probs[k] * nxt[targets[k]]
                if first or (acc > best if maximise else acc < best):
                    best = acc
                    first = False
            cur[s] = best
        cur, nxt = nxt, cur
    return nxt[initial]


@_lazy
def prune_closed(rev_ptr, rev_choice, state_of_choice, allowed, alive, keep):
    """Shrink ``allowed`` (choices) and ``alive`` (states), in place, to the largest part closed
    under the allowed choices: a choice with a successor that is not alive is dropped, a state left
    without choices is no longer alive (unless ``keep``: such states stay alive without choices),
    until nothing changes (a worklist: linear, where repeating the one-step rule costs a pass per
    state along a chain)."""
    n = alive.shape[0]
    count = np.zeros(n, np.int64)
    for c in range(allowed.shape[0]):
        if allowed[c]:
            count[state_of_choice[c]] += 1
    stack = np.empty(n, np.int64)
    top = 0
    for s in range(n):
        if alive[s] and count[s] == 0 and not keep[s]:
            alive[s] = False
        if not alive[s]:
            stack[top] = s
            top += 1
    while top > 0:
        top -= 1
        s = stack[top]
        for k in range(rev_ptr[s], rev_ptr[s + 1]):
            c = rev_choice[k]
            if allowed[c]:
                allowed[c] = False
                o = state_of_choice[c]
                count[o] -= 1
                if count[o] == 0 and alive[o] and not keep[o]:
                    alive[o] = False
                    stack[top] = o
                    top += 1


#: edges a search from a state that lost a choice may visit before the split is left to Tarjan
MEC_SEARCH_BUDGET = 64


@_lazy
def mec_fixpoint(row_groups, indptr, targets, choice_of_transition, state_of_choice, rev_ptr, rev_choice,
                 allowed, alive, budget):
    """The maximal end components' fixpoint, in place: shrink ``allowed`` (choices) and ``alive``
    (states) until every allowed choice of an alive state has all its successors alive and in its
    state's SCC of the graph of allowed choices. Returns every state's class label (alive states in
    one MEC share theirs; labels of states that are not alive mean nothing).

    The classic fixpoint (prune to the closed part, label SCCs, drop the choices that cross between
    them, until nothing is dropped) labels a whole component again whenever it loses a choice; a
    component that peels one layer of states per round (a random walk's counter, say) then costs a
    pass over itself per layer. Here an invariant holds throughout: every allowed choice of an alive
    state stays within its state's class. A class that lost a choice can only split off pieces that
    hold a state that lost a choice (pieces that cannot get back); so a breadth-first search runs
    from each such state, within its class, and where it closes within ``budget`` edges, the closed
    set is split off (its SCCs by Tarjan, the choices crossing between them or into it from the
    rest dropped, which starts searches from their states in turn). Only when no search is left,
    the classes that changed since their labelling are labelled again by Tarjan (which finds any
    split the searches did not: pieces larger than the budget, or ones that cannot be reached). The
    searches from one class may visit eight times as many edges as it has states (plus ``budget``)
    before it is left to Tarjan: where they find nothing (a ring of 1M states with an exit at every
    state: 4.6x slower without this credit), they cost a few labellings at most."""
    n = alive.shape[0]
    nc = allowed.shape[0]
    count = np.zeros(n, np.int64)
    for c in range(nc):
        if allowed[c]:
            count[state_of_choice[c]] += 1
    dead = np.empty(n, np.int64)  # the states that died, to prune around
    n_dead = 0
    lost = np.empty(nc + 1, np.int64)  # states that lost a choice, to search from
    n_lost = 0
    index = np.empty(n, np.int64)
    low = np.empty(n, np.int64)
    on_stack = np.zeros(n, np.bool_)
    tstack = np.empty(n, np.int64)
    call_node = np.empty(n, np.int64)
    call_edge = np.empty(n, np.int64)
    seen = np.zeros(n, np.int64)  # search stamps
    stamp = 0
    queue = np.empty(n, np.int64)  # the states to label: a closed set found by search, or every changed class
    label = np.zeros(n, np.int64)  # (at first one class, 0, to label)
    dirty = np.zeros(max(16, n // 4), np.bool_)  # per label: changed since its labelling
    credit = np.zeros(dirty.shape[0], np.int64)  # per label: edges its searches may still visit
    dirty[0] = True
    next_label = 1
    for s in range(n):
        if alive[s] and count[s] == 0:
            alive[s] = False
        if not alive[s]:
            dead[n_dead] = s
            n_dead += 1
    while True:
        # 1. closed part: a choice towards a state that is not alive goes; a state without choices dies
        while n_dead > 0:
            n_dead -= 1
            s = dead[n_dead]
            for k in range(rev_ptr[s], rev_ptr[s + 1]):
                c = rev_choice[k]
                if allowed[c]:
                    allowed[c] = False
                    o = state_of_choice[c]
                    count[o] -= 1
                    dirty[label[o]] = True
                    lost[n_lost] = o
                    n_lost += 1
                    if count[o] == 0 and alive[o]:
                        alive[o] = False
                        dead[n_dead] = o
                        n_dead += 1
        cls = -1  # the class a closed set splits off from (-1: labelling every changed class)
        if n_lost > 0:
            # 2a. a search from a state that lost a choice: does it close within its class?
            n_lost -= 1
            d = lost[n_lost]
            if not alive[d]:
                continue
            cls = label[d]
            if credit[cls] <= 0:  # (its searches cost as much as labelling it again: left to Tarjan)
                continue
            stamp += 1
            seen[d] = stamp
            queue[0] = d
            head = 0
            tail = 1
            edges = 0
            closed = True
            while head < tail and closed:
                v = queue[head]
                head += 1
                for c in range(row_groups[v], row_groups[v + 1]):
                    if not allowed[c]:
                        continue
                    for k in range(indptr[c], indptr[c + 1]):
                        w = targets[k]
                        edges += 1
                        if edges > budget or label[w] != cls:
                            closed = False
                            break
                        if seen[w] != stamp:
                            seen[w] = stamp
                            queue[tail] = w
                            tail += 1
                    if not closed:
                        break
            credit[cls] -= edges
            if not closed:
                continue
            dirty[cls] = True  # (the rest of the class: to label again, unless nothing is left of it)
        else:
            # 2b. no search left: every class that changed since its labelling, labelled again
            tail = 0
            for s in range(n):
                if alive[s] and dirty[label[s]]:
                    queue[tail] = s
                    tail += 1
            if tail == 0:
                return label
            for i in range(tail):
                dirty[label[queue[i]]] = False
        # 3. the SCCs of the states in queue[:tail] (Tarjan; every allowed choice stays among them)
        for i in range(tail):
            index[queue[i]] = -1
        sp = 0
        counter = 0
        for i in range(tail):
            root = queue[i]
            if index[root] >= 0:
                continue
            w = root
            depth = 0
            descend = True
            while True:
                if descend:
                    index[w] = counter
                    low[w] = counter
                    counter += 1
                    tstack[sp] = w
                    sp += 1
                    on_stack[w] = True
                    call_node[depth] = w
                    call_edge[depth] = indptr[row_groups[w]]
                    depth += 1
                    descend = False
                if depth == 0:
                    break
                v = call_node[depth - 1]
                e = call_edge[depth - 1]
                end = indptr[row_groups[v + 1]]
                while e < end:
                    if not allowed[choice_of_transition[e]]:
                        e += 1
                        continue
                    w = targets[e]
                    e += 1
                    if index[w] < 0:
                        call_edge[depth - 1] = e
                        descend = True
                        break
                    if on_stack[w] and index[w] < low[v]:
                        low[v] = index[w]
                if descend:
                    continue
                if low[v] == index[v]:
                    if next_label >= dirty.shape[0]:
                        grown = np.zeros(2 * dirty.shape[0], np.bool_)
                        grown[:dirty.shape[0]] = dirty
                        dirty = grown
                        more = np.zeros(2 * credit.shape[0], np.int64)
                        more[:credit.shape[0]] = credit
                        credit = more
                    size = 0
                    while True:
                        sp -= 1
                        x = tstack[sp]
                        on_stack[x] = False
                        label[x] = next_label
                        size += 1
                        if x == v:
                            break
                    credit[next_label] = 8 * size + budget
                    next_label += 1
                depth -= 1
                if depth > 0:
                    u = call_node[depth - 1]
                    if low[v] < low[u]:
                        low[u] = low[v]
        # 4. drop the choices that cross between the new SCCs (and, for a split, those of the rest of
        # the class into the closed set); the states left without choices die
        for i in range(tail):
            v = queue[i]
            for c in range(row_groups[v], row_groups[v + 1]):
                if not allowed[c]:
                    continue
                for k in range(indptr[c], indptr[c + 1]):
                    if label[targets[k]] != label[v]:
                        allowed[c] = False
                        count[v] -= 1
                        dirty[label[v]] = True
                        lost[n_lost] = v
                        n_lost += 1
                        break
            if cls >= 0:
                for k in range(rev_ptr[v], rev_ptr[v + 1]):
                    c = rev_choice[k]
                    o = state_of_choice[c]
                    if allowed[c] and label[o] == cls:
                        allowed[c] = False
                        count[o] -= 1
                        lost[n_lost] = o
                        n_lost += 1
                        if count[o] == 0:
                            alive[o] = False
                            dead[n_dead] = o
                            n_dead += 1
        for i in range(tail):
            v = queue[i]
            if count[v] == 0 and alive[v]:
                alive[v] = False
                dead[n_dead] = v
                n_dead += 1
