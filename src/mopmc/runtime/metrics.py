"""Per-step safety metrics, matching the switch model's rewards (see docs/runtime.md).

- **TTC** [s]: time to collision with the same-lane leader, gap / closing speed where the gap is
  bumper to bumper and the closing speed is ego speed minus leader speed. Infinite when there is no
  leader or the gap is opening (closing speed <= 0); 0 when the vehicles overlap. For percentiles
  TTC is capped at :data:`TTC_CAP` (infinite values count as the cap).
- **Time headway** (HW) [s]: gap / ego speed; infinite without a leader or at ego speed <= 0; 0 on
  overlap. Capped at :data:`HEADWAY_CAP` for percentiles.
- **Lane departure** (LD): 1 when the ego centre is off the road at the end of the step, else 0.
- **Controller cost** (CTL): 1 for a primary step, 2 for a secondary step (the model's
  ``ctrl_cost`` reward times MAX_TS).

>>> from mopmc.runtime.scene import Scene, VehicleState
>>> scene = Scene(VehicleState(lane=1, s=0.0, speed=25.0), (VehicleState(lane=1, s=30.0, speed=20.0),))
>>> time_to_collision(scene), time_headway(scene)
(5.0, 1.0)
"""

from __future__ import annotations

import math
from typing import NamedTuple

from mopmc.runtime.scene import Scene

TTC_CAP = 100.0
"""Seconds; TTC values above it (including infinity) count as this value in percentiles."""

HEADWAY_CAP = 100.0
"""Seconds; headways above it (including infinity) count as this value in percentiles."""

PRIMARY_COST = 1
SECONDARY_COST = 2


class StepMetrics(NamedTuple):
    """Metrics of one decision step, measured on the scene at the end of the step."""

    ttc: float
    headway: float
    lane_departure: bool


def time_to_collision(scene: Scene) -> float:
    """TTC in seconds with the same-lane leader (``math.inf`` if none or opening)."""
    leader = scene.leader()
    if leader is None:
        return math.inf
    gap = scene.gap_to(leader)
    if gap <= 0:
        return 0.0
    closing = scene.ego.speed - leader.speed
    return gap / closing if closing > 0 else math.inf


def time_headway(scene: Scene) -> float:
    """Time headway in seconds to the same-lane leader (``math.inf`` if none or standing still)."""
    leader = scene.leader()
    if leader is None:
        return math.inf
    gap = scene.gap_to(leader)
    if gap <= 0:
        return 0.0
    return gap / scene.ego.speed if scene.ego.speed > 0 else math.inf


def lane_departure(scene: Scene) -> bool:
    """True when the ego centre is off the road."""
    return not scene.on_road


def step_metrics(scene: Scene) -> StepMetrics:
    """All per-step metrics of ``scene``."""
    return StepMetrics(time_to_collision(scene), time_headway(scene), lane_departure(scene))
