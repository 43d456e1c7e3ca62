"""The explorer's compiled kernels (see :mod:`mopmc.io.explicit.explore`): bytecode evaluation, one
exploration step (generate and number states' choices), the reward and label passes.

Every kernel is compiled once, at the first :func:`kernel` call, and cached (``numba_kernels.jit``).
"""

from __future__ import annotations

import threading

import numpy as np

OK, OUT_OF_BOUNDS, NONDETERMINISTIC_DTMC, BAD_PROBABILITY, NOT_ONE, TOO_MANY = 0, 1, 2, 3, 4, 5
NEED_ROOM = 6  # (internal) an array is too small: grow it and go on

# ``_step``'s ``need`` slots: the length an array (or pair of arrays) needs after ``NEED_ROOM``
(ROOM_KEYS, ROOM_ROW_GROUPS, ROOM_INDPTR, ROOM_TARGETS, ROOM_CHOICE_GEN, ROOM_IDS, ROOM_TABLE,  # the exploration's
 ROOM_STATE_END, ROOM_CHOICES, ROOM_ENTRIES, ROOM_WORK) = range(11)  # a chunk's (choices: gen and end; entries: key and prob)
N_ROOM = 11


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
    """Index of packed ``key`` in the dense table (see :func:`explore`'s ``stride``)."""
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


def _start(init, shift, mask, stride, index):
    """A new exploration holding the initial state: ``(keys, table, row_groups, indptr, targets,
    probs, choice_gen, ids, counts)``, ``counts`` = (states, states done, choices, transitions, hash
    bits)."""
    keys = np.empty(1024, np.int64)
    keys[0] = init
    bits = 10
    if stride.shape[0] > 0:
        index[_dense(init, shift, mask, stride)] = 1
        table = np.empty((1, 2), np.int64)
    else:
        table = _rehash(keys, 1, bits)
    row_groups = np.empty(1025, np.int64)
    row_groups[0] = 0
    indptr = np.empty(1025, np.int64)
    indptr[0] = 0
    counts = np.array([1, 0, 0, 0, bits], np.int64)
    return (keys, table, row_groups, indptr, np.empty(4096, np.int64), np.empty(4096, np.float64),
            np.empty(1024, np.int64), np.empty(64, np.int64), counts)


def _step(
    prog, depth, is_dtmc, max_states, stride, index,
    keys, table, row_groups, indptr, targets, probs, choice_gen, ids, counts, info, need,
    pending, c_lo, c_hi, c_status, c_info, c_state_end, c_gen, c_end, c_key, c_prob, work_key, work_prob,
    generate_only,
):
    """One step of an exploration; returns its status (``NEED_ROOM``: grow the arrays ``need`` names
    and call again).

    The exploration (``_start``'s arrays, ``counts``) goes state by state in order of discovery:
    generate the state's choices (guards, updates: each choice's successors as packed states with
    their probabilities, in ``c_gen`` (the generator), ``c_end``, ``c_key``, ``c_prob``), then
    number the successors (new states in order of appearance) and sort and merge them into the
    CSR. Generating needs no numbering, so the choices of known states can be generated elsewhere:

    - ``generate_only``: generate the choices of states ``counts[1] .. c_hi - 1`` (``keys`` is only
      read) into the ``c_*`` arrays, state ``c_lo + i``'s choices ``c_state_end[i] ..
      c_state_end[i + 1] - 1``; at an error, stop (``info[0]`` is the state) with the choices that
      state completed before it.
    - otherwise, with a chunk (``c_lo < c_hi``): number the chunk's states (``generate_only``'s
      output, its status ``c_status`` and ``c_info``), and stop after them;
    - without (``c_lo == c_hi``): generate and number until every state is done, or ``pending``
      or more states are known and not done (so that they can be generated in parallel).

    No array is replaced here (the caller grows them): arrays assigned in a loop cost numba two
    atomic reference counts each time. A state is done all at once or not at all, so the call
    after ``NEED_ROOM`` starts again with it. The numbering, choices and probabilities are the
    sequential exploration's whether or not chunks were generated elsewhere.
    """
    (lo, hi, shift, mask, rows, consts, start, cmd_guard, cmd_pre_ptr, pre_var, pre_lo, pre_hi, cmd_upd_ptr,
     upd_prob, upd_pval, upd_clear, upd_set, upd_asg_ptr, asg_var, asg_expr, asg_src, asg_delta,
     gen_part_ptr, part_key, part_base, bucket_ptr, bucket_cmd) = prog
    n_gen = gen_part_ptr.shape[0] - 1
    vals = np.empty(lo.shape[0], np.float64)
    stack = np.empty(depth + 1, np.float64)
    enabled = np.empty(cmd_guard.shape[0] + 1, np.int64)
    n_parts_max = 1
    for g in range(n_gen):
        n_parts_max = max(n_parts_max, gen_part_ptr[g + 1] - gen_part_ptr[g])
    en_ptr = np.empty(n_parts_max + 1, np.int64)
    odo = np.zeros(n_parts_max, np.int64)
    n, s, n_choices, n_trans, bits = counts[0], counts[1], counts[2], counts[3], counts[4]
    dense = stride.shape[0] > 0
    size_mask = table.shape[0] - 1
    chunk = c_lo < c_hi and not generate_only
    work = work_key.shape[1]
    status = OK
    while True:
        if generate_only:
            if s >= c_hi:
                break
        elif s >= n or (s >= c_hi if chunk else n - s >= pending):
            break
        gen_status = OK
        if chunk:
            c0 = c_state_end[s - c_lo]
            n_c = c_state_end[s - c_lo + 1]
            if s == c_hi - 1 and c_status != OK:
                gen_status = c_status
                info[:] = c_info
        else:
            # generate the state's choices
            n_c = c_state_end[s - c_lo] if generate_only else 0
            c0 = n_c
            code = keys[s]
            for j in range(lo.shape[0]):
                vals[j] = np.float64(((code >> shift[j]) & mask[j]) + lo[j])
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
                    # the distribution of this combination of commands: one update of each,
                    # multiplied (in work row ``cur``); the last part's products go to the output
                    if n_c + 2 > c_end.shape[0] or n_c + 1 > c_gen.shape[0]:
                        need[ROOM_CHOICES] = n_c + 2
                        gen_status = NEED_ROOM
                        break
                    nd = 1
                    cur = 0
                    work_key[0, 0] = code
                    work_prob[0, 0] = 1.0
                    base = c_end[n_c]
                    for i in range(n_parts):
                        c = enabled[en_ptr[i] + odo[i]]
                        u0 = cmd_upd_ptr[c]
                        u1 = cmd_upd_ptr[c + 1]
                        last = i == n_parts - 1
                        if last and base + nd * (u1 - u0) > c_key.shape[0]:
                            need[ROOM_ENTRIES] = base + nd * (u1 - u0)
                            gen_status = NEED_ROOM
                            break
                        if not last and nd * (u1 - u0) > work:
                            need[ROOM_WORK] = nd * (u1 - u0)
                            gen_status = NEED_ROOM
                            break
                        ne = base if last else 0
                        total = 0.0
                        for u in range(u0, u1):
                            e = upd_prob[u]
                            pu = upd_pval[u] if e < 0 else _evaluate(rows, consts, start[e], start[e + 1], vals, stack)
                            if not (pu >= 0.0) or pu > 1.0 + 1e-6:
                                gen_status = BAD_PROBABILITY
                                break
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
                                    gen_status = OUT_OF_BOUNDS
                                    break
                                change_clear |= mask[j] << shift[j]
                                change_set |= (xi - lo[j]) << shift[j]
                            if gen_status != OK:
                                break
                            if last:
                                for r in range(nd):
                                    c_key[ne] = (work_key[cur, r] & ~change_clear) | change_set
                                    c_prob[ne] = work_prob[cur, r] * pu
                                    ne += 1
                            else:
                                for r in range(nd):
                                    work_key[1 - cur, ne] = (work_key[cur, r] & ~change_clear) | change_set
                                    work_prob[1 - cur, ne] = work_prob[cur, r] * pu
                                    ne += 1
                        if gen_status == OK and abs(total - 1.0) > 1e-6:
                            gen_status = NOT_ONE
                        if gen_status != OK:
                            break
                        if last:
                            nd = ne - base
                        else:
                            cur = 1 - cur
                            nd = ne
                    if gen_status != OK:
                        break
                    c_gen[n_c] = g
                    c_end[n_c + 1] = base + nd
                    n_c += 1
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
                if gen_status != OK:
                    break
            if gen_status == NEED_ROOM:
                status = NEED_ROOM
                break
            if generate_only:
                if s - c_lo + 2 > c_state_end.shape[0]:
                    need[ROOM_STATE_END] = s - c_lo + 2
                    status = NEED_ROOM
                    break
                c_state_end[s - c_lo + 1] = n_c
                if gen_status != OK:
                    info[0] = s
                    status = gen_status
                    break
                s += 1
                continue
        # room for the state's share of the CSR, so that it is numbered all at once
        n_entries = c_end[n_c] - c_end[c0]
        n_new = max(n_c - c0, 1)
        if n + n_entries > keys.shape[0]:
            need[ROOM_KEYS] = n + n_entries
            status = NEED_ROOM
        if s + 2 > row_groups.shape[0]:
            need[ROOM_ROW_GROUPS] = s + 2
            status = NEED_ROOM
        if n_choices + n_new + 1 > indptr.shape[0]:
            need[ROOM_INDPTR] = n_choices + n_new + 1
            status = NEED_ROOM
        if n_choices + n_new > choice_gen.shape[0]:
            need[ROOM_CHOICE_GEN] = n_choices + n_new
            status = NEED_ROOM
        if n_trans + max(n_entries, 1) > targets.shape[0]:
            need[ROOM_TARGETS] = n_trans + max(n_entries, 1)
            status = NEED_ROOM
        if n_entries > ids.shape[0]:
            need[ROOM_IDS] = n_entries
            status = NEED_ROOM
        if not dense and 2 * (n + n_entries) > table.shape[0]:
            need[ROOM_TABLE] = 2 * (n + n_entries)
            status = NEED_ROOM
        if status != OK:
            break
        first_choice = n_choices
        for c in range(c0, n_c):
            e0 = c_end[c]
            nd = c_end[c + 1] - e0
            # number the targets (new states in order of appearance), then sort and merge; the
            # lookups are _dense's and _find's written out: a call per target that passes arrays
            # costs numba two reference counts for each
            for r in range(nd):
                key = c_key[e0 + r]
                if dense:
                    h = 0
                    for j in range(stride.shape[0]):
                        h += ((key >> shift[j]) & mask[j]) * stride[j]
                    t = np.int64(index[h]) - 1
                else:
                    h = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))
                    while table[h, 1] >= 0 and table[h, 0] != key:
                        h = (h + 1) & size_mask
                    t = table[h, 1]
                if t < 0:
                    if n >= max_states:
                        status = TOO_MANY
                        break
                    keys[n] = key
                    t = n
                    n += 1
                    if dense:
                        index[h] = t + 1
                    else:
                        table[h, 0] = key
                        table[h, 1] = t
                ids[r] = t
            if status != OK:
                break
            # insertion sort by target (distributions are short), equal targets merged
            m0 = n_trans
            for r in range(nd):
                t = ids[r]
                pr = c_prob[e0 + r]
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
            choice_gen[n_choices] = c_gen[c]
            n_choices += 1
            indptr[n_choices] = n_trans
        if status == OK:
            status = gen_status
        if status != OK:
            break
        if n_choices == first_choice:  # no enabled command: a self-loop (as Storm's builder adds)
            targets[n_trans] = s
            probs[n_trans] = 1.0
            n_trans += 1
            choice_gen[n_choices] = -1
            n_choices += 1
            indptr[n_choices] = n_trans
        elif is_dtmc and n_choices - first_choice > 1:
            status = NONDETERMINISTIC_DTMC
            break
        row_groups[s + 1] = n_choices
        s += 1
    counts[1] = s
    if not generate_only:
        counts[0], counts[2], counts[3] = n, n_choices, n_trans
    return status


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
    out, s0, s1, rows, consts, start, depth, keys, lo, shift, mask, row_groups, choice_gen, gen_action, n_models,
    it_model, it_action, it_guard, it_expr, it_value, pre_ptr, pre_var, pre_lo, pre_hi,
):
    """Every reward model's value at the choices of states ``s0 .. s1 - 1``, into ``out`` (``(n_models,
    n_choices)``, zeros there): item ``i`` of model
    ``it_model[i]`` is a state item (``it_action[i] == -1``, at every choice of the state but the
    deadlock self-loop, generator -1) or one of generators ``g`` with ``gen_action[g] ==
    it_action[i]``; it counts where its range tests (``pre_*[pre_ptr[i]:pre_ptr[i+1]]``) and its
    guard expression (-1: none) hold, with value ``it_value[i]`` or expression ``it_expr[i]``.
    A choice's reward is its state items' sum plus its action items' sum, each summed in the items'
    order (as the guarded sums Storm's builder adds up)."""
    state_r = np.zeros(n_models, np.float64)
    action_r = np.zeros(n_models, np.float64)
    vals = np.empty(lo.shape[0], np.float64)
    stack = np.empty(depth + 1, np.float64)
    for s in range(s0, s1):
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


def _state_labels(out, s0, s1, rows, consts, start, depth, keys, lo, shift, mask, l_expr, pre_ptr, pre_var, pre_lo,
                  pre_hi):
    """Every label at packed states ``s0 .. s1 - 1``, into ``out`` (``(n_labels, n_states)``, false
    there), in one pass: label ``i`` holds
    where its range tests (``pre_*[pre_ptr[i]:pre_ptr[i+1]]``, on the packed state) and its
    expression ``l_expr[i]`` (-1: none) hold; a state is unpacked once, and only when some label
    needs its expression there."""
    n_labels = l_expr.shape[0]
    vals = np.empty(lo.shape[0], np.float64)
    stack = np.empty(depth + 1, np.float64)
    for s in range(s0, s1):
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


def _zeros(rows, cols):
    """``np.zeros((rows, cols))`` allocated by numba: its rows are adopted by ``SparseMDP`` without
    a copy (memory a kernel handed over, which no one else holds; see ``sparse_mdp._immutable``)."""
    return np.zeros((rows, cols), np.float64)


def _zeros_bool(rows, cols):
    """``_zeros`` of booleans."""
    return np.zeros((rows, cols), np.bool_)


_HELPERS = ("_evaluate", "_find", "_dense", "_rehash", "_unpack", "_item_holds")
_ENTRIES = ("_start", "_step", "_decode", "_state_labels", "_choice_rewards", "_zeros", "_zeros_bool")
_LOCK = threading.Lock()
_compiled: dict = {}


def kernel(name: str):
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
                _compiled["_rehash"] = g["_rehash"]
    return _compiled[name]


