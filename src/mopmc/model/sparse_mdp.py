"""An immutable sparse MDP in CSR form.

States own consecutive *row groups* of choices (``row_groups[s]:row_groups[s+1]``); each choice owns
consecutive transitions (``indptr[c]:indptr[c+1]``) to ``targets`` with ``probs``. This is the layout
of Storm's sparse matrices and of UMB files, so data moves in bulk.

Rewards are per choice: a state reward counts on every choice of its state, a transition reward by
its expectation over the choice's successors. DTMCs are MDPs with one choice per state.
"""

from __future__ import annotations

import mmap
import weakref
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

import numpy as np


@dataclass(frozen=True)
class StateValuations:
    """Variable values per state: ``values[s, j]`` is variable ``names[j]`` in state ``s``.

    Booleans are stored as 0/1; ``kinds[j]`` is ``"int"`` or ``"bool"``.
    """

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    values: np.ndarray  # (n_states, n_vars) int64

    def of(self, state: int) -> dict[str, int | bool]:
        """The valuation of one state as a dict, booleans as ``bool``."""
        row = self.values[state]
        return {
            n: (bool(v) if k == "bool" else int(v)) for n, k, v in zip(self.names, self.kinds, row)
        }

    def index(self) -> dict[tuple[int, ...], int]:
        """Map each valuation (as a tuple) to its state; valuations are unique in built models."""
        return {tuple(int(x) for x in row): s for s, row in enumerate(self.values)}


def _frozen(a, dtype) -> np.ndarray:
    """A read-only C-contiguous array of ``dtype`` that no one else can write.

    An array that is already read-only, of the right type and owns its memory (or views immutable
    bytes or a read-only mapping) is adopted as is; anything else is copied once. So models built from models (restrict,
    permute, ``dataclasses.replace``) and models read from files share their arrays without copies.
    """
    arr = np.asarray(a)
    dtype = np.dtype(dtype)
    owned = arr.base is None or _immutable(arr.base)
    if arr.dtype == dtype and arr.flags.c_contiguous and not arr.flags.writeable and owned:
        return arr
    out = np.array(arr, dtype=dtype, order="C", copy=True)
    out.setflags(write=False)
    return out


def _immutable(base) -> bool:
    """Bytes, a read-only view of bytes or of a read-only mapping (the loader's private file), or
    memory a compiled kernel allocated and handed over (numba's ``_MemInfo``: the explicit builder's
    arrays, which no one else holds; also rows of such an array, as the builder's reward models)."""
    if isinstance(base, memoryview):
        return base.readonly and isinstance(base.obj, (bytes, mmap.mmap))
    if isinstance(base, np.ndarray):  # a view of a view: numpy keeps the array a row was taken from
        return base.base is not None and _immutable(base.base)
    return isinstance(base, bytes) or type(base).__name__ == "_MemInfo"


@dataclass(frozen=True, eq=False)
class SparseMDP:
    """An immutable MDP with one initial state.

    Attributes:
        row_groups: int64 array of length ``n_states + 1``; choices of state ``s`` are
            ``row_groups[s]:row_groups[s+1]``.
        indptr: int64 array of length ``n_choices + 1``; transitions of choice ``c`` are
            ``indptr[c]:indptr[c+1]``.
        targets: int64 successor state of each transition.
        probs: float64 probability of each transition.
        initial: the initial state.
        rewards: reward vectors per choice, by reward-model name.
        labels: boolean state masks, by label name.
        action_names: names of actions; ``actions[c]`` indexes into it (optional).
        actions: int64 action index per choice, or ``None``.
        valuations: variable values per state, or ``None`` when not built.
        choice_origins: text of the PRISM command behind each choice, or ``None``.
        source: where the model came from (a path or a description).

    Example:
        >>> m = SparseMDP.from_arrays([0, 1, 2], [0, 1, 2], [1, 1], [1.0, 1.0], initial=0)
        >>> m.n_states, m.n_choices
        (2, 2)
    """

    row_groups: np.ndarray
    indptr: np.ndarray
    targets: np.ndarray
    probs: np.ndarray
    initial: int
    rewards: Mapping[str, np.ndarray] = field(default_factory=dict)
    labels: Mapping[str, np.ndarray] = field(default_factory=dict)
    action_names: tuple[str, ...] = ()
    actions: np.ndarray | None = None
    valuations: StateValuations | None = None
    choice_origins: tuple[str, ...] | None = None
    source: str = "<memory>"

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "row_groups", _frozen(self.row_groups, np.int64))
        set_(self, "indptr", _frozen(self.indptr, np.int64))
        set_(self, "targets", _frozen(self.targets, np.int64))
        set_(self, "probs", _frozen(self.probs, np.float64))
        set_(self, "initial", int(self.initial))
        set_(self, "rewards", MappingProxyType({k: _frozen(v, np.float64) for k, v in self.rewards.items()}))
        set_(self, "labels", MappingProxyType({k: _frozen(v, np.bool_) for k, v in self.labels.items()}))
        if self.actions is not None:
            set_(self, "actions", _frozen(self.actions, np.int64))
        set_(self, "action_names", tuple(self.action_names))

    @classmethod
    def from_arrays(
        cls,
        row_groups,
        indptr,
        targets,
        probs,
        initial: int = 0,
        **kwargs,
    ) -> "SparseMDP":
        """Build from array-likes (lists or numpy arrays); see the class attributes."""
        return cls(np.asarray(row_groups), np.asarray(indptr), np.asarray(targets), np.asarray(probs), initial, **kwargs)

    # sizes -----------------------------------------------------------------
    @property
    def n_states(self) -> int:
        return len(self.row_groups) - 1

    @property
    def n_choices(self) -> int:
        return len(self.indptr) - 1

    @property
    def n_transitions(self) -> int:
        return len(self.targets)

    @property
    def is_dtmc(self) -> bool:
        """True when every state has exactly one choice."""
        return self.n_choices == self.n_states and bool(np.all(np.diff(self.row_groups) == 1))

    # derived views ---------------------------------------------------------
    def state_of_choice(self) -> np.ndarray:
        """The state owning each choice (int64, length ``n_choices``)."""
        return np.repeat(np.arange(self.n_states, dtype=np.int64), np.diff(self.row_groups))

    def choice_of_transition(self) -> np.ndarray:
        """The choice owning each transition (int64, length ``n_transitions``)."""
        return np.repeat(np.arange(self.n_choices, dtype=np.int64), np.diff(self.indptr))

    def matrix(self):
        """The transition matrix as ``scipy.sparse.csr_matrix`` of shape (choices, states)."""
        from scipy.sparse import csr_matrix

        return csr_matrix((self.probs, self.targets, self.indptr), shape=(self.n_choices, self.n_states))

    def reward(self, name: str) -> np.ndarray:
        """The reward vector of a reward model, or :class:`UnknownNameError` listing the names."""
        from mopmc.errors import UnknownNameError

        try:
            return self.rewards[name]
        except KeyError:
            raise UnknownNameError(
                f"unknown reward model {name!r} in {self.source}; it has: {_names(self.rewards)}"
            ) from None

    def label(self, name: str) -> np.ndarray:
        """The state mask of a label, or :class:`UnknownNameError` listing the labels."""
        from mopmc.errors import UnknownNameError

        try:
            return self.labels[name]
        except KeyError:
            raise UnknownNameError(f"unknown label {name!r} in {self.source}; it has: {_names(self.labels)}") from None

    def action_of(self, choice: int) -> str | None:
        """The action label of a choice, if action labels were loaded."""
        if self.actions is None:
            return None
        a = int(self.actions[choice])
        return self.action_names[a] if 0 <= a < len(self.action_names) else None

    def summary(self) -> dict:
        """Sizes and names, as ``mopmc info --json`` prints them."""
        return {
            "states": self.n_states,
            "choices": self.n_choices,
            "transitions": self.n_transitions,
            "initial_state": self.initial,
            "reward_models": sorted(self.rewards),
            "labels": sorted(self.labels),
            "actions": list(self.action_names),
            "variables": list(self.valuations.names) if self.valuations is not None else None,
            "deterministic": self.is_dtmc,
        }


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[i], ends[i])`` for all ``i``, vectorised (the choices of some
    states: ``ranges(row_groups[S], row_groups[S + 1])``; their transitions likewise on ``indptr``).

    >>> ranges(np.array([0, 5]), np.array([2, 7])).tolist()
    [0, 1, 5, 6]
    """
    counts = ends - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    return np.arange(total, dtype=np.int64) + offsets


def _names(mapping: Mapping) -> str:
    return ", ".join(sorted(mapping)) or "(none)"


_REACHABLE: "weakref.WeakSet[SparseMDP]" = weakref.WeakSet()


def mark_reachable(model: SparseMDP) -> SparseMDP:
    """Record that every state of ``model`` is reachable from its initial state (true of what
    Storm's builder makes: it explores from the one initial state), so the engine may skip its
    reachability search. Only this object is marked: models derived from it are not."""
    _REACHABLE.add(model)
    return model


def known_reachable(model: SparseMDP) -> bool:
    """Whether :func:`mark_reachable` vouched for ``model``."""
    return model in _REACHABLE
