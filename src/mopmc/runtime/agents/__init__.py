"""The trained primary controller's interface, and the agent shipped with mopmc.

A DDPG policy does not read highway-env's raw observation or write its raw action directly: an
:class:`AgentInterface` (pure numpy, stored in the JSON file beside the model) maps

- the Kinematics observation (5 x [presence, x, y, vx, vy], normalised by highway-env to [-1, 1];
  row 0 the ego in absolute coordinates, rows 1-4 the nearest vehicles *ahead*, relative to the ego)
  to :data:`FEATURE_SIZE` features of order one: the ego's lateral offset from its lane centre,
  heading, speed and lane, and each other vehicle's gap, lateral distance and relative speeds;
- the policy's action in [-1, 1]^k to highway-env's normalised continuous action
  ``[acceleration / 5 m/s^2, steering / (pi/4) rad]``. With ``control="both"`` the policy outputs
  acceleration and steering (steering scaled to +-``steering_limit`` rad); with
  ``control="steering"`` it outputs steering only and the acceleration comes from the IDM law on the
  observed same-lane leader (highway-env's IDM parameters, target ``target_speed``).

Why the steering scale: the command is held for a whole 1 s decision, and highway-env's full range
(+-pi/4 rad) held for 1 s at 25 m/s turns the car off the road; +-0.05 rad still allows a lane change
within two decisions.

>>> import numpy as np
>>> obs = np.zeros((5, 5)); obs[0] = [1.0, 1.0, 4.5 / 16, 25 / 80, 0.0]   # lane 1, 0.5 m left of centre
>>> float(AgentInterface().features(obs)[0])
0.25
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from mopmc.errors import ConfigError

LANE_WIDTH = 4.0
VEHICLE_LENGTH = 5.0
MAX_SPEED = 40.0  # highway-env Vehicle.MAX_SPEED: the observation's normalisation ranges derive from it
ACCELERATION_RANGE = 5.0
STEERING_RANGE = math.pi / 4
EGO_FEATURES = 4
OTHER_FEATURES = 5
OTHERS = 4
FEATURE_SIZE = EGO_FEATURES + OTHERS * OTHER_FEATURES

SHIPPED_AGENT_NAME = "ddpg_highway"
SHIPPED = "shipped"
"""The ``--agent`` name of the shipped DDPG agent (:func:`shipped_agent_path`)."""
ALGORITHMS = ("ddpg", "td3", "sac", "ppo", "a2c")
CONTROLS = ("steering", "both")


@dataclass(frozen=True)
class AgentInterface:
    """Observation features and action map of a trained policy (see the module docstring).

    Args:
        control: ``steering`` (policy steers, IDM accelerates) or ``both``.
        steering_limit: steering angle [rad] of a policy output of +-1.
        lanes: lanes of the scene (highway-env's lateral normalisation is +-4 m x lanes).
        target_speed: IDM desired speed [m/s] (``control="steering"`` only).
        policy_frequency: decisions per second the policy was trained at; the runtime runs a
            trained agent at this frequency (:func:`agent_policy_frequency`).
    """

    control: str = "steering"
    steering_limit: float = 0.05
    lanes: int = 4
    target_speed: float = 25.0
    policy_frequency: float = 1.0

    def __post_init__(self) -> None:
        if self.control not in CONTROLS:
            raise ConfigError(f"agent interface: control must be one of {', '.join(CONTROLS)}, got {self.control!r}")
        if not (0 < self.steering_limit <= STEERING_RANGE):
            raise ConfigError(f"agent interface: steering_limit must be in (0, pi/4] rad, got {self.steering_limit!r}")
        if self.lanes < 1:
            raise ConfigError(f"agent interface: lanes must be >= 1, got {self.lanes!r}")
        if isinstance(self.policy_frequency, bool) or not (0 < self.policy_frequency < math.inf):
            raise ConfigError(f"agent interface: policy_frequency must be a number > 0 (Hz), got {self.policy_frequency!r}")

    @property
    def action_size(self) -> int:
        return 1 if self.control == "steering" else 2

    def _ego(self, obs: np.ndarray) -> tuple[float, float, float, float]:
        """(lateral offset [m], heading [rad], speed [m/s], lane index) of the ego."""
        y = float(obs[0, 2]) * LANE_WIDTH * self.lanes
        vx, vy = float(obs[0, 3]) * 2 * MAX_SPEED, float(obs[0, 4]) * 2 * MAX_SPEED
        lane = min(max(round(y / LANE_WIDTH), 0), self.lanes - 1)
        return y - lane * LANE_WIDTH, math.atan2(vy, vx), math.hypot(vx, vy), lane

    def features(self, observation: Any) -> np.ndarray:
        """The policy's input (float32, length :data:`FEATURE_SIZE`)."""
        obs = np.asarray(observation, dtype=float).reshape(-1, OTHER_FEATURES)
        offset, heading, speed, lane = self._ego(obs)
        out = np.zeros(FEATURE_SIZE, dtype=np.float32)
        out[:EGO_FEATURES] = [
            offset / (LANE_WIDTH / 2), heading / 0.1, (speed - 25.0) / 5.0,
            2.0 * lane / max(self.lanes - 1, 1) - 1.0,
        ]
        scale = np.array([1.0, 10 * MAX_SPEED / 50.0, LANE_WIDTH * self.lanes / LANE_WIDTH,
                          2 * MAX_SPEED / 5.0, 2 * MAX_SPEED / 2.0])
        others = obs[1 : 1 + OTHERS] * scale
        out[EGO_FEATURES : EGO_FEATURES + others.size] = others.reshape(-1)
        return np.clip(out, -10.0, 10.0)

    def idm_acceleration(self, observation: Any) -> float:
        """highway-env's IDM acceleration [m/s^2] behind the nearest observed same-lane vehicle."""
        obs = np.asarray(observation, dtype=float).reshape(-1, OTHER_FEATURES)
        _, _, speed, _ = self._ego(obs)
        accel = 3.0 * (1.0 - (max(speed, 0.0) / self.target_speed) ** 4)
        ahead = [
            (row[1] * 10 * MAX_SPEED, row[3] * 2 * MAX_SPEED) for row in obs[1:]
            if row[0] > 0.5 and abs(row[2] * LANE_WIDTH * self.lanes) < LANE_WIDTH / 2 and row[1] > 0
        ]
        if ahead:
            dx, dv = min(ahead)
            gap = max(dx - VEHICLE_LENGTH, 1e-3)
            closing = -dv  # ego speed minus leader speed
            desired = 10.0 + speed * 1.5 + speed * closing / (2.0 * math.sqrt(3.0 * 5.0))
            accel -= 3.0 * (max(desired, 0.0) / gap) ** 2
        return float(min(max(accel, -ACCELERATION_RANGE), ACCELERATION_RANGE))

    def env_action(self, action: Any, observation: Any) -> np.ndarray:
        """highway-env's normalised action ``[accel, steering]`` for a policy output in [-1, 1]^k."""
        a = np.clip(np.asarray(action, dtype=float).reshape(-1), -1.0, 1.0)
        if a.size != self.action_size:
            raise ConfigError(f"agent interface ({self.control}): expected {self.action_size} action value(s), got {a.size}")
        steering = float(a[-1]) * self.steering_limit / STEERING_RANGE
        accel = float(a[0]) if self.control == "both" else self.idm_acceleration(observation) / ACCELERATION_RANGE
        return np.array([accel, steering])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> "AgentInterface":
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: interface: expected an object")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise ConfigError(f"{where}: interface: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(names))}")
        return cls(**raw)


def shipped_agent_path() -> Path:
    """Path of the shipped DDPG agent (``ddpg_highway.zip``; its metadata is ``ddpg_highway.json``)."""
    return Path(str(resources.files(__name__).joinpath(f"{SHIPPED_AGENT_NAME}.zip")))


def metadata_path(model_path: str | Path) -> Path:
    """The JSON file beside a model ``X.zip``: ``X.json``."""
    p = Path(model_path)
    return p.with_suffix(".json") if p.suffix == ".zip" else p.with_name(p.name + ".json")


def resolve_agent_path(spec: str) -> tuple[str, str]:
    """(algorithm, path) of ``shipped`` or ``[ALGO:]PATH.zip`` (ALGO one of :data:`ALGORITHMS`, default ddpg)."""
    if spec == SHIPPED:
        return "ddpg", str(shipped_agent_path())
    head = spec.split(":", 1)[0].lower()
    if head in ALGORITHMS and ":" in spec:
        return head, spec.split(":", 1)[1]
    if ":" in spec and head.isidentifier() and not Path(spec).exists():  # ALGO:PATH with a misspelt ALGO
        raise ConfigError(f"--agent {spec}: unknown algorithm {spec.split(':', 1)[0]!r}; known: {', '.join(ALGORITHMS)} "
                          "(--agent ALGO:PATH.zip)")
    return "ddpg", spec


def interface_beside(path: str | Path) -> AgentInterface | None:
    """The :class:`AgentInterface` in the metadata ``X.json`` beside model ``X.zip`` (None without one)."""
    meta = metadata_path(path)
    if not meta.is_file():
        return None
    try:
        doc = json.loads(meta.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{meta}: cannot read the agent's metadata ({exc})") from None
    if not isinstance(doc, dict) or "interface" not in doc:
        return None
    return AgentInterface.from_dict(doc["interface"], str(meta))


def agent_policy_frequency(spec: str) -> float | None:
    """Decisions per second a trained agent runs at (its interface's), or None (``idm``, no metadata).

    The runtime runs a trained agent at the frequency it was trained at, whatever the env config
    says: a policy trained at 5 Hz holds each action for 0.2 s and is not the same controller at 1 Hz.

    >>> agent_policy_frequency("idm") is None
    True
    """
    if spec == "idm":
        return None
    interface = interface_beside(resolve_agent_path(spec)[1])
    return None if interface is None else float(interface.policy_frequency)


def agent_file(spec: str) -> tuple[str, str]:
    """(algorithm, path) of ``shipped`` or ``[ALGO:]PATH`` (:func:`resolve_agent_path`); a path that names
    no file (``PATH`` or ``PATH.zip``, as Stable-Baselines3 loads it) is a :class:`ConfigError`."""
    algo, path = resolve_agent_path(spec)
    if not Path(path).is_file() and not Path(path + ".zip").is_file():
        hint = "reinstall mopmc" if spec == SHIPPED else "pass --agent shipped, idm or a Stable-Baselines3 .zip"
        raise ConfigError(f"--agent: agent file {path!r} does not exist; {hint}")
    return algo, path


def check_agent_file(spec: str) -> None:
    """Fail now (before a sweep starts) when the agent names no file; ``idm`` needs none."""
    if spec != "idm":
        agent_file(spec)


def env_for_agent(env: Any, spec: str) -> Any:
    """``env`` (an :class:`~mopmc.runtime.config.EnvConfig`) with the agent's own policy frequency
    (:func:`agent_policy_frequency`), or ``env`` itself when the agent has none or already matches."""
    frequency = agent_policy_frequency(spec)
    if frequency is None or frequency == env.policy_frequency:
        return env
    return replace(env, policy_frequency=frequency)
