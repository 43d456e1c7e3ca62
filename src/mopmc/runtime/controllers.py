"""Rule-based secondary controllers: keep the lane, control speed from TTC and time headway.

Both of the paper's secondary controllers keep the current lane and choose a speed; they differ in
the TTC threshold. A controller's command is held for a whole decision period (1 s at highway-v0's
1 Hz policy), so both laws are designed for that horizon rather than for a 15 Hz loop:

- **Speed.** The target speed is the largest speed ``v`` (at most ``cruise_speed``) with
  ``gap / (v - v_leader) >= ttc_threshold`` and ``gap / v >= headway_threshold``, i.e.
  ``min(cruise_speed, v_leader + gap / ttc_threshold, gap / headway_threshold)``, evaluated on the
  gap predicted at the end of the horizon (one-step look-ahead). The acceleration reaches it over
  ``horizon`` seconds, clipped to ``[-max_brake, max_accel]``.
- **Lane.** Heading target ``-gain * lateral / (speed * horizon)`` (at most ``max_heading``), reached
  over the horizon by a constant heading rate, converted to a steering angle through highway-env's
  kinematic bicycle model (``heading rate = v sin(beta) / (L/2)``, ``beta = atan(tan(steer) / 2)``).

>>> from mopmc.runtime.scene import Scene, VehicleState
>>> scene = Scene(VehicleState(lane=1, s=0.0, speed=25.0), (VehicleState(lane=1, s=25.0, speed=20.0),))
>>> CONTROLLER_1.command(scene).acceleration < 0   # closing in on a slower leader: brake
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from mopmc.runtime.scene import Scene, VehicleState


class Command(NamedTuple):
    """A physical control command: acceleration [m/s^2] and front-wheel steering angle [rad]."""

    acceleration: float
    steering: float


@dataclass(frozen=True)
class LaneKeeper:
    """Steers back to the current lane centre over ``horizon`` seconds.

    Args:
        horizon: seconds the command is held (the decision period).
        gain: fraction of the lateral offset removed per horizon (0 < gain <= 1).
        max_heading: largest heading relative to the lane it commands [rad].
        max_steering: steering clip [rad] (highway-env's continuous action: pi/4).
    """

    horizon: float = 1.0
    gain: float = 0.5
    max_heading: float = 0.1
    max_steering: float = math.pi / 4

    def steering(self, ego: VehicleState) -> float:
        speed = max(ego.speed, 1.0)
        target = -self.gain * ego.lateral / (speed * self.horizon)
        target = min(self.max_heading, max(-self.max_heading, target))
        heading_rate = (target - ego.heading) / self.horizon
        sin_beta = min(1.0, max(-1.0, heading_rate * (ego.length / 2.0) / speed))
        steer = math.atan(2.0 * math.tan(math.asin(sin_beta)))
        return min(self.max_steering, max(-self.max_steering, steer))


@dataclass(frozen=True)
class SecondaryController:
    """A lane-keeping, speed-controlling rule-based controller.

    Args:
        name: controller name used in logs ("1", "2", ...).
        ttc_threshold: smallest TTC [s] the target speed allows.
        headway_threshold: smallest time headway [s] the target speed allows.
        cruise_speed: speed [m/s] without a binding leader.
        max_accel: largest acceleration [m/s^2].
        max_brake: largest deceleration [m/s^2] (highway-env's continuous range is 5).
        horizon: seconds the command is held (the decision period).
    """

    name: str
    ttc_threshold: float
    headway_threshold: float = 1.5
    cruise_speed: float = 25.0
    max_accel: float = 3.0
    max_brake: float = 5.0
    horizon: float = 1.0
    lane_keeper: LaneKeeper = LaneKeeper()

    def target_speed(self, scene: Scene) -> float:
        """The speed this controller steers to, from the current scene."""
        leader = scene.leader()
        if leader is None:
            return self.cruise_speed
        gap = scene.gap_to(leader)
        first = self._safe_speed(gap, leader.speed)
        # Look ahead: the command holds for the whole horizon, during which the gap keeps changing.
        mean_speed = (scene.ego.speed + first) / 2.0
        predicted_gap = gap - (mean_speed - leader.speed) * self.horizon
        return self._safe_speed(min(gap, predicted_gap), leader.speed)

    def _safe_speed(self, gap: float, leader_speed: float) -> float:
        if gap <= 0:
            return 0.0
        limit = min(
            self.cruise_speed,
            leader_speed + gap / self.ttc_threshold,
            gap / self.headway_threshold,
        )
        return max(0.0, limit)

    def command(self, scene: Scene) -> Command:
        """The command for the next decision period."""
        accel = (self.target_speed(scene) - scene.ego.speed) / self.horizon
        accel = min(self.max_accel, max(-self.max_brake, accel))
        return Command(accel, self.lane_keeper.steering(scene.ego))


CONTROLLER_1 = SecondaryController(name="1", ttc_threshold=4.5)
"""The paper's first secondary controller (TTC threshold 4.5 s, as in the authors' default)."""

CONTROLLER_2 = SecondaryController(name="2", ttc_threshold=7.0)
"""The second, more cautious secondary controller (TTC threshold 7 s)."""
