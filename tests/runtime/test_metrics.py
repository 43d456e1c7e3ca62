import math

import pytest

from mopmc.runtime.metrics import lane_departure, step_metrics, time_headway, time_to_collision
from mopmc.runtime.scene import Scene, VehicleState

EGO = VehicleState(lane=1, s=100.0, speed=25.0)


def scene(*others, on_road=True):
    return Scene(EGO, tuple(others), on_road)


def test_known_ttc_and_headway():
    # Centres 30 m apart, 5 m vehicles: gap 25 m; closing 5 m/s -> TTC 5 s; headway 25/25 = 1 s.
    s = scene(VehicleState(lane=1, s=130.0, speed=20.0))
    assert time_to_collision(s) == pytest.approx(5.0)
    assert time_headway(s) == pytest.approx(1.0)


def test_nearest_same_lane_leader_counts():
    s = scene(
        VehicleState(lane=1, s=160.0, speed=0.0),   # farther ahead, ignored
        VehicleState(lane=1, s=125.0, speed=15.0),  # leader: gap 20, closing 10 -> 2 s
        VehicleState(lane=2, s=106.0, speed=0.0),   # other lane, ignored
        VehicleState(lane=1, s=80.0, speed=40.0),   # behind, ignored
    )
    assert time_to_collision(s) == pytest.approx(2.0)
    assert time_headway(s) == pytest.approx(0.8)


def test_opening_gap_and_no_leader_are_infinite():
    assert time_to_collision(scene(VehicleState(lane=1, s=130.0, speed=30.0))) == math.inf
    assert time_to_collision(scene()) == math.inf
    assert time_headway(scene()) == math.inf


def test_overlap_is_zero_and_standing_ego_has_infinite_headway():
    assert time_to_collision(scene(VehicleState(lane=1, s=103.0, speed=20.0))) == 0.0
    still = Scene(VehicleState(lane=1, s=0.0, speed=0.0), (VehicleState(lane=1, s=20.0, speed=0.0),))
    assert time_headway(still) == math.inf


def test_lane_departure():
    assert lane_departure(scene(on_road=False)) is True
    assert step_metrics(scene()).lane_departure is False
