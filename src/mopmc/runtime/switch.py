"""The switch as an explicit state machine, step for step the design layer's automaton.

It mirrors ``BaseSwitch`` and ``ConsecCallCounter`` of the reference model
(``benchmarks/switch-table3/switch_model.prism``, ``MIN_CC = k``):

- **CHOOSE** (``sm=0``, a choice state): the configuration ``conf(t, i)`` is chosen (by a scheduler,
  a fixed configuration, or uniformly). Then the primary's delay ``d`` decides the path: ``d < t``
  primary (``act_p``, ``ex_p``, back to CHOOSE); ``d >= t`` secondary controller ``i`` (``act_s``).
- **SECONDARY(cc)**: after each secondary call the exit condition ``phi`` is checked (``ss=3``).
  Exit is *allowed* only when ``phi`` holds and ``cc == k`` (``[ex_s] cc=MIN_CC``); then staying
  (``re_s``) or exiting (``ex_s``) is a choice (``ss=5``). Otherwise the switch stays (``re_s``).
  Staying sets ``cc = min(cc + 1, k)``; exiting sets ``cc = 0`` and returns to CHOOSE, where a new
  configuration is chosen. While in SECONDARY the configuration is not re-chosen and the primary's
  delay is not consulted, exactly as in the model.

``cc`` counts the stays of the current secondary stint, so the earliest exit is after ``k + 1``
consecutive secondary calls (the reference model and the authors' ``calls > 4`` agree on this).
The timestep counts completed control steps (``act_p``/``act_s``), as ``tc`` does in the model.

>>> m = SwitchMachine(k=1)
>>> m.select(DEFAULT_CONFIGURATIONS[0]); m.dispatch(delay=0.5).controller
'secondary'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


@dataclass(frozen=True)
class Configuration:
    """``conf(t, i)``: hand over to secondary controller ``controller`` when the delay is >= ``threshold``."""

    name: str
    threshold: float
    controller: str


DEFAULT_CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration("C1", 0.2, "1"),
    Configuration("C2", 0.1, "1"),
    Configuration("C3", 0.2, "2"),
    Configuration("C4", 0.1, "2"),
)
"""conf1..conf4 of the reference model (thresholds as in its p1et..p4et: 0.2, 0.1, 0.2, 0.1 s)."""

DEFAULT_MIN_CONSECUTIVE_CALLS = 4
"""``MIN_CC`` of the reference model."""


class Location(Enum):
    """Where the switch is between control steps."""

    CHOOSE = "choose"
    SECONDARY = "secondary"


class Dispatch(NamedTuple):
    """Who acts in this step and how long the previous action is held before that."""

    controller: str  # "primary" or "secondary"
    hold: float


class SwitchState(NamedTuple):
    """The switch's abstract state (what a scheduler may look at)."""

    location: Location
    timestep: int
    consecutive_calls: int
    configuration: Configuration | None


class SwitchMachine:
    """PRIMARY/SECONDARY(cc) state machine of the switch.

    Args:
        k: minimum consecutive secondary calls (``MIN_CC``).
        secondary_delay: seconds a secondary controller needs to act in SECONDARY (the model assumes
            rule-based controllers are fast; 0 by default).
    """

    def __init__(self, k: int = DEFAULT_MIN_CONSECUTIVE_CALLS, secondary_delay: float = 0.0) -> None:
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        self.k = k
        self.secondary_delay = secondary_delay
        self._location = Location.CHOOSE
        self._timestep = 0
        self._cc = 0
        self._configuration: Configuration | None = None
        self._dispatched: str | None = None
        self._exit_allowed: bool | None = None

    @property
    def state(self) -> SwitchState:
        return SwitchState(self._location, self._timestep, self._cc, self._configuration)

    @property
    def needs_configuration(self) -> bool:
        """True in CHOOSE before a configuration is selected for this round."""
        return self._location is Location.CHOOSE and self._configuration is None

    def select(self, configuration: Configuration) -> None:
        """The ``conf`` choice (CHOOSE only)."""
        if not self.needs_configuration:
            raise RuntimeError(f"configuration chosen outside CHOOSE: {self.state}")
        self._configuration = configuration

    def dispatch(self, delay: float) -> Dispatch:
        """Route this step given the primary's delay (ignored in SECONDARY)."""
        if self._dispatched is not None:
            raise RuntimeError("dispatch called twice in one step")
        if self._location is Location.SECONDARY:
            self._dispatched = "secondary"
            return Dispatch("secondary", self.secondary_delay)
        conf = self._configuration
        if conf is None:
            raise RuntimeError("dispatch in CHOOSE before a configuration was selected")
        if delay < conf.threshold:
            self._dispatched = "primary"
            return Dispatch("primary", delay)
        # The observation did not arrive by z = t: the switch times out at t and calls controller i.
        self._location = Location.SECONDARY
        self._dispatched = "secondary"
        return Dispatch("secondary", conf.threshold)

    def complete_step(self) -> None:
        """``act_p``/``act_s`` happened: count the timestep; the primary path returns to CHOOSE."""
        if self._dispatched is None:
            raise RuntimeError("complete_step before dispatch")
        self._timestep += 1
        if self._dispatched == "primary":
            self._configuration = None  # ex_p, then sm=2 resets conf
            self._dispatched = None
        else:
            self._exit_allowed = None  # an exit check is now due

    def check_exit(self, condition: bool) -> bool:
        """Evaluate the exit check after a secondary step; returns whether exit is allowed."""
        if self._location is not Location.SECONDARY or self._dispatched != "secondary":
            raise RuntimeError(f"exit check outside a completed secondary step: {self.state}")
        self._exit_allowed = bool(condition) and self._cc == self.k
        return self._exit_allowed

    def resolve(self, exit_switch: bool) -> None:
        """Stay (``re_s``) or exit (``ex_s``) after the exit check."""
        if self._exit_allowed is None:
            raise RuntimeError("resolve before check_exit")
        if exit_switch and not self._exit_allowed:
            raise RuntimeError(f"exit chosen but not allowed: {self.state}")
        if exit_switch:
            self._cc = 0
            self._location = Location.CHOOSE
            self._configuration = None
        else:
            self._cc = min(self._cc + 1, self.k)
        self._dispatched = None
        self._exit_allowed = None
