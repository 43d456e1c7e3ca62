"""A simulator-neutral snapshot of the road around the ego vehicle.

Metrics and rule-based controllers read only :class:`Scene`, so they can be tested on hand-built
scenes without highway-env; :mod:`mopmc.runtime.highway_adapter` builds scenes from the simulator.
Coordinates are lane (Frenet) coordinates: ``s`` along the road, ``lateral`` from the lane centre.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VehicleState:
    """One vehicle in lane coordinates.

    Attributes:
        lane: index of the lane the vehicle's centre is closest to (0 = leftmost in highway-env).
        s: longitudinal position of the centre along the road [m].
        speed: longitudinal speed along the lane [m/s].
        length: vehicle length [m].
        lateral: signed offset of the centre from the lane centre [m].
        heading: heading relative to the lane direction [rad].
    """

    lane: int
    s: float
    speed: float
    length: float = 5.0
    lateral: float = 0.0
    heading: float = 0.0


@dataclass(frozen=True)
class Scene:
    """Ego vehicle, the other vehicles, and whether the ego centre is on the road.

    ``on_road`` is the simulator's verdict (highway-env: the ego centre lies within the width of its
    closest lane, so it is False only outside the outermost lane edges).
    """

    ego: VehicleState
    others: tuple[VehicleState, ...] = ()
    on_road: bool = True
    crashed: bool = False
    time: float = 0.0

    def leader(self) -> VehicleState | None:
        """The nearest vehicle ahead of the ego in the ego's lane, or None."""
        ahead = [v for v in self.others if v.lane == self.ego.lane and v.s >= self.ego.s]
        return min(ahead, key=lambda v: v.s) if ahead else None

    def gap_to(self, other: VehicleState) -> float:
        """Bumper-to-bumper distance [m] from the ego's front to ``other``'s rear (<= 0: overlap)."""
        return other.s - self.ego.s - (other.length + self.ego.length) / 2.0
