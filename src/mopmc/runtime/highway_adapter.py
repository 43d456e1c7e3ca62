"""The only module that imports highway-env (the ``drl`` extra; SB3 lives in :mod:`mopmc.runtime.sb3_adapter`).

:class:`RealtimeHighwayEnv` is highway-env's highway scene with continuous actions where the world
keeps moving while the agent thinks: each decision has a delay during which the previous action
stays applied. It is registered as :data:`ENV_ID` by :func:`register_env`, and it is also the
:class:`~mopmc.runtime.episode.World` the switch runtime drives.

>>> env = RealtimeHighwayEnv(EnvConfig(vehicles=5), delay="0.1")  # doctest: +SKIP
>>> obs, info = env.reset(seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mopmc.errors import DependencyError
from mopmc.runtime.config import EnvConfig
from mopmc.runtime.controllers import Command, LaneKeeper
from mopmc.runtime.delay import DEFAULT_DELAY_SPEC, DelayDistribution, parse_delay_spec
from mopmc.runtime.scene import Scene, VehicleState

try:
    import gymnasium
    from highway_env.envs.highway_env import HighwayEnv
    from highway_env.vehicle.behavior import IDMVehicle
    from highway_env.vehicle.kinematics import Vehicle
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise DependencyError(
        f"the real-time highway runtime needs the drl extra ({exc.name} is missing): "
        'pip install "mopmc[drl]"'
    ) from None

ENV_ID = "mopmc/RealtimeHighway-v0"
_EPS = 1e-12


def register_env() -> str:
    """Register :data:`ENV_ID` with Gymnasium (idempotent); returns the id."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point=f"{__name__}:RealtimeHighwayEnv")
    return ENV_ID


def _lmap(v: float, lo: float, hi: float) -> float:
    return float(np.clip(2.0 * (v - lo) / (hi - lo) - 1.0, -1.0, 1.0))


class RealtimeHighwayEnv(gymnasium.Env):
    """highway-v0 (continuous actions) with observation-to-action delays.

    Args:
        config: the scene (lanes, vehicles, frequencies, duration, ``max_substep``).
        delay: a delay spec (see :mod:`mopmc.runtime.delay`) or distribution, used by :meth:`step`.

    ``step(action)`` draws a delay ``d``, simulates ``d`` seconds with the previous action, applies
    ``action`` and simulates the rest of the decision period (``max(P - d, 0)``); a step therefore
    lasts ``max(P, d)`` seconds. Integration steps are at most ``max_substep`` (10 ms by default)
    and split exactly at ``d``. The episode is truncated after ``duration * policy_frequency``
    decisions. The first decision holds the zero action (no throttle, straight wheels).
    """

    metadata = {"render_modes": []}

    def __init__(self, config: EnvConfig | None = None, delay: str | DelayDistribution = DEFAULT_DELAY_SPEC) -> None:
        self.config = config or EnvConfig()
        self.delay = parse_delay_spec(delay) if isinstance(delay, str) else delay
        c = self.config
        self._inner = HighwayEnv(
            config={
                "action": {"type": "ContinuousAction"},
                "lanes_count": c.lanes,
                "vehicles_count": c.vehicles,
                "duration": c.duration,
                "simulation_frequency": c.simulation_frequency,
                "policy_frequency": c.policy_frequency,
                "vehicles_density": c.vehicles_density,
            }
        )
        self.observation_space = self._inner.observation_space
        self.action_space = self._inner.action_space
        self.decision_period = 1.0 / c.policy_frequency
        self.max_steps = c.decision_steps
        self._delay_rng = np.random.default_rng(0)
        self._steps = 0
        self._time = 0.0
        self._next_tick = 0

    # --- Gymnasium API -------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        world_seed = int(self.np_random.integers(2**31 - 1))
        self._delay_rng = np.random.default_rng(int(self.np_random.integers(2**63 - 1)))
        obs = self.reset_world(world_seed)
        return obs, {"time": self._time}

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict]:
        d = float(self.delay.sample(self._delay_rng))
        self.advance(d)
        self.apply_action(action)
        self.advance(max(self.decision_period - d, 0.0))
        self._steps += 1
        obs = self.observe()
        reward = float(self._inner._reward(action))
        info = {"delay": d, "time": self._time, "crashed": bool(self.vehicle.crashed)}
        return obs, reward, self.terminated, self._steps >= self.max_steps, info

    # --- World API (driven by mopmc.runtime.episode) -------------------------------------------
    @property
    def vehicle(self) -> Any:
        return self._inner.vehicle

    @property
    def road(self) -> Any:
        return self._inner.road

    @property
    def time(self) -> float:
        """Simulated seconds since reset."""
        return self._time

    def reset_world(self, seed: int) -> Any:
        self._inner.reset(seed=seed)
        self._steps = 0
        self._time = 0.0
        self._next_tick = 0
        return self.observe()

    def observe(self) -> Any:
        return self._inner.observation_type.observe()

    @property
    def terminated(self) -> bool:
        return bool(self._inner._is_terminated())

    def advance(self, seconds: float) -> None:
        """Simulate ``seconds`` with the applied action held.

        Other drivers decide (``road.act``) on highway-env's grid of ``simulation_frequency`` ticks,
        as in the stock env; motion is integrated in steps of at most ``max_substep`` between ticks
        and between the given interval's ends, so an action applied after ``advance(d)`` takes
        effect exactly at ``d``.
        """
        if seconds <= _EPS:
            return
        road = self._inner.road
        tick = 1.0 / self.config.simulation_frequency
        end = self._time + seconds
        while self._time < end - _EPS:
            if self._time >= self._next_tick * tick - _EPS:
                road.act()
                self._next_tick += 1
            segment_end = min(end, self._next_tick * tick)
            span = segment_end - self._time
            n = max(1, math.ceil(span / self.config.max_substep - 1e-9))
            for _ in range(n):
                road.step(span / n)
            self._time = segment_end
        self._inner.time = self._time

    def apply_action(self, action: np.ndarray) -> None:
        self._inner.action_type.act(np.asarray(action, dtype=float))

    def apply_command(self, command: Command) -> None:
        self.apply_action(self.to_action(command))

    def to_action(self, command: Command) -> np.ndarray:
        """The normalised action in [-1, 1]^2 that realises a physical command (clipped)."""
        at = self._inner.action_type
        return np.array(
            [_lmap(command.acceleration, *at.acceleration_range), _lmap(command.steering, *at.steering_range)]
        )

    def _state(self, v: Any) -> VehicleState:
        lane = self._inner.road.network.get_lane(v.lane_index)
        s, lateral = lane.local_coordinates(v.position)
        heading = float((v.heading - lane.heading_at(s) + math.pi) % (2 * math.pi) - math.pi)
        return VehicleState(
            lane=int(v.lane_index[2]), s=float(s), speed=float(v.speed * math.cos(heading)),
            length=float(v.LENGTH), lateral=float(lateral), heading=heading,
        )

    def scene(self) -> Scene:
        ego = self.vehicle
        others = tuple(self._state(v) for v in self._inner.road.vehicles if v is not ego)
        return Scene(self._state(ego), others, bool(ego.on_road), bool(ego.crashed), self._time)

    def place(
        self, ego: tuple[int, float, float], others: list[tuple[int, float, float]] = (),  # type: ignore[assignment]
        *, lateral: float = 0.0,
    ) -> None:
        """Replace the scene: ego and constant-speed others as (lane, s [m], speed [m/s]).

        For hand-built test scenes; others hold their speed and lane (zero action).
        """
        road = self._inner.road
        road.vehicles.clear()
        network = road.network

        def make(lane_id: int, s: float, speed: float, lat: float, cls: Any) -> Any:
            lane = network.get_lane(("0", "1", lane_id))
            return cls(road, lane.position(s, lat), lane.heading_at(s), speed)

        ego_vehicle = make(ego[0], ego[1], ego[2], lateral, self._inner.action_type.vehicle_class)
        road.vehicles.append(ego_vehicle)
        self._inner.controlled_vehicles = [ego_vehicle]
        self._inner.action_type.controlled_vehicle = ego_vehicle
        for lane_id, s, speed in others:
            road.vehicles.append(make(lane_id, s, speed, 0.0, Vehicle))


class IdmAgent:
    """Stand-in primary controller: highway-env's IDM acceleration, lane keeping, no lane changes.

    The acceleration is :meth:`highway_env.vehicle.behavior.IDMVehicle.acceleration` for the ego's
    state at observation time; steering comes from :class:`~mopmc.runtime.controllers.LaneKeeper`
    because highway-env's own steering law is tuned for 15 Hz and is unstable when held for 1 s.
    """

    def __init__(self, world: RealtimeHighwayEnv, target_speed: float = 25.0) -> None:
        self.world = world
        self.target_speed = target_speed
        self.lane_keeper = LaneKeeper(horizon=world.decision_period)

    def act(self, observation: Any) -> np.ndarray:
        ego = self.world.vehicle
        road = self.world.road
        shadow = IDMVehicle(
            road, ego.position.copy(), ego.heading, ego.speed,
            target_lane_index=ego.lane_index, target_speed=self.target_speed, enable_lane_change=False,
        )
        front, _ = road.neighbour_vehicles(ego, ego.lane_index)
        accel = float(shadow.acceleration(ego_vehicle=shadow, front_vehicle=front))
        steering = self.lane_keeper.steering(self.world.scene().ego)
        return self.world.to_action(Command(accel, steering))


def make_world(env: EnvConfig, delay: Any, simulator: str = "stock") -> Any:
    """The real-time world on highway-env's road (``stock``) or the accelerated one (``fast``)."""
    if simulator == "fast":
        from mopmc.runtime.fastsim.world import FastRealtimeHighwayEnv

        return FastRealtimeHighwayEnv(env, delay)
    return RealtimeHighwayEnv(env, delay)


def load_agent(spec: str) -> Any:
    """Load ``shipped`` or ``[ALGO:]PATH.zip``; see :func:`mopmc.runtime.sb3_adapter.load_agent` (the SB3 importer)."""
    from mopmc.runtime.sb3_adapter import load_agent as load

    return load(spec)
