import numpy as np
import pytest

pytest.importorskip("highway_env")
gymnasium = pytest.importorskip("gymnasium")

from mopmc.runtime.config import EnvConfig  # noqa: E402
from mopmc.runtime.highway_adapter import ENV_ID, RealtimeHighwayEnv, register_env  # noqa: E402
from mopmc.runtime.metrics import step_metrics  # noqa: E402

SMALL = EnvConfig(vehicles=3, duration=5)


def first_positions(delay: str) -> np.ndarray:
    env = RealtimeHighwayEnv(SMALL, delay=delay)
    env.reset(seed=11)
    env.step(np.array([1.0, 0.05]))
    return env.vehicle.position.copy()


def test_fixed_delays_give_different_trajectories():
    p0, p5, p10 = (first_positions(d) for d in ("0", "0.05", "0.10"))
    for a, b in ((p0, p5), (p5, p10), (p0, p10)):
        assert np.linalg.norm(a - b) > 1e-3


def test_delays_below_one_frame_take_effect():
    # 4 ms is far below highway-env's 66.7 ms frame; int(d * 15) would have ignored it.
    assert np.linalg.norm(first_positions("0") - first_positions("0.004")) > 1e-4


def test_same_seed_same_trajectory_and_long_delays():
    assert np.array_equal(first_positions("exp:0.2"), first_positions("exp:0.2"))
    env = RealtimeHighwayEnv(SMALL, delay="1.5")
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(2))
    assert info["delay"] == 1.5 and env.time == pytest.approx(1.5)


def test_gymnasium_registration_and_truncation():
    env = gymnasium.make(register_env(), config=SMALL, delay="0.05")
    assert ENV_ID == "mopmc/RealtimeHighway-v0"
    obs, _ = env.reset(seed=2)
    assert env.observation_space.contains(obs)
    steps, truncated, terminated = 0, False, False
    while not (truncated or terminated):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        steps += 1
    assert terminated or steps == 5


def test_hand_built_scene_metrics():
    env = RealtimeHighwayEnv(SMALL, delay="0")
    env.reset(seed=0)
    env.place((1, 100.0, 25.0), [(1, 130.0, 20.0), (2, 110.0, 30.0)])
    m = step_metrics(env.scene())
    assert m.ttc == pytest.approx(5.0) and m.headway == pytest.approx(1.0) and not m.lane_departure
    env.place((0, 100.0, 25.0), [], lateral=-4.5)  # centre beyond the left edge of lane 0
    assert step_metrics(env.scene()).lane_departure
