"""Who resolves the switch's nondeterminism: a fixed configuration, uniform, or a scheduler file.

Each decision consumes exactly one uniform draw from the policy's own Generator (also when it is
deterministic), so changing the policy never shifts the delay or traffic random streams, and the
same seed replays the same decisions.

>>> import numpy as np
>>> from mopmc.runtime.switch import DEFAULT_CONFIGURATIONS, SwitchState, Location
>>> p = parse_switch("C2", DEFAULT_CONFIGURATIONS)
>>> p.choose(SwitchState(Location.CHOOSE, 0, 0, None), np.random.default_rng(0)).name
'C2'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mopmc.errors import ConfigError, SchedulerError
from mopmc.runtime.metrics import StepMetrics
from mopmc.runtime.scheduler import SchedulerFile, load_scheduler
from mopmc.runtime.switch import Configuration, SwitchState


class SwitchPolicy(Protocol):
    """Resolves the two choices of the switch model."""

    name: str

    def start_episode(self, rng: np.random.Generator) -> None:
        """Called once per episode (a mixture picks its component here)."""
        ...

    def choose(self, state: SwitchState, rng: np.random.Generator) -> Configuration:
        """The configuration for a round that starts in CHOOSE."""
        ...

    def exit(self, state: SwitchState, metrics: StepMetrics, rng: np.random.Generator) -> bool:
        """Whether to exit, asked only when exit is allowed; ``metrics`` are the step's metrics."""
        ...


def _pick(options: Sequence[tuple[int, float]], u: float) -> int:
    total = 0.0
    for index, p in options:
        total += p
        if u < total:
            return index
    return options[-1][0]  # u within rounding of 1


@dataclass
class FixedPolicy:
    """Always the same configuration; exits as soon as allowed."""

    configuration: Configuration

    @property
    def name(self) -> str:
        return self.configuration.name

    def start_episode(self, rng: np.random.Generator) -> None:
        return None

    def choose(self, state: SwitchState, rng: np.random.Generator) -> Configuration:
        rng.random()
        return self.configuration

    def exit(self, state: SwitchState, metrics: StepMetrics, rng: np.random.Generator) -> bool:
        rng.random()
        return True


@dataclass
class UniformPolicy:
    """Each configuration with equal probability, drawn every round; exits as soon as allowed."""

    configurations: tuple[Configuration, ...]
    name: str = "uniform"

    def start_episode(self, rng: np.random.Generator) -> None:
        return None

    def choose(self, state: SwitchState, rng: np.random.Generator) -> Configuration:
        n = len(self.configurations)
        return self.configurations[_pick([(i, 1.0 / n) for i in range(n)], float(rng.random()))]

    def exit(self, state: SwitchState, metrics: StepMetrics, rng: np.random.Generator) -> bool:
        rng.random()
        return True


@dataclass
class SchedulerPolicy:
    """Executes a scheduler file: pi(conf | state) each round, pi(stay/exit | state) at exit checks."""

    scheduler: SchedulerFile
    component: int = 0

    @property
    def name(self) -> str:
        return self.scheduler.path

    @property
    def configurations(self) -> tuple[Configuration, ...]:
        return self.scheduler.binding.configurations

    def start_episode(self, rng: np.random.Generator) -> None:
        weights = self.scheduler.weights
        u = float(rng.random())
        self.component = _pick(list(enumerate(weights)), u) if len(weights) > 1 else 0

    def choose(self, state: SwitchState, rng: np.random.Generator) -> Configuration:
        options = self.scheduler.configuration_distribution(
            self.component, state.timestep, state.consecutive_calls
        )
        return self.configurations[_pick(options, float(rng.random()))]

    def exit(self, state: SwitchState, metrics: StepMetrics, rng: np.random.Generator) -> bool:
        if state.configuration is None:
            raise RuntimeError("exit check without a configuration")
        observations = self.scheduler.observations(metrics)
        p_exit = self.scheduler.exit_probability(
            self.component, state.timestep, state.consecutive_calls,
            self.configurations.index(state.configuration), observations,
        )
        return float(rng.random()) < p_exit


def switch_names(configurations: Sequence[Configuration]) -> str:
    """What ``--switch`` accepts with these configurations, for messages."""
    return ", ".join(["none", *(c.name for c in configurations), "uniform"]) + " or a scheduler FILE.json"


def parse_switch(text: str, configurations: tuple[Configuration, ...]) -> SwitchPolicy | None:
    """``none`` -> None (primary only); a configuration name; ``uniform``; or a scheduler file path."""
    if not text.strip():
        raise ConfigError(f"--switch: empty; expected {switch_names(configurations)}")
    if text == "none":
        return None
    if text == "uniform":
        return UniformPolicy(configurations)
    for conf in configurations:
        if text == conf.name:
            return FixedPolicy(conf)
    if text.endswith(".json") or Path(text).exists():
        return SchedulerPolicy(load_scheduler(text))
    raise ConfigError(f"unknown switch {text!r}; expected {switch_names(configurations)}")


def check_episode_length(policy: SwitchPolicy | None, env: Any, agent: str, configured_frequency: float | None = None) -> None:
    """Refuse a scheduler file computed for episodes of another length than this run's.

    The model's timestep counter runs to ``n``; the runtime asks the scheduler at every decision step
    of an episode (``env.duration x env.policy_frequency`` of them, the frequency being the agent's
    own for a trained agent). A scheduler for fewer steps has no entry for the later ones, one for
    more steps was optimised for another horizon: both are refused before any episode runs, in one
    line with both numbers and the fix. ``configured_frequency`` is the config's
    ``env.policy_frequency`` when a trained agent replaced it (for the message).
    """
    if not isinstance(policy, SchedulerPolicy):
        return
    covered = policy.scheduler.episode_steps
    steps = env.decision_steps
    if covered is None or covered == steps:
        return
    from mopmc.runtime.agents import SHIPPED, shipped_agent_path

    shown = SHIPPED if agent == str(shipped_agent_path()) else agent
    who = f"agent {shown!r}"
    hz = env.policy_frequency
    fixes = [f"build the model with --n {steps} (mopmc design build ... --n {steps}, or n: {steps} in --params) "
             "and export the scheduler again"]
    seconds = covered / hz
    fixes.append(f"run {covered} steps: a --config with env.duration {seconds:g}")
    if agent != "idm" and configured_frequency is not None and configured_frequency != hz:
        if round(env.duration * configured_frequency) == covered:
            fixes.append(f"--agent idm (it runs at the config's {configured_frequency:g} Hz: "
                         f"{round(env.duration * configured_frequency)} steps)")
    raise SchedulerError(
        f"{policy.scheduler.path}: the scheduler covers episodes of {covered} steps (its model's n); this run has "
        f"{steps} ({who} at {hz:g} Hz x {env.duration:g} s); " + ", or ".join(fixes)
    )
