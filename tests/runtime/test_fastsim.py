"""The accelerated road reproduces stock highway-env: same seeds, same actions, same trajectories."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("highway_env")

from highway_env.envs.highway_env import HighwayEnv  # noqa: E402

from mopmc.runtime.config import EnvConfig  # noqa: E402
from mopmc.runtime.fastsim.road import accelerate  # noqa: E402
from mopmc.runtime.fastsim.world import FastRealtimeHighwayEnv  # noqa: E402
from mopmc.runtime.highway_adapter import RealtimeHighwayEnv  # noqa: E402


def _trajectory(fast: bool, actions: np.ndarray, seed: int, **config) -> tuple[np.ndarray, list[bool]]:
    env = HighwayEnv(config={"action": {"type": "ContinuousAction"}, **config})
    env.reset(seed=seed)
    if fast:
        accelerate(env.road)
    states = []
    for a in actions:
        env.step(a)
        states.append([[*v.position, v.speed, v.heading] for v in env.road.vehicles])
    return np.array(states), [v.crashed for v in env.road.vehicles]


def test_fifty_vehicles_ten_policy_steps_match_stock() -> None:
    actions = np.random.default_rng(11).uniform(-0.4, 0.4, size=(10, 2))
    stock, crashed_stock = _trajectory(False, actions, seed=21, vehicles_count=50)
    fast, crashed_fast = _trajectory(True, actions, seed=21, vehicles_count=50)
    assert stock.shape == fast.shape == (10, 51, 4)
    assert np.abs(stock - fast).max() <= 1e-6
    assert crashed_stock == crashed_fast
    assert np.abs(stock[-1] - stock[0]).max() > 10  # the scene moved


def test_collisions_match_stock() -> None:
    actions = np.tile([1.0, 0.05], (10, 1))  # full throttle, drifting: the ego runs into traffic
    stock, crashed_stock = _trajectory(False, actions, seed=5, vehicles_count=25, vehicles_density=2.5)
    fast, crashed_fast = _trajectory(True, actions, seed=5, vehicles_count=25, vehicles_density=2.5)
    assert any(crashed_stock), "the scene produced no collision; the collision path is untested"
    assert crashed_stock == crashed_fast
    assert np.abs(stock - fast).max() <= 1e-6


def test_realtime_world_on_the_fast_road_matches() -> None:
    from mopmc.runtime.delay import parse_delay_spec

    config = EnvConfig(vehicles=15, duration=4)
    states = []
    for cls in (RealtimeHighwayEnv, FastRealtimeHighwayEnv):
        world = cls(config, parse_delay_spec("0.13"))
        world.reset_world(8)
        run = []
        for a in ([0.3, 0.0], [-0.2, 0.1], [0.5, -0.1]):
            world.advance(0.13)
            world.apply_action(np.array(a))
            world.advance(0.87)
            run.append([[*v.position, v.speed] for v in world.road.vehicles])
        states.append(np.array(run))
    assert np.abs(states[0] - states[1]).max() <= 1e-6
