"""The engine's working form of an MDP with m objectives, and the sparse restriction shared by reductions.

A :class:`Problem` is substochastic: probability mass that a choice sends to no state goes to an
implicit terminal state with value 0 for every objective (``exits[c]`` marks such choices, including
choices with no transition at all, e.g. "stay forever in a zero-reward end component"), and
``exit_mass[c]`` is that probability, summed from the probabilities of the transitions that were
dropped (1 minus the rest loses it: the double nearest 1 - 1e-12 is 1.1e-16 from it, 1e-4 of the
1e-12 a choice sends away). Rewards are an ``(n_choices, m)`` array, oriented so that every
objective is maximised.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np


class Problem(NamedTuple):
    row_groups: np.ndarray
    indptr: np.ndarray
    targets: np.ndarray
    probs: np.ndarray
    rewards: np.ndarray  # (n_choices, m) float64, maximised
    exits: np.ndarray  # bool per choice: positive probability of the terminal
    initial: int  # -1 when the initial state was removed (all values 0)
    exit_mass: np.ndarray | None = None  # float per choice: that probability (None: 1 minus the row's sum)

    @property
    def n_states(self) -> int:
        return len(self.row_groups) - 1

    @property
    def n_choices(self) -> int:
        return len(self.indptr) - 1

    def state_of_choice(self) -> np.ndarray:
        """The state of each choice (read-only; cached while ``row_groups`` lives)."""
        return owners(self.row_groups)

    def choice_of_transition(self) -> np.ndarray:
        """The choice of each transition (read-only; cached while ``indptr`` lives)."""
        return owners(self.indptr)

    def matrix(self):
        """Choices x states transition matrix (scipy CSR)."""
        from scipy.sparse import csr_matrix

        return csr_matrix((self.probs, self.targets, self.indptr), shape=(self.n_choices, self.n_states))


_OWNERS: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def owners(ptr: np.ndarray) -> np.ndarray:
    """``repeat(arange(len(ptr) - 1), diff(ptr))``, computed once per pointer array (the reductions
    ask for the same map many times; problems share their arrays)."""
    key = id(ptr)
    hit = _OWNERS.get(key)
    if hit is not None and hit[0]() is ptr:
        return hit[1]
    owners = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
    owners.flags.writeable = False
    try:
        ref = weakref.ref(ptr, lambda _, key=key: _OWNERS.pop(key, None))
    except TypeError:  # not weak-referenceable (e.g. a memory map view): no cache
        return owners
    _OWNERS[key] = (ref, owners)
    return owners


def gather_rows(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR rows ``rows`` (``-1`` = an empty row): the new indptr and the gathered entry indices."""
    rows = np.asarray(rows, np.int64)
    real = rows >= 0
    safe = np.where(real, rows, 0)
    lens = np.where(real, indptr[safe + 1] - indptr[safe], 0)
    new_ptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lens, out=new_ptr[1:])
    idx = np.repeat(np.where(real, indptr[safe], 0) - new_ptr[:-1], lens) + np.arange(new_ptr[-1], dtype=np.int64)
    return new_ptr, idx


class Restriction(NamedTuple):
    """How a restricted problem relates to its source: ``state_map`` old -> new (-1 removed),
    ``choice_origin`` new -> old."""

    problem: Problem
    state_map: np.ndarray
    choice_origin: np.ndarray


def restrict(p: Problem, keep_states: np.ndarray, keep_choices: np.ndarray | None = None) -> Restriction:
    """Keep some states and choices; transitions into removed states go to the terminal (an exit).

    The caller must keep at least one choice of every kept state. Keeping everything returns ``p``
    itself (no copy) with identity maps.
    """
    if keep_states.all() and (keep_choices is None or keep_choices.all()):
        return identity(p)
    from mopmc.engine import numba_kernels as nk

    use = keep_choices is not None
    state_map, origin, new_rg = nk.restrict_maps(p.row_groups, np.ascontiguousarray(keep_states, np.bool_),
                                                 np.ascontiguousarray(keep_choices if use else np.zeros(0), np.bool_), use)
    init = int(state_map[p.initial]) if p.initial >= 0 else -1
    q = _gathered(new_rg, p, origin, state_map, init)
    return Restriction(q, state_map, origin)


def exit_mass(p: Problem) -> np.ndarray:
    """Per choice, its probability of the terminal: ``p.exit_mass``, or where a problem was built
    without it, 1 minus the sum of its transitions on ``exits`` choices (0 elsewhere)."""
    if p.exit_mass is not None:
        return p.exit_mass
    if not np.any(p.exits):
        return np.zeros(p.n_choices)
    sums = np.bincount(p.choice_of_transition(), weights=p.probs, minlength=p.n_choices)
    return np.where(p.exits, np.maximum(1.0 - sums, 0.0), 0.0)


def denominators(p: Problem) -> np.ndarray:
    """Per choice, ``1 - p_self`` as the engines divide by it (a state's value through its
    self-loop): 1 where the choice has no self-loop, else what it sends elsewhere, summed (to other
    states and to the terminal), never 1 minus the self-loop's double (a state left with
    probability 1e-12 a step: 2.2e-5 relative error in its value so)."""
    from mopmc.engine import numba_kernels as nk

    return nk.self_loop_den(p.row_groups, p.indptr, p.targets, p.probs, np.ascontiguousarray(exit_mass(p), np.float64))


def _gathered(row_groups: np.ndarray, p: Problem, origin: np.ndarray, state_map: np.ndarray, initial: int) -> Problem:
    """The problem of ``p``'s choices ``origin`` (grouped by ``row_groups``) with targets renumbered
    by ``state_map`` (transitions into removed states become exits, their probabilities added to
    the exit mass): one compiled pass, or on the worker threads (:mod:`mopmc.workers`) ranges of
    choices counted, then filled (:func:`~mopmc.engine.numba_kernels.gather_fill` either way)."""
    from mopmc import workers
    from mopmc.engine import numba_kernels as nk

    rewards = np.ascontiguousarray(p.rewards, np.float64)
    exits = np.ascontiguousarray(p.exits, np.bool_)
    mass = np.ascontiguousarray(exit_mass(p), np.float64)
    n = len(origin)
    args = (p.indptr, p.targets, p.probs, rewards, exits, mass, origin, state_map)
    if workers.count() == 0:  # one pass into arrays as long as every transition (views of them kept)
        ip, tg, pr, rw, ex, em = nk.gather_arrays(n, rewards.shape[1], nk.gather_total(p.indptr, origin))
        nk.gather_fill(ip, tg, pr, rw, ex, em, *args, 0, n, 0)
        return Problem(row_groups, ip, tg[:ip[n]], pr[:ip[n]], rw, ex, initial, em)
    # (one range below 2 * MIN_RANGE choices: the same kernels, so that the warm-up loads them)
    kept: dict[int, int] = {}
    workers.over_ranges(n, lambda c0, c1: kept.__setitem__(c0, nk.gather_count(p.indptr, p.targets, origin, state_map, c0, c1)))
    starts = sorted(kept)
    first = dict(zip(starts, np.cumsum([0] + [kept[c] for c in starts[:-1]]).tolist()))
    arrays = nk.gather_arrays(n, rewards.shape[1], sum(kept.values()))
    workers.over_ranges(n, lambda c0, c1: nk.gather_fill(*arrays, *args, c0, c1, first[c0]))
    ip, tg, pr, rw, ex, em = arrays
    return Problem(row_groups, ip, tg, pr, rw, ex, initial, em)


def take_rows(a: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``a[rows]`` for a 2-D ``a``: ``np.take`` along axis 0 copies whole rows, 1.5-5x faster than
    fancy indexing for the engine's narrow reward arrays (2M rows of 4: 27 against 130 ms)."""
    return np.take(a, rows, axis=0)


def is_range(states: np.ndarray) -> bool:
    """Whether ``states`` is ``a, a+1, ..., b`` (empty included)."""
    if len(states) < 65536:
        return bool(np.all(np.diff(states) == 1))
    from mopmc.engine import numba_kernels as nk

    return nk.order_steps(np.ascontiguousarray(states, np.int64), 1)[0] == 0


def identity(p: Problem) -> Restriction:
    """``p`` kept whole: itself, with identity maps."""
    return Restriction(p, np.arange(p.n_states, dtype=np.int64), np.arange(p.n_choices, dtype=np.int64))


def permute(p: Problem, order: np.ndarray) -> Restriction:
    """Renumber states so that ``order[i]`` becomes state ``i`` (choices follow their states);
    the identity order returns ``p`` itself.

    ``order`` may list only some states (each at most once): the others are removed as by
    :func:`restrict`, so that one copy both restricts and renumbers."""
    if len(order) == p.n_states and is_range(order) and (len(order) == 0 or order[0] == 0):
        return identity(p)
    from mopmc.engine import numba_kernels as nk

    state_map, origin, rg = nk.permute_maps(p.row_groups, np.ascontiguousarray(order, np.int64))
    init = int(state_map[p.initial]) if p.initial >= 0 else -1
    q = _gathered(rg, p, origin, state_map, init)
    return Restriction(q, state_map, origin)
