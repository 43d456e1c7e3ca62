"""The compiled explorer: breadth-first state exploration of a compiled PRISM program.

States are packed into one int64 (each variable ``j`` in ``mask[j]`` bits at ``shift[j]``, stored as
value - ``lo[j]``) and numbered in order of discovery through a dense table over every valuation
or an open-addressing hash table. Choices come in Storm's order: unlabelled commands module by
module, then each synchronising action (the product of one enabled command per module that has the
action, the last module varying fastest). A choice's transitions are sorted by target and duplicate
targets summed, as Storm's builder does.

A state is handled in two halves: generating its choices (guards, updates, packed successors),
which needs nothing but the state, and numbering them into the CSR, which must go in order. Where
many known states wait, worker threads (:mod:`mopmc.workers`) generate them in chunks
while the calling thread numbers the chunks before, so the result is the sequential exploration's
bit for bit. Every kernel is compiled once and cached (``numba_kernels.jit``).
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from contextlib import contextmanager

import numpy as np

from mopmc import workers as pool
from mopmc.io.explicit import kernels
from mopmc.io.explicit.kernels import NEED_ROOM, OK, OUT_OF_BOUNDS  # noqa: F401 (OUT_OF_BOUNDS: program.py reads it here)
from mopmc.io.explicit.kernels import kernel as _kernel


def load_kernels() -> None:
    """Compile (or load from numba's cache) every kernel here now."""
    _kernel("_step")


CHUNK = 2048  # states generated per task of the parallel exploration
MIN_CHUNK = 512  # fewer known states than this are not worth a task


def explore(init, lo, hi, shift, mask, rows, consts, start, depth, *rest, threads: int | None = None):
    """Explore from ``init``; return ``(status, info, keys, row_groups, indptr, targets, probs, choice_gen)``.

    ``rest``: the command and generator tables (``program._commands``), then ``is_dtmc``,
    ``max_states``, ``stride`` and ``index``. ``choice_gen`` is the generator (unlabelled command or
    synchronising action) of each choice, -1 for the self-loop Storm adds to deadlock states.
    ``status`` is ``OK`` or why exploration stopped; for ``OUT_OF_BOUNDS`` ``info`` is (state,
    variable, value, command).

    ``stride``: empty to number states through the hash table; else one stride per variable, and
    states are numbered through ``index``, a dense table over every valuation (position
    ``sum((v - lo) * stride)``, variables in their packing order; state + 1, 0 for none yet, so that
    the caller's ``np.zeros`` leaves pages never touched unallocated): no probing, and neighbouring
    valuations (a counter one up) sit near each other, where the hash scatters them, so most
    lookups hit the cache.

    States are numbered in order of discovery. Where many states are known and not yet explored
    (a wide breadth-first level), their choices are generated in parallel (``threads`` workers,
    default :func:`mopmc.workers.count`; 0: none) in chunks while this thread numbers
    the successors of the chunks before, in order: the numbering, the choices and every
    probability are the sequential exploration's, bit for bit.
    """
    *tables, is_dtmc, max_states, stride, index = rest
    prog = (lo, hi, shift, mask, rows, consts, start, *tables)
    step = _kernel("_step")
    keys, table, row_groups, indptr, targets, probs, choice_gen, ids, counts = _kernel("_start")(init, shift, mask, stride, index)
    state = [keys, table, row_groups, indptr, targets, probs, choice_gen, ids]
    fixed = (prog, depth, is_dtmc, max_states, stride, index)
    info = np.full(4, -1, np.int64)
    need = np.zeros(kernels.N_ROOM, np.int64)
    n_workers = pool.count() if threads is None else threads
    never = np.int64(np.iinfo(np.int64).max)
    pending = np.int64(2 * MIN_CHUNK if n_workers else never)
    zero, ok = np.int64(0), np.int64(OK)
    scratch = _buffers(0)  # one state's choices, where this thread generates them
    queue: deque = deque()
    scheduled = 0
    with _short_switch_interval():
        while True:
            if queue:
                c_lo, task = queue.popleft()
                c_hi, c_status, c_info, *buffers = task.result()
                head = (pending, np.int64(c_lo), c_hi, c_status, c_info)
            else:  # nothing generated ahead: go on here until enough states are known to share out
                head, buffers = (pending, zero, zero, ok, info), scratch
            while (status := step(*fixed, *state, counts, info, need, *head, *buffers, False)) == NEED_ROOM:
                _make_room(state, counts, need)
                _grow_chunk(buffers, need)
            if not queue:
                scheduled = int(counts[1])
            if status != OK or (not queue and counts[1] == counts[0]):
                break
            n = int(counts[0])
            while len(queue) < 4 * n_workers and n - scheduled >= MIN_CHUNK:
                end = min(n, scheduled + CHUNK)
                queue.append((scheduled, pool.submit(_generate_chunk, step, fixed, tuple(state), scheduled, end)))
                scheduled = end
    for _, task in queue:  # after an error: let the tasks in flight finish before their arrays go
        task.result()
    keys, _, row_groups, indptr, targets, probs, choice_gen, _ = state
    n, _, n_choices, n_trans, _ = (int(x) for x in counts)
    if status != OK:
        return status, info, keys[:n], row_groups[:1], indptr[:1], targets[:0], probs[:0], choice_gen[:0]
    sizes = (n, n + 1, n_choices + 1, n_trans, n_trans, n_choices)
    return OK, info, *(_trimmed(a, size) for a, size in zip((keys, row_groups, indptr, targets, probs, choice_gen), sizes))


# seconds: the longest a thread that wants the GIL waits for it (Python's default is 5 ms). The
# exploration takes the GIL back after every chunk and every NEED_ROOM: where another thread keeps
# it busy (a pure-Python loop beside Model A n=200's exploration) that took 10 s with one worker
# instead of 0.4 s, and 1.0-1.2 s without workers; 0.5-1.2 s and 0.45-0.6 s with 0.1 ms.
_SWITCH_INTERVAL = 1e-4
_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved = 0.0


@contextmanager
def _short_switch_interval():
    """While the exploration runs, a thread that holds the GIL hands it over after
    ``_SWITCH_INTERVAL`` (the previous interval comes back when the last exploration ends)."""
    global _switch_users, _switch_saved
    with _switch_lock:
        if _switch_users == 0:
            _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_switch_saved, _SWITCH_INTERVAL))
        _switch_users += 1
    try:
        yield
    finally:
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0:
                sys.setswitchinterval(_switch_saved)


def _trimmed(a: np.ndarray, size: int) -> np.ndarray:
    """``a[:size]`` as an array that owns its memory (shrunk in place where ``a`` owns it, as every
    array that grew does), so that ``SparseMDP`` adopts it without a copy: 137 MiB of copies at
    Model A n=200 otherwise."""
    if a.flags.owndata:
        a.resize(size, refcheck=False)  # the exploration's own references to it are done with
        return a
    return a[:size].copy()


def _grown(a: np.ndarray, need: int, keep: bool = True) -> np.ndarray:
    """``a`` (its contents if ``keep``) in a new array at least ``need`` long (twice as long at least)."""
    out = np.empty((max(int(need), 2 * a.shape[-1]),) if a.ndim == 1 else (a.shape[0], max(int(need), 2 * a.shape[1])), a.dtype)
    if keep:
        out[..., : a.shape[-1]] = a
    return out


# ``need`` slot -> index in ``state`` (keys, table, row_groups, indptr, targets, probs, choice_gen, ids)
_STATE_ROOM = ((kernels.ROOM_KEYS, 0), (kernels.ROOM_ROW_GROUPS, 2), (kernels.ROOM_INDPTR, 3),
               (kernels.ROOM_TARGETS, 4), (kernels.ROOM_TARGETS, 5), (kernels.ROOM_CHOICE_GEN, 6),
               (kernels.ROOM_IDS, 7))
# ``need`` slot -> indices in ``_buffers``' list, and whether the contents are kept
_CHUNK_ROOM = ((kernels.ROOM_STATE_END, (0,), True), (kernels.ROOM_CHOICES, (1, 2), True),
               (kernels.ROOM_ENTRIES, (3, 4), True), (kernels.ROOM_WORK, (5, 6), False))


def _make_room(state: list, counts, need) -> None:
    """Grow the exploration's arrays in ``state`` that ``_step``'s ``need`` asks for (the hash table:
    rehashed with more bits); ``_grow_chunk`` then grows the choice buffers and clears ``need``."""
    for slot, i in _STATE_ROOM:
        if need[slot]:
            state[i] = _grown(state[i], need[slot])
    if need[kernels.ROOM_TABLE]:
        bits = int(counts[4])
        while (1 << bits) < need[kernels.ROOM_TABLE]:
            bits += 1
        state[1] = _kernel("_rehash")(state[0], counts[0], np.int64(bits))
        counts[4] = bits


def _grow_chunk(buffers: list, need) -> None:
    """Grow the choice buffers (``_buffers``) that ``_step``'s ``need`` asks for; clear ``need``."""
    for slot, items, keep in _CHUNK_ROOM:
        if need[slot]:
            for i in items:
                buffers[i] = _grown(buffers[i], need[slot], keep)
    need[:] = 0


def _buffers(n_states: int):
    """``[state_end, gen, end, key, prob, work_key, work_prob]`` for the choices of ``n_states`` states
    (they grow as needed)."""
    m = max(16, 4 * n_states)
    return [np.zeros(n_states + 1, np.int64), np.empty(m, np.int64), np.zeros(m + 1, np.int64), np.empty(2 * m, np.int64),
            np.empty(2 * m, np.float64), np.empty((2, 64), np.int64), np.empty((2, 64), np.float64)]


def _generate_chunk(step, fixed, state, s0: int, s1: int):
    """The choices of states ``s0 .. s1 - 1`` (on a worker thread): ``(c_hi, status, info, state_end,
    gen, end, key, prob, work_key, work_prob)`` for ``_step``'s chunk (``c_hi``: one past the last
    state generated)."""
    counts = np.zeros(5, np.int64)
    counts[1] = s0
    info = np.full(4, -1, np.int64)
    need = np.zeros(kernels.N_ROOM, np.int64)
    buffers = _buffers(s1 - s0)
    lo, hi = np.int64(s0), np.int64(s1)
    while (status := step(*fixed, *state, counts, info, need, np.int64(0), lo, hi, np.int64(OK), info, *buffers, True)) == NEED_ROOM:
        _grow_chunk(buffers, need)
    c_hi = int(counts[1]) + (status != OK)
    buffers[0] = buffers[0][: c_hi - s0 + 1]
    return np.int64(c_hi), np.int64(status), info, *buffers


def decode(keys, lo, shift, mask):
    """Variable values of each packed state, ``(n_states, n_vars)`` int64."""
    return _kernel("_decode")(keys, lo, shift, mask)


def state_labels(rows, consts, start, depth, keys, *rest):
    """Every label at every packed state, ``(n_labels, n_states)`` (see ``_state_labels``); ranges of
    states in parallel."""
    out = _kernel("_zeros_bool")(rest[3].shape[0], keys.shape[0])
    pool.over_ranges(keys.shape[0], lambda s0, s1: _kernel("_state_labels")(out, s0, s1, rows, consts, start, depth, keys, *rest))
    return out


def choice_rewards(rows, consts, start, depth, keys, lo, shift, mask, row_groups, choice_gen, gen_action, n_models, *rest):
    """Every reward model's vector over the choices, ``(n_models, n_choices)`` (see
    ``_choice_rewards``); ranges of states in parallel."""
    out = _kernel("_zeros")(int(n_models), choice_gen.shape[0])
    args = (rows, consts, start, depth, keys, lo, shift, mask, row_groups, choice_gen, gen_action, n_models, *rest)
    pool.over_ranges(keys.shape[0], lambda s0, s1: _kernel("_choice_rewards")(out, s0, s1, *args))
    return out
