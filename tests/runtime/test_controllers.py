import pytest

from mopmc.runtime.controllers import CONTROLLER_1, CONTROLLER_2, LaneKeeper
from mopmc.runtime.scene import Scene, VehicleState

CONTROLLERS = [CONTROLLER_1, CONTROLLER_2]


def test_thresholds_differ():
    assert CONTROLLER_1.ttc_threshold < CONTROLLER_2.ttc_threshold


@pytest.mark.parametrize("c", CONTROLLERS)
def test_cruises_without_leader_and_brakes_behind_slow_leader(c):
    free = Scene(VehicleState(lane=0, s=0.0, speed=20.0))
    assert c.command(free).acceleration > 0
    close = Scene(VehicleState(lane=0, s=0.0, speed=25.0), (VehicleState(lane=0, s=25.0, speed=20.0),))
    assert c.command(close).acceleration == -c.max_brake


def test_lane_keeper_steers_back():
    k = LaneKeeper()
    assert k.steering(VehicleState(lane=0, s=0, speed=25.0, lateral=1.0)) < 0
    assert k.steering(VehicleState(lane=0, s=0, speed=25.0, lateral=-1.0)) > 0
    assert k.steering(VehicleState(lane=0, s=0, speed=25.0)) == 0


# --- in highway-env -------------------------------------------------------------------------------

STEPS_TO_THRESHOLD = 2
"""A controller reaches its TTC threshold within this many 1 s decision steps (stated in docs)."""


@pytest.mark.parametrize("c", CONTROLLERS, ids=["controller1", "controller2"])
def test_raises_ttc_above_threshold_behind_slower_leader(c):
    pytest.importorskip("highway_env")
    from mopmc.runtime.config import EnvConfig
    from mopmc.runtime.highway_adapter import RealtimeHighwayEnv
    from mopmc.runtime.metrics import time_to_collision

    env = RealtimeHighwayEnv(EnvConfig(vehicles=0, duration=10), delay="0")
    env.reset(seed=0)
    env.place((1, 100.0, 25.0), [(1, 125.0, 20.0)])  # 20 m bumper gap, closing 5 m/s: TTC 4 s
    ttcs = []
    for _ in range(8):
        env.advance(0.0)
        env.apply_command(c.command(env.scene()))
        env.advance(1.0)
        ttcs.append(time_to_collision(env.scene()))
        assert not env.vehicle.crashed
    first = next(i for i, t in enumerate(ttcs, start=1) if t >= c.ttc_threshold)
    assert first <= STEPS_TO_THRESHOLD
    assert all(t >= c.ttc_threshold for t in ttcs[first - 1:])


@pytest.mark.parametrize("c", CONTROLLERS, ids=["controller1", "controller2"])
def test_never_leaves_its_lane_over_20_seeded_episodes(c):
    pytest.importorskip("highway_env")
    from mopmc.runtime.config import EnvConfig
    from mopmc.runtime.highway_adapter import RealtimeHighwayEnv

    env = RealtimeHighwayEnv(EnvConfig(vehicles=4, duration=8, max_substep=1 / 15), delay="0")
    for seed in range(20):
        env.reset(seed=seed)
        lane = env.vehicle.lane_index
        for _ in range(env.max_steps):
            env.apply_command(c.command(env.scene()))
            env.advance(1.0)
            assert env.vehicle.lane_index == lane and env.vehicle.on_road, f"seed {seed}"
            assert abs(env.scene().ego.lateral) < 1.0
            if env.terminated:
                break


def test_ttc_threshold_binds_behind_a_much_slower_leader():
    scene = Scene(VehicleState(lane=0, s=0.0, speed=20.0), (VehicleState(lane=0, s=45.0, speed=5.0),))
    assert CONTROLLER_2.target_speed(scene) < CONTROLLER_1.target_speed(scene)
