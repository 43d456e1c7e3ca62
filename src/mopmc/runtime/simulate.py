"""One call to run seeded episodes of the real-time highway runtime and summarise them.

>>> result = simulate(episodes=2, delay="0.1", switch="C1", agent="idm", vehicles=5, seed=0)  # doctest: +SKIP
>>> result_to_dict(result)["controller_cost"]  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mopmc.errors import ConfigError, SchedulerError
from mopmc.runtime.agents import env_for_agent
from mopmc.runtime.aggregate import Estimate, MetricsSummary, summarise
from mopmc.runtime.config import SIMULATORS, RuntimeConfig
from mopmc.runtime.controllers import SecondaryController
from mopmc.runtime.delay import DEFAULT_DELAY_SPEC, check_delay_scale, parse_delay_spec
from mopmc.runtime.episode import EpisodeResult, ExitCondition, StepRecord, episode_seeds, run_episode
from mopmc.runtime.metrics import HEADWAY_CAP, TTC_CAP
from mopmc.runtime.policy import SchedulerPolicy, check_episode_length, parse_switch


class SimulationResult(NamedTuple):
    summary: MetricsSummary
    episodes: tuple[EpisodeResult, ...]
    settings: dict[str, Any]


def _controllers(config: RuntimeConfig, period: float) -> dict[str, SecondaryController]:
    # Commands are held for one decision period, so the controllers plan over exactly that horizon.
    return {
        name: dataclasses.replace(
            c, horizon=period, lane_keeper=dataclasses.replace(c.lane_keeper, horizon=period)
        )
        for name, c in config.controllers.items()
    }


def simulate(
    *,
    episodes: int = 10,
    delay: str = DEFAULT_DELAY_SPEC,
    switch: str = "none",
    agent: str = "shipped",
    vehicles: int | None = None,
    seed: int = 0,
    config: RuntimeConfig | None = None,
    on_episode: Callable[[EpisodeResult], None] | None = None,
    simulator: str = "stock",
) -> SimulationResult:
    """Run ``episodes`` seeded episodes and summarise the metrics.

    Args:
        episodes: number of episodes (episode ``e`` uses seeds derived from ``(seed, e)``).
        delay: delay spec of the primary controller (see :mod:`mopmc.runtime.delay`).
        switch: ``none``, a configuration name (``C1``..``C4``), ``uniform`` or a scheduler file.
        agent: ``shipped`` (the trained DDPG agent, docs/agents.md), ``idm`` (highway-env IDM stand-in)
            or ``[ALGO:]PATH`` of a Stable-Baselines3 model. A trained agent runs at the decision
            frequency it was trained at (:func:`~mopmc.runtime.agents.agent_policy_frequency`), which
            replaces ``config.env.policy_frequency``.
        vehicles: other vehicles in the scene (overrides ``config.env.vehicles``).
        seed: root seed; the same seed gives the same episodes.
        config: runtime configuration (defaults: :class:`RuntimeConfig`).
        on_episode: called after each episode (progress reporting).
        simulator: ``stock`` (highway-env's road) or ``fast`` (the accelerated road of
            :mod:`mopmc.runtime.fastsim`: the same dynamics, 10-15x faster at 50 vehicles).

    A scheduler file must cover the run's episode length (its model's ``n`` equal to the run's
    decision steps, :func:`~mopmc.runtime.policy.check_episode_length`); a mismatch is refused
    before any episode runs.
    """
    config = config or RuntimeConfig()
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    if seed < 0:
        raise ConfigError(f"--seed must be >= 0, got {seed}")
    if simulator not in SIMULATORS:
        raise ConfigError(f"simulator must be 'stock' or 'fast', got {simulator!r}")
    distribution = parse_delay_spec(delay)
    policy = parse_switch(switch, config.switch.configurations)
    k = config.switch.min_consecutive_calls
    if isinstance(policy, SchedulerPolicy):
        binding = policy.scheduler.binding
        missing = sorted({c.controller for c in binding.configurations} - set(config.controllers))
        if missing:
            raise SchedulerError(
                f"{switch}: binding.configurations use controller(s) {', '.join(missing)} that the runtime "
                f"does not have (known: {', '.join(sorted(config.controllers))})"
            )
        if binding.min_consecutive_calls is not None:
            k = binding.min_consecutive_calls
    env_config = config.env
    if vehicles is not None:
        if vehicles < 0:
            raise ConfigError(f"--vehicles must be >= 0, got {vehicles}")
        env_config = dataclasses.replace(env_config, vehicles=vehicles)
    configured_frequency = env_config.policy_frequency
    env_config = env_for_agent(env_config, agent)
    check_delay_scale(distribution, env_config.duration, "--delay")
    check_episode_length(policy, env_config, agent, configured_frequency)

    from mopmc.runtime import highway_adapter as hw

    world = hw.make_world(env_config, distribution, simulator)
    primary = hw.IdmAgent(world) if agent == "idm" else hw.load_agent(agent)
    controllers = _controllers(config, world.decision_period)
    results = []
    for e in range(episodes):
        result = run_episode(
            world, primary, distribution, episode_seeds(seed, e), episode=e, policy=policy,
            controllers=controllers, k=k, exit_condition=ExitCondition(config.switch.exit_headway),
            secondary_delay=config.switch.secondary_delay,
        )
        results.append(result)
        if on_episode is not None:
            on_episode(result)
    bootstrap_rng = np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(2**32,)))
    summary = summarise(
        results, ttc_scores=config.metrics.ttc_scores, headway_scores=config.metrics.headway_scores,
        rng=bootstrap_rng, resamples=config.metrics.bootstrap,
    )
    settings = {
        "delay": distribution.spec, "switch": switch, "agent": agent, "vehicles": env_config.vehicles,
        "seed": seed, "min_consecutive_calls": k, "max_substep": env_config.max_substep,
        "policy_frequency": env_config.policy_frequency, "simulator": simulator,
        "ttc_cap": TTC_CAP, "headway_cap": HEADWAY_CAP,
    }
    return SimulationResult(summary, tuple(results), settings)


def _clean(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _estimate(out: dict[str, Any], key: str, e: Estimate) -> None:
    out[key] = _clean(e.value)
    out[f"{key}_ci"] = None if e.low is None else [_clean(e.low), _clean(e.high)]


def result_to_dict(result: SimulationResult) -> dict[str, Any]:
    """The JSON document of ``mopmc rt simulate --json`` (no host or wall-clock fields, no NaN)."""
    s = result.summary
    out: dict[str, Any] = {"episodes": s.episodes, "steps": s.steps, "terminated_episodes": s.terminated_episodes}
    for key in ("p10_ttc", "p50_headway", "prob_lane_departure", "episode_lane_departure",
                "controller_cost", "secondary_share"):
        _estimate(out, key, getattr(s, key))
    for key, table in (("pr_ttc", s.pr_ttc), ("pr_headway", s.pr_headway)):
        out[key] = {}
        for score, e in table.items():
            entry: dict[str, Any] = {}
            _estimate(entry, "value", e)
            out[key][repr(float(score))] = entry
    out["settings"] = dict(result.settings)
    return out


LOG_FIELDS = StepRecord._fields


def write_log(path: str | Path, episodes: Sequence[EpisodeResult]) -> None:
    """Write every step record as CSV (infinite TTC/headway written as ``inf``)."""
    from mopmc.runtime.sweep import write_atomic

    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(LOG_FIELDS)
    for ep in episodes:
        for rec in ep.records:
            writer.writerow(["" if v is None else v for v in rec])
    path = Path(path)
    try:  # atomically (an interrupted write leaves no half log), into a folder that exists
        if not path.parent.is_dir():
            raise FileNotFoundError(2, "No such file or directory")
        write_atomic(path, text.getvalue())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the step log ({exc.strerror})") from None
