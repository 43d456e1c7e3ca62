"""The accelerated road reproduces stock highway-env: same seeds, same actions, same trajectories."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("highway_env")

from highway_env.envs.highway_env import HighwayEnv  # noqa: E402

from mopmc.runtime.config import EnvConfig  # noqa: E402
from mopmc.runtime.fastsim.road import accelerate  # noqa: E402
from mopmc.runtime.fastsim.vehicles import Lanes, Tick, idm_act, is_idm, kinematic_step  # noqa: E402
from mopmc.runtime.fastsim.world import FastRealtimeHighwayEnv  # noqa: E402
from mopmc.runtime.highway_adapter import RealtimeHighwayEnv  # noqa: E402


def _trajectory(fast: bool, actions: np.ndarray, seed: int, **config) -> tuple[np.ndarray, list]:
    env = HighwayEnv(config={"action": {"type": "ContinuousAction"}, **config})
    env.reset(seed=seed)
    if fast:
        accelerate(env.road)
    states, decisions = [], []
    for a in actions:
        env.step(a)
        vs = env.road.vehicles
        states.append([[*v.position, v.speed, v.heading, getattr(v, "timer", 0.0)] for v in vs])
        decisions.append([(v.crashed, v.lane_index, getattr(v, "target_lane_index", None)) for v in vs])
    return np.array(states), decisions


@pytest.mark.parametrize("seed", [21, 4])
def test_fifty_vehicles_ten_policy_steps_match_stock(seed: int) -> None:
    actions = np.random.default_rng(seed + 11).uniform(-0.4, 0.4, size=(10, 2))
    stock, decisions_stock = _trajectory(False, actions, seed=seed, vehicles_count=50)
    fast, decisions_fast = _trajectory(True, actions, seed=seed, vehicles_count=50)
    assert stock.shape == fast.shape == (10, 51, 5)
    assert np.abs(stock - fast).max() <= 1e-6  # positions, speeds, headings, MOBIL timers
    assert decisions_stock == decisions_fast  # crashes, lanes, lane-change targets
    assert np.abs(stock[-1] - stock[0]).max() > 10  # the scene moved
    lanes = {(i, d[i][1]) for d in decisions_stock for i in range(51)}
    assert len(lanes) > 51, "no vehicle changed lane: MOBIL untested"


def _snapshot(v) -> tuple:
    return (
        v.position.copy(), v.heading, v.speed, getattr(v, "timer", None), dict(v.action), v.crashed,
        v.lane_index, v.lane, getattr(v, "target_lane_index", None), v.impact,
    )


def _restore(v, snap: tuple) -> None:
    v.position[:] = snap[0]
    v.heading, v.speed = snap[1], snap[2]
    if snap[3] is not None:
        v.timer = snap[3]
    v.action, v.crashed, v.lane_index, v.lane = dict(snap[4]), snap[5], snap[6], snap[7]
    if snap[8] is not None:
        v.target_lane_index = snap[8]
    v.impact = snap[9]


def _same(a: tuple, b: tuple) -> None:
    assert np.abs(a[0] - b[0]).max() <= 1e-12
    assert abs(a[1] - b[1]) <= 1e-12 and abs(a[2] - b[2]) <= 1e-12
    assert a[3] == b[3] or abs(a[3] - b[3]) <= 1e-12
    assert a[4].keys() == b[4].keys() and all(abs(a[4][k] - b[4][k]) <= 1e-12 for k in a[4])
    assert a[5:9] == b[5:9]
    assert (a[9] is None) == (b[9] is None) and (a[9] is None or np.abs(a[9] - b[9]).max() <= 1e-12)


def test_float_code_equals_stock_vehicle_by_vehicle() -> None:
    """Each vehicle's decision and step, against the stock method from the same state."""
    config = {"action": {"type": "ContinuousAction"}, "vehicles_count": 40, "vehicles_density": 1.5}
    env = HighwayEnv(config=config)
    env.reset(seed=9)
    road = env.road
    lanes = Lanes(road.network)
    changes = 0
    for tick in range(150):
        env.action_type.act(np.array([0.2, 0.01 * np.sin(tick / 10)]))
        table = Tick(lanes, road.vehicles)
        for v in road.vehicles:
            before = _snapshot(v)
            v.act()
            stock = _snapshot(v)
            _restore(v, before)
            if is_idm(v):
                assert idm_act(table, v)
                _same(_snapshot(v), stock)
                changes += stock[8] != before[8]
            else:
                v.act()
        dt = 1 / 15
        for v in road.vehicles:
            before = _snapshot(v)
            v.step(dt)
            stock = _snapshot(v)
            _restore(v, before)
            assert kinematic_step(lanes, v, dt)
            _same(_snapshot(v), stock)
        for i, v in enumerate(road.vehicles):
            for other in road.vehicles[i + 1:]:
                v.handle_collisions(other, dt)
    assert changes >= 3, "MOBIL decided (or aborted) too few lane changes to test them"


def test_scenes_outside_the_float_code_fall_back_to_stock() -> None:
    """Vehicles with routes (MOBIL's route branch) and an obstacle on the road: the stock code runs."""
    from highway_env.vehicle.objects import Obstacle

    def run(fast: bool) -> np.ndarray:
        env = HighwayEnv(config={"action": {"type": "ContinuousAction"}, "vehicles_count": 20})
        env.reset(seed=13)
        for v in env.road.vehicles[1::3]:
            if is_idm(v):
                v.plan_route_to("1")
        if fast:
            accelerate(env.road)
        states = []
        for step in range(4):
            if step == 2:
                ego = env.road.vehicles[0]
                env.road.objects.append(Obstacle(env.road, ego.position + np.array([60.0, 0.0])))
            env.step(np.array([0.1, 0.0]))
            states.append([[*v.position, v.speed] for v in env.road.vehicles])
        return np.array(states)

    assert np.abs(run(False) - run(True)).max() <= 1e-6


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


def test_discrete_meta_actions_match_stock() -> None:
    """An MDPVehicle ego (stock act, float-code step) among IDM traffic."""

    def run(fast: bool) -> tuple[np.ndarray, list]:
        env = HighwayEnv(config={"action": {"type": "DiscreteMetaAction"}, "vehicles_count": 20})
        env.reset(seed=17)
        if fast:
            accelerate(env.road)
        states, lanes = [], []
        for a in (3, 0, 3, 2, 1, 4):  # faster, lane left, faster, lane right, idle, slower
            env.step(a)
            states.append([[*v.position, v.speed, v.heading] for v in env.road.vehicles])
            lanes.append([v.lane_index for v in env.road.vehicles])
        return np.array(states), lanes

    (stock, lanes_stock), (fast, lanes_fast) = run(False), run(True)
    assert np.abs(stock - fast).max() <= 1e-6
    assert lanes_stock == lanes_fast


@pytest.mark.parametrize("obs_config", [
    {"type": "Kinematics"},  # highway-v0's default: 5 vehicles, presence x y vx vy
    {"type": "Kinematics", "vehicles_count": 8, "features": ["presence", "x", "y", "vx", "vy", "cos_h", "sin_h"],
     "absolute": True, "see_behind": True, "clip": False},
    {"type": "Kinematics", "vehicles_count": 30, "normalize": False},  # fewer vehicles than rows: zero rows
])
def test_kinematics_observation_without_pandas_is_the_stock_array(obs_config: dict) -> None:
    from mopmc.runtime.fastsim.observe import kinematics

    env = HighwayEnv(config={"action": {"type": "ContinuousAction"}, "observation": obs_config, "vehicles_count": 20})
    env.reset(seed=5)
    actions = np.random.default_rng(2).uniform(-0.5, 0.5, size=(12, 2))
    for a in actions:
        stock = env.observation_type.observe()
        fast = kinematics(env.observation_type)
        assert fast.dtype == stock.dtype and fast.shape == stock.shape
        assert np.array_equal(fast, stock)  # bit for bit
        env.step(a)
    assert not np.array_equal(stock[1:], 0)  # other vehicles were observed


def test_fast_world_observes_with_the_stock_values() -> None:
    from mopmc.runtime.delay import parse_delay_spec

    worlds = [cls(EnvConfig(vehicles=12, duration=3), parse_delay_spec("0.1")) for cls in (RealtimeHighwayEnv, FastRealtimeHighwayEnv)]
    observations = [[w.reset_world(3)] for w in worlds]
    for w, run in zip(worlds, observations):
        for a in ([0.2, 0.05], [-0.3, -0.05], [0.0, 0.1]):
            w.advance(0.1)
            w.apply_action(np.array(a))
            w.advance(0.9)
            run.append(w.observe())
    assert np.abs(np.array(observations[0]) - np.array(observations[1])).max() <= 1e-6
