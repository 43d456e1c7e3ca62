"""The real-time world of the runtime on the accelerated road (same dynamics, ~13x at 50 vehicles)."""

from __future__ import annotations

from typing import Any

from mopmc.runtime.fastsim.observe import observe
from mopmc.runtime.fastsim.road import accelerate
from mopmc.runtime.highway_adapter import RealtimeHighwayEnv


class FastRealtimeHighwayEnv(RealtimeHighwayEnv):
    """:class:`RealtimeHighwayEnv` whose road uses :func:`~mopmc.runtime.fastsim.road.accelerate`
    and whose Kinematics observation skips pandas (:func:`~mopmc.runtime.fastsim.observe.observe`)."""

    def reset_world(self, seed: int) -> Any:
        observation = super().reset_world(seed)
        accelerate(self._inner.road)
        return observation

    def observe(self) -> Any:
        return observe(self._inner.observation_type)
