"""Deterministic schedulers with goal memory, as the kernel returns them.

A scheduler is defined on the reachable states ``(s, b)`` of the goal-memory product: ``b`` holds one
bit per decision set, set for every set some earlier state of the run belonged to (the memory
*before* observing ``s``). After the step out of ``s`` the memory is ``b | bits(s)`` where
``bits(s)`` has bit ``j`` set when ``decided[j, s]``. Without reachability objectives there are no
bits and the scheduler is memoryless.

Files: :mod:`mopmc.io.scheduler_file` writes these (``mopmc check --export-scheduler``) as
``mopmc-scheduler`` documents keyed by state valuations (docs/formats.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Scheduler:
    """``choice[p]`` is the model choice taken in product state ``(state[p], memory[p])``."""

    state: np.ndarray
    memory: np.ndarray
    choice: np.ndarray
    decided: np.ndarray  # (n_bits, n_model_states) bool
    n_model_states: int

    @property
    def n_bits(self) -> int:
        return int(self.decided.shape[0])

    @property
    def memoryless(self) -> bool:
        return self.n_bits == 0

    def memory_update(self) -> np.ndarray:
        """``bits(s)`` per model state, as an int64 bit mask."""
        out = np.zeros(self.n_model_states, np.int64)
        for j in range(self.n_bits):
            out |= self.decided[j].astype(np.int64) << j
        return out

    def choices(self) -> np.ndarray:
        """Memoryless schedulers: the choice per model state (-1 where the scheduler never goes)."""
        if not self.memoryless:
            raise ValueError("this scheduler needs memory; use state/memory/choice")
        out = np.full(self.n_model_states, -1, np.int64)
        out[self.state] = self.choice
        return out

    def lookup(self) -> dict[tuple[int, int], int]:
        """``(state, memory) -> choice``."""
        return {(int(s), int(b)): int(c) for s, b, c in zip(self.state, self.memory, self.choice)}
