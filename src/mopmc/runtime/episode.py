"""Run episodes: primary agent, delays, the switch state machine, secondary controllers, metrics.

Timing of one decision step (period ``P``, 1 s for highway-v0) that starts at time ``T``:

1. The world is observed at ``T``.
2. The previous action stays applied for ``hold`` seconds while the world moves on:
   - no switch: ``hold = d``, the primary's delay;
   - switch in CHOOSE: ``d < t`` -> the primary acts, ``hold = d``; ``d >= t`` -> the switch times
     out at ``t``, calls the secondary controller on a fresh observation, ``hold = t``;
   - switch in SECONDARY: the secondary acts after ``secondary_delay`` (0 by default).
3. The new action is applied for ``P - hold`` seconds. If ``hold >= P`` the step lasts ``hold``
   seconds instead and the next step starts when the action is applied.
4. Metrics are measured on the scene at the end of the step; in SECONDARY the exit check follows.

One primary delay is drawn per step even when it is not used, so the delay stream is the same with
and without a switch for the same seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from mopmc.runtime.controllers import Command, SecondaryController
from mopmc.runtime.delay import DelayDistribution
from mopmc.runtime.metrics import PRIMARY_COST, SECONDARY_COST, StepMetrics, step_metrics
from mopmc.runtime.policy import SwitchPolicy
from mopmc.runtime.scene import Scene
from mopmc.runtime.switch import SwitchMachine


class World(Protocol):
    """A real-time simulator the runner drives (see :class:`RealtimeHighwayEnv`)."""

    decision_period: float
    max_steps: int

    def reset_world(self, seed: int) -> Any:
        """Start an episode; returns the first observation."""
        ...

    def observe(self) -> Any:
        ...

    def scene(self) -> Scene:
        ...

    def advance(self, seconds: float) -> None:
        """Simulate ``seconds`` with the currently applied action held."""
        ...

    def apply_action(self, action: np.ndarray) -> None:
        """Apply a normalised agent action (highway-env continuous action in [-1, 1]^2)."""
        ...

    def apply_command(self, command: Command) -> None:
        """Apply a physical command (acceleration m/s^2, steering rad)."""
        ...

    @property
    def terminated(self) -> bool:
        """True once the episode must stop early (e.g. the ego crashed)."""
        ...


class Agent(Protocol):
    """The primary controller."""

    def act(self, observation: Any) -> np.ndarray:
        ...


@dataclass(frozen=True)
class ExitCondition:
    """The exit condition phi, checked after every secondary step: time headway >= ``min_headway``.

    The paper leaves phi to the road condition (the authors' code: a headway above 2 s). Keep
    ``min_headway`` below the secondary controllers' headway threshold (1.5 s): they settle at
    that headway, so a larger value can trap the switch in SECONDARY.
    """

    min_headway: float = 1.2

    def holds(self, metrics: StepMetrics) -> bool:
        return metrics.headway >= self.min_headway


class StepRecord(NamedTuple):
    """One logged decision step (cc and the exit fields refer to the exit check of this step)."""

    episode: int
    step: int
    time: float
    delay: float
    hold: float
    configuration: str | None
    controller: str
    cc: int | None
    exit_condition: bool | None
    exit_allowed: bool | None
    exited: bool | None
    ttc: float
    headway: float
    lane_departure: bool
    cost: int


class EpisodeResult(NamedTuple):
    episode: int
    records: tuple[StepRecord, ...]
    terminated: bool


class EpisodeSeeds(NamedTuple):
    """Independent seeds of one episode, all derived from (seed, episode)."""

    world: int
    delay: np.random.Generator
    policy: np.random.Generator


def episode_seeds(seed: int, episode: int) -> EpisodeSeeds:
    """Spawn the world seed and the delay and policy generators of an episode."""
    root = np.random.SeedSequence(entropy=seed, spawn_key=(episode,))
    world, delay, policy = root.spawn(3)
    return EpisodeSeeds(
        int(world.generate_state(1)[0]),
        np.random.default_rng(delay),
        np.random.default_rng(policy),
    )


def run_episode(
    world: World,
    agent: Agent,
    delay: DelayDistribution,
    seeds: EpisodeSeeds,
    *,
    episode: int = 0,
    policy: SwitchPolicy | None = None,
    controllers: dict[str, SecondaryController] | None = None,
    k: int = 4,
    exit_condition: ExitCondition = ExitCondition(),
    secondary_delay: float = 0.0,
) -> EpisodeResult:
    """Run one episode and return its per-step log.

    With ``policy=None`` the primary always acts after its delay (no switch). Otherwise the switch
    state machine routes each step and ``policy`` resolves its choices.
    """
    controllers = controllers or {}
    observation = world.reset_world(seeds.world)
    machine = SwitchMachine(k=k, secondary_delay=secondary_delay) if policy is not None else None
    if policy is not None:
        policy.start_episode(seeds.policy)
    period = world.decision_period
    records: list[StepRecord] = []
    elapsed = 0.0
    for step in range(world.max_steps):
        d = float(delay.sample(seeds.delay))
        configuration = None
        if machine is None:
            controller, hold = "primary", d
        else:
            if machine.needs_configuration:
                machine.select(policy.choose(machine.state, seeds.policy))  # type: ignore[union-attr]
            configuration = machine.state.configuration
            controller, hold = machine.dispatch(d)
        if controller == "primary":
            action = agent.act(observation)
            world.advance(hold)
            world.apply_action(action)
        else:
            secondary = controllers[configuration.controller]  # type: ignore[union-attr]
            world.advance(hold)
            world.apply_command(secondary.command(world.scene()))
        world.advance(max(period - hold, 0.0))
        elapsed += max(period, hold)
        scene = world.scene()
        metrics = step_metrics(scene)
        cc = condition = allowed = exited = None
        if machine is not None:
            machine.complete_step()
            if controller == "secondary":
                state = machine.state
                cc = state.consecutive_calls
                condition = exit_condition.holds(metrics)
                allowed = machine.check_exit(condition)
                exited = allowed and policy.exit(state, metrics, seeds.policy)  # type: ignore[union-attr]
                machine.resolve(exited)
        name = "primary" if controller == "primary" else configuration.controller  # type: ignore[union-attr]
        records.append(
            StepRecord(
                episode, step, elapsed, d, hold,
                None if configuration is None else configuration.name, name, cc,
                condition, allowed, exited,
                metrics.ttc, metrics.headway, metrics.lane_departure,
                PRIMARY_COST if controller == "primary" else SECONDARY_COST,
            )
        )
        if world.terminated:
            return EpisodeResult(episode, tuple(records), True)
        observation = world.observe()
    return EpisodeResult(episode, tuple(records), False)
