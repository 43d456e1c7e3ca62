"""The compiled explorer: breadth-first state exploration of a compiled PRISM program.

States are packed into one int64 (each variable ``j`` in ``mask[j]`` bits at ``shift[j]``, stored as
value - ``lo[j]``) and numbered in order of discovery through an open-addressing hash table. Choices
come in Storm's order: unlabelled commands module by module, then each synchronising action (the
product of one enabled command per module that has the action, the last module varying fastest).
A choice's transitions are sorted by target and duplicate targets summed, as Storm's builder does.
Every kernel is compiled once and cached (``numba_kernels.jit``).
"""

from __future__ import annotations

import numpy as np

import threading

OK, OUT_OF_BOUNDS, NONDETERMINISTIC_DTMC, BAD_PROBABILITY, NOT_ONE, TOO_MANY = 0, 1, 2, 3, 4, 5


def _evaluate(rows, consts, a, b, vals, stack):
    """Value of the expression ``rows[a:b]`` at variable values ``vals``."""
    sp = 0
    i = a
    while i < b:
        op = rows[i, 0]
        if op >= 50:  # jumps
            if op == 50:  # AND_THEN: false decides
                if stack[sp - 1] == 0.0:
                    i = rows[i, 1]
                    continue
                sp -= 1
            elif op == 51:  # OR_ELSE: true decides
                if stack[sp - 1] != 0.0:
                    i = rows[i, 1]
                    continue
                sp -= 1
            elif op == 52:  # IF_NOT: pop the condition, jump to the else branch when false
                sp -= 1
                if stack[sp] == 0.0:
                    i = rows[i, 1]
                    continue
            else:  # GOTO
                i = rows[i, 1]
                continue
        elif op == 0:
            stack[sp] = consts[rows[i, 1]]
            sp += 1
        elif op == 1:
            stack[sp] = vals[rows[i, 1]]
            sp += 1
        elif op < 10:
            x = stack[sp - 1]
            if op == 2:
                stack[sp - 1] = 1.0 if x == 0.0 else 0.0
            elif op == 3:
                stack[sp - 1] = -x
            elif op == 4:
                stack[sp - 1] = np.floor(x)
            else:
                stack[sp - 1] = np.ceil(x)
        else:
            y = stack[sp - 1]
            x = stack[sp - 2]
            sp -= 1
            if op == 10:
                r = x + y
            elif op == 11:
                r = x - y
            elif op == 12:
                r = x * y
            elif op == 13:
                r = x / y if y != 0.0 else (np.inf if x > 0 else (-np.inf if x < 0 else np.nan))
            elif op == 14:
                r = min(x, y)
            elif op == 15:
                r = max(x, y)
            elif op == 16:
                r = x**y
            elif op == 17:
                r = np.fmod(x, y) if y != 0.0 else np.nan
            elif op == 22:
                r = 1.0 if ((x != 0.0) != (y != 0.0)) else 0.0
            elif op == 23:
                r = 1.0 if ((x != 0.0) == (y != 0.0)) else 0.0
            elif op == 24:
                r = 1.0 if (x == 0.0 or y != 0.0) else 0.0
            elif op == 30:
                r = 1.0 if x == y else 0.0
            elif op == 31:
                r = 1.0 if x != y else 0.0
            elif op == 32:
                r = 1.0 if x < y else 0.0
            elif op == 33:
                r = 1.0 if x <= y else 0.0
            elif op == 34:
                r = 1.0 if x > y else 0.0
            else:
                r = 1.0 if x >= y else 0.0
            stack[sp - 1] = r
        i += 1
    return stack[0]


def _grow(a, need):
    """``a``, or a copy twice as long (at least ``need``) when ``need`` exceeds it."""
    if need <= a.shape[0]:
        return a
    out = np.empty(max(need, 2 * a.shape[0]), a.dtype)
    out[: a.shape[0]] = a
    return out


def _find(table, key, bits):
    """Slot of ``key`` in the table of ``(key, state)`` rows (an empty slot, state -1, when absent).

    Key and state share a row, so a probe touches one cache line: at millions of states the
    table's cache misses are most of the exploration's time."""
    size_mask = table.shape[0] - 1
    h = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))
    while True:
        if table[h, 1] < 0 or table[h, 0] == key:
            return h
        h = (h + 1) & size_mask


def _dense(key, shift, mask, stride):
    """Index of packed ``key`` in the dense table (see ``_explore``'s ``stride``)."""
    h = np.int64(0)
    for j in range(stride.shape[0]):
        h += ((key >> shift[j]) & mask[j]) * stride[j]
    return h


def _rehash(keys, n, bits):
    table = np.full((np.int64(1) << bits, 2), -1, np.int64)
    for s in range(n):
        h = _find(table, keys[s], bits)
        table[h, 0] = keys[s]
        table[h, 1] = s
    return table


def _explore(
    init, lo, hi, shift, mask,
    rows, consts, start, depth,
    cmd_guard, cmd_pre_ptr, pre_var, pre_lo, pre_hi, cmd_upd_ptr, upd_prob, upd_pval, upd_clear, upd_set,
    upd_asg_ptr, asg_var, asg_expr, asg_src, asg_delta,
    gen_part_ptr, part_key, part_base, bucket_ptr, bucket_cmd,
    is_dtmc, max_states, stride, index,
):
    """Explore from ``init``; return ``(status, info, keys, row_groups, indptr, targets, probs, choice_gen)``.

    ``choice_gen`` is the generator (unlabelled command or synchronising action) of each choice, -1
    for the self-loop Storm adds to deadlock states. ``status`` is ``OK`` or why exploration stopped;
    for ``OUT_OF_BOUNDS`` ``info`` is (state, variable, value, command).

    ``stride``: empty to number states through the hash table; else one stride per variable, and
    states are numbered through ``index``, a dense table over every valuation (position
    ``sum((v - lo) * stride)``, variables in their packing order; state + 1, 0 for none yet, so that
    the caller's ``np.zeros`` leaves pages never touched unallocated): no probing, and neighbouring
    valuations (a counter one up) sit near each other, where the hash scatters them, so most
    lookups hit the cache.
    """
    info = np.full(4, -1, np.int64)
    nv = lo.shape[0]
    n_gen = gen_part_ptr.shape[0] - 1
    bits = 10
    keys = np.empty(1024, np.int64)
    keys[0] = init
    dense = stride.shape[0] > 0
    if dense:
        index[_dense(init, shift, mask, stride)] = 1
        table = np.empty((1, 2), np.int64)
    else:
        table = _rehash(keys, 1, bits)
    n = 1
    row_groups = np.empty(1025, np.int64)
    row_groups[0] = 0
    indptr = np.empty(1025, np.int64)
    indptr[0] = 0
    choice_gen = np.empty(1024, np.int64)
    targets = np.empty(4096, np.int64)
    probs = np.empty(4096, np.float64)
    n_choices = 0
    n_trans = 0
    vals = np.empty(nv, np.float64)
    stack = np.empty(depth + 1, np.float64)
    enabled = np.empty(cmd_guard.shape[0] + 1, np.int64)
    n_parts_max = 1
    for g in range(n_gen):
        n_parts_max = max(n_parts_max, gen_part_ptr[g + 1] - gen_part_ptr[g])
    en_ptr = np.empty(n_parts_max + 1, np.int64)
    odo = np.zeros(n_parts_max, np.int64)
    d_key = np.empty(64, np.int64)
    d_prob = np.empty(64, np.float64)
    e_key = np.empty(64, np.int64)
    e_prob = np.empty(64, np.float64)
    ids = np.empty(64, np.int64)
    s = 0
    while s < n:
        code = keys[s]
        for j in range(nv):
            vals[j] = np.float64(((code >> shift[j]) & mask[j]) + lo[j])
        first_choice = n_choices
        for g in range(n_gen):
            p0 = gen_part_ptr[g]
            p1 = gen_part_ptr[g + 1]
            k = 0
            empty = False
            for p in range(p0, p1):
                en_ptr[p - p0] = k
                b = part_base[p]
                key = part_key[p]
                if key >= 0:
                    b += (code >> shift[key]) & mask[key]
                for q in range(bucket_ptr[b], bucket_ptr[b + 1]):
                    c = bucket_cmd[q]
                    ok = True
                    for t in range(cmd_pre_ptr[c], cmd_pre_ptr[c + 1]):
                        j = pre_var[t]
                        v = ((code >> shift[j]) & mask[j]) + lo[j]
                        if v < pre_lo[t] or v > pre_hi[t]:
                            ok = False
                            break
                    e = cmd_guard[c]
                    if ok and e >= 0:
                        ok = _evaluate(rows, consts, start[e], start[e + 1], vals, stack) != 0.0
                    if ok:
                        enabled[k] = c
                        k += 1
                if k == en_ptr[p - p0]:
                    empty = True
                    break
            if empty:
                continue
            n_parts = p1 - p0
            en_ptr[n_parts] = k
            for i in range(n_parts):
                odo[i] = 0
            while True:
                # the distribution of this combination of commands: one update of each, multiplied
                nd = 1
                d_key[0] = code
                d_prob[0] = 1.0
                for i in range(n_parts):
                    c = enabled[en_ptr[i] + odo[i]]
                    u0 = cmd_upd_ptr[c]
                    u1 = cmd_upd_ptr[c + 1]
                    total = 0.0
                    ne = 0
                    e_key = _grow(e_key, nd * (u1 - u0))
                    e_prob = _grow(e_prob, nd * (u1 - u0))
                    for u in range(u0, u1):
                        e = upd_prob[u]
                        pu = upd_pval[u] if e < 0 else _evaluate(rows, consts, start[e], start[e + 1], vals, stack)
                        if not (pu >= 0.0) or pu > 1.0 + 1e-6:
                            return BAD_PROBABILITY, info, keys[:n], row_groups[:1], indptr[:1], targets[:0], probs[:0], choice_gen[:0]
                        total += pu
                        if pu == 0.0:  # Storm drops updates of probability 0
                            continue
                        change_clear = upd_clear[u]
                        change_set = upd_set[u]
                        for a in range(upd_asg_ptr[u], upd_asg_ptr[u + 1]):
                            j = asg_var[a]
                            e = asg_expr[a]
                            if e < 0:  # a counter: variable + delta
                                x = vals[asg_src[a]] + asg_delta[a]
                            else:
                                x = _evaluate(rows, consts, start[e], start[e + 1], vals, stack)
                            xi = np.int64(x)
                            if xi != x or xi < lo[j] or xi > hi[j]:
                                info[0] = s
                                info[1] = j
                                info[2] = xi
                                info[3] = c
                                return OUT_OF_BOUNDS, info, keys[:n], row_groups[:1], indptr[:1], targets[:0], probs[:0], choice_gen[:0]
                            change_clear |= mask[j] << shift[j]
                            change_set |= (xi - lo[j]) << shift[j]
                        for r in range(nd):
                            e_key[ne] = (d_key[r] & ~change_clear) | change_set
                            e_prob[ne] = d_prob[r] * pu
                            ne += 1
                    if abs(total - 1.0) > 1e-6:
                        return NOT_ONE, info, keys[:n], row_groups[:1], indptr[:1], targets[:0], probs[:0], choice_gen[:0]
                    d_key, e_key = e_key, d_key
                    d_prob, e_prob = e_prob, d_prob
                    nd = ne
                # number the targets (new states in order of appearance), then sort and merge
                ids = _grow(ids, nd)
                for r in range(nd):
                    key = d_key[r]
                    if dense:
                        h = _dense(key, shift, mask, stride)
                        t = np.int64(index[h]) - 1
                    else:
                        h = _find(table, key, bits)
                        t = table[h, 1]
                    if t < 0:
                        if n >= max_states:
                            return TOO_MANY, info, keys[:n], row_groups[:1], indptr[:1], targets[:0], probs[:0], choice_gen[:0]
                        keys = _grow(keys, n + 1)
                        keys[n] = key
                        t = n
                        n += 1
                        if dense:
                            index[h] = t + 1
                        else:
                            table[h, 0] = key
                            table[h, 1] = t
                            if 2 * n > table.shape[0]:
                                bits += 1
                                table = _rehash(keys, n, bits)
                    ids[r] = t
                # insertion sort by target (distributions are short), equal targets merged
                targets = _grow(targets, n_trans + nd)
                probs = _grow(probs, n_trans + nd)
                m0 = n_trans
                for r in range(nd):
                    t = ids[r]
                    pr = d_prob[r]
                    k = n_trans
                    while k > m0 and targets[k - 1] > t:
                        k -= 1
                    if k > m0 and targets[k - 1] == t:
                        probs[k - 1] += pr
                        continue
                    for q in range(n_trans, k, -1):
                        targets[q] = targets[q - 1]
                        probs[q] = probs[q - 1]
                    targets[k] = t
                    probs[k] = pr
                    n_trans += 1
                choice_gen = _grow(choice_gen, n_choices + 1)
                indptr = _grow(indptr, n_choices + 2)
                choice_gen[n_choices] = g
                n_choices += 1
                indptr[n_choices] = n_trans
                # next combination (the last module varies fastest)
                i = n_parts - 1
                while i >= 0:
                    odo[i] += 1
                    if odo[i] < en_ptr[i + 1] - en_ptr[i]:
                        break
                    odo[i] = 0
                    i -= 1
                if i < 0:
                    break
        if n_choices == first_choice:
            targets = _grow(targets, n_trans + 1)
            probs = _grow(probs, n_trans + 1)
            targets[n_trans] = s
            probs[n_trans] = 1.0
            n_trans += 1
            choice_gen = _grow(choice_gen, n_choices + 1)
            indptr = _grow(indptr, n_choices + 2)
            choice_gen[n_choices] = -1
            n_choices += 1
            indptr[n_choices] = n_trans
        elif is_dtmc and n_choices - first_choice > 1:
            return NONDETERMINISTIC_DTMC, info, keys[:n], row_groups[:1], indptr[:1], targets[:0], probs[:0], choice_gen[:0]
        row_groups = _grow(row_groups, s + 2)
        row_groups[s + 1] = n_choices
        s += 1
    return OK, info, keys[:n], row_groups[: n + 1], indptr[: n_choices + 1], targets[:n_trans], probs[:n_trans], choice_gen[:n_choices]


def _decode(keys, lo, shift, mask):
    """Variable values of each packed state, ``(n_states, n_vars)`` int64."""
    out = np.empty((keys.shape[0], lo.shape[0]), np.int64)
    for s in range(keys.shape[0]):
        for j in range(lo.shape[0]):
            out[s, j] = ((keys[s] >> shift[j]) & mask[j]) + lo[j]
    return out


def _unpack(key, lo, shift, mask, vals):
    for j in range(lo.shape[0]):
        vals[j] = np.float64(((key >> shift[j]) & mask[j]) + lo[j])


def _item_holds(i, key, vals, lo, shift, mask, pre_ptr, pre_var, pre_lo, pre_hi):
    """Whether item ``i``'s range tests (a reward item's, a label's) hold at the packed state ``key``."""
    for t in range(pre_ptr[i], pre_ptr[i + 1]):
        j = pre_var[t]
        v = ((key >> shift[j]) & mask[j]) + lo[j]
        if v < pre_lo[t] or v > pre_hi[t]:
            return False
    return True


def _choice_rewards(
    rows, consts, start, depth, keys, lo, shift, mask, row_groups, choice_gen, gen_action, n_models,
    it_model, it_action, it_guard, it_expr, it_value, pre_ptr, pre_var, pre_lo, pre_hi,
):
    """Every reward model's value at every choice, ``(n_models, n_choices)``: item ``i`` of model
    ``it_model[i]`` is a state item (``it_action[i] == -1``, at every choice of the state but the
    deadlock self-loop, generator -1) or one of generators ``g`` with ``gen_action[g] ==
    it_action[i]``; it counts where its range tests (``pre_*[pre_ptr[i]:pre_ptr[i+1]]``) and its
    guard expression (-1: none) hold, with value ``it_value[i]`` or expression ``it_expr[i]``.
    A choice's reward is its state items' sum plus its action items' sum, each summed in the items'
    order (as the guarded sums Storm's builder adds up)."""
    out = np.zeros((n_models, choice_gen.shape[0]), np.float64)
    state_r = np.zeros(n_models, np.float64)
    action_r = np.zeros(n_models, np.float64)
    vals = np.empty(lo.shape[0], np.float64)
    stack = np.empty(depth + 1, np.float64)
    for s in range(row_groups.shape[0] - 1):
        key = keys[s]
        unpacked = False
        # c = row_groups[s] - 1 sums the state items into state_r; each choice after it its
        # action's items into action_r (one loop body for both, with no per-state call)
        for c in range(row_groups[s] - 1, row_groups[s + 1]):
            if c < row_groups[s]:
                action, acc = -1, state_r
            else:
                g = choice_gen[c]
                if g < 0:
                    continue
                action, acc = gen_action[g], action_r
            for m in range(n_models):
                acc[m] = 0.0
            for i in range(it_model.shape[0]):
                if it_action[i] != action or not _item_holds(i, key, vals, lo, shift, mask, pre_ptr, pre_var, pre_lo, pre_hi):
                    continue
                if (it_guard[i] >= 0 or it_expr[i] >= 0) and not unpacked:
                    _unpack(key, lo, shift, mask, vals)
                    unpacked = True
                e = it_guard[i]
                if e >= 0 and _evaluate(rows, consts, start[e], start[e + 1], vals, stack) == 0.0:
                    continue
                e = it_expr[i]
                acc[it_model[i]] += it_value[i] if e < 0 else _evaluate(rows, consts, start[e], start[e + 1], vals, stack)
            if c >= row_groups[s]:
                for m in range(n_models):
                    out[m, c] = state_r[m] + action_r[m]
    return out


def _state_labels(rows, consts, start, depth, keys, lo, shift, mask, l_expr, pre_ptr, pre_var, pre_lo, pre_hi):
    """Every label at every packed state, ``(n_labels, n_states)``, in one pass: label ``i`` holds
    where its range tests (``pre_*[pre_ptr[i]:pre_ptr[i+1]]``, on the packed state) and its
    expression ``l_expr[i]`` (-1: none) hold; a state is unpacked once, and only when some label
    needs its expression there."""
    n_labels = l_expr.shape[0]
    out = np.zeros((n_labels, keys.shape[0]), np.bool_)
    vals = np.empty(lo.shape[0], np.float64)
    stack = np.empty(depth + 1, np.float64)
    for s in range(keys.shape[0]):
        key = keys[s]
        unpacked = False
        for i in range(n_labels):
            if not _item_holds(i, key, vals, lo, shift, mask, pre_ptr, pre_var, pre_lo, pre_hi):
                continue
            e = l_expr[i]
            if e < 0:
                out[i, s] = True
                continue
            if not unpacked:
                _unpack(key, lo, shift, mask, vals)
                unpacked = True
            out[i, s] = _evaluate(rows, consts, start[e], start[e + 1], vals, stack) != 0.0
    return out


_HELPERS = ("_evaluate", "_grow", "_find", "_dense", "_rehash", "_unpack", "_item_holds")
_ENTRIES = ("_explore", "_decode", "_state_labels", "_choice_rewards")
_LOCK = threading.Lock()
_compiled: dict = {}


def _kernel(name: str):
    """The compiled ``name``; the first call compiles (or loads from numba's cache) every kernel here.

    The helpers replace their plain versions among this module's globals before the entry points
    compile, so the entry points call compiled helpers.
    """
    if not _compiled:
        with _LOCK:
            if not _compiled:
                from mopmc.engine.numba_kernels import jit

                g = globals()
                for helper in _HELPERS:
                    g[helper] = jit(g[helper])
                for entry in _ENTRIES:
                    _compiled[entry] = jit(g[entry])
    return _compiled[name]


def load_kernels() -> None:
    """Compile (or load from numba's cache) every kernel here now."""
    _kernel("_explore")


def explore(*args):
    return _kernel("_explore")(*args)


explore.__doc__ = _explore.__doc__


def decode(keys, lo, shift, mask):
    """Variable values of each packed state, ``(n_states, n_vars)`` int64."""
    return _kernel("_decode")(keys, lo, shift, mask)


def state_labels(*args):
    """Every label at every packed state (see ``_state_labels``)."""
    return _kernel("_state_labels")(*args)


def choice_rewards(*args):
    """Every reward model's vector over the choices (see ``_choice_rewards``)."""
    return _kernel("_choice_rewards")(*args)
