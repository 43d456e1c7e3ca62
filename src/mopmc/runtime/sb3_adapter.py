"""The only module that imports Stable-Baselines3 (and torch): DDPG models, the training env, agents.

- :class:`TrainingEnv`: the *undelayed* :class:`~mopmc.runtime.highway_adapter.RealtimeHighwayEnv`
  seen through an :class:`~mopmc.runtime.agents.AgentInterface` (features in, policy action out),
  with a shaped reward and seeded resets (episode ``e`` uses the world seed of
  :func:`~mopmc.runtime.episode.episode_seeds` ``(seed, e)``; the episode counter is checkpointed).
- :func:`build_ddpg`, :func:`save_checkpoint`, :func:`load_checkpoint`: a model with its replay
  buffer and every random state SB3 draws from (global numpy for replay sampling, torch, the action
  space for warm-up actions, the exploration noise's Generator), so that a resumed run repeats the
  uninterrupted one exactly when checkpoints are taken at episode boundaries.
- :class:`PolicyAgent` and :func:`load_agent`: a trained model as the runtime's primary controller.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mopmc.errors import ConfigError, DependencyError
from mopmc.runtime.agents import FEATURE_SIZE, SHIPPED, AgentInterface, agent_file, interface_beside  # noqa: F401 (SHIPPED)
from mopmc.runtime.config import EnvConfig
from mopmc.runtime.episode import episode_seeds
from mopmc.runtime.highway_adapter import make_world
from mopmc.runtime.train import RewardConfig

try:
    import gymnasium
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.noise import ActionNoise
    from stable_baselines3.common.vec_env import DummyVecEnv
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise DependencyError(
        f"training and loading agents needs the drl extra ({exc.name} is missing): pip install \"mopmc[drl]\""
    ) from None



class TrainingEnv(gymnasium.Env):
    """The zero-delay real-time highway env with an agent interface, shaped reward, seeded resets."""

    metadata = {"render_modes": []}

    def __init__(self, env: EnvConfig, interface: AgentInterface, reward: RewardConfig, seed: int,
                 simulator: str = "stock") -> None:
        self.world = make_world(env, "0", simulator)
        self.interface = interface
        self.weights = reward
        self.root_seed = seed
        self.episodes_started = 0
        self.observation_space = gymnasium.spaces.Box(-10.0, 10.0, (FEATURE_SIZE,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (interface.action_size,), np.float32)
        self._obs: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        # The episode counter, not SB3's seed argument, picks the traffic: it is what a checkpoint stores.
        world_seed = episode_seeds(self.root_seed, self.episodes_started).world
        self.episodes_started += 1
        self._obs = self.world.reset_world(world_seed)
        return self.interface.features(self._obs), {}

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, bool, dict]:
        env_action = self.interface.env_action(action, self._obs)
        self._obs, _, terminated, truncated, info = self.world.step(env_action)
        scene = self.world.scene()
        w = self.weights
        ego = scene.ego
        reward = (
            w.alive + w.speed * min(max((ego.speed - 20.0) / 10.0, 0.0), 1.0)
            - w.centering * (ego.lateral / 2.0) ** 2 - w.heading * (ego.heading / 0.1) ** 2
        )
        if scene.crashed:
            reward, terminated = w.collision, True
        elif not scene.on_road:
            reward = w.offroad
            terminated = terminated or w.offroad_terminal
        return self.interface.features(self._obs), float(reward), bool(terminated), bool(truncated), info


class SeededNormalNoise(ActionNoise):
    """Gaussian exploration noise drawn from its own :class:`numpy.random.Generator`."""

    def __init__(self, sigma: float, size: int, rng: np.random.Generator) -> None:
        super().__init__()
        self.sigma = sigma
        self.size = size
        self.rng = rng

    def __call__(self) -> np.ndarray:
        return self.rng.normal(0.0, self.sigma, self.size).astype(np.float32)


class DdpgSettings(NamedTuple):
    actor: tuple[int, ...]
    critic: tuple[int, ...]
    buffer_size: int
    learning_starts: int
    batch_size: int
    learning_rate: float
    gamma: float
    tau: float
    action_noise: float
    seed: int


def make_vec_env(env: TrainingEnv) -> Any:
    return DummyVecEnv([lambda: env])


def build_ddpg(settings: DdpgSettings, vec_env: Any) -> Any:
    """A fresh SB3 DDPG model (one env step per update, one gradient step per env step)."""
    torch.set_num_threads(1)
    size = vec_env.action_space.shape[0]
    noise_rng = np.random.default_rng(np.random.SeedSequence(entropy=settings.seed, spawn_key=(2**32 + 1,)))
    return sb3.DDPG(
        "MlpPolicy", vec_env,
        learning_rate=settings.learning_rate, buffer_size=settings.buffer_size,
        learning_starts=settings.learning_starts, batch_size=settings.batch_size, tau=settings.tau,
        gamma=settings.gamma, train_freq=(1, "step"), gradient_steps=1,
        action_noise=SeededNormalNoise(settings.action_noise, size, noise_rng),
        policy_kwargs={"net_arch": {"pi": list(settings.actor), "qf": list(settings.critic)}},
        seed=settings.seed, device="cpu", verbose=0,
    )


def _write_json(path: Path, doc: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as handle:
        json.dump(doc, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _random_state(model: Any) -> dict[str, Any]:
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "numpy_global": [kind, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state().tolist(),
        "action_space": model.action_space.np_random.bit_generator.state,
        "noise": model.action_noise.rng.bit_generator.state,
    }


def _restore_random_state(model: Any, state: dict[str, Any]) -> None:
    kind, keys, pos, has_gauss, cached = state["numpy_global"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    model.action_space.np_random.bit_generator.state = state["action_space"]
    model.action_noise.rng.bit_generator.state = state["noise"]


def save_checkpoint(folder: Path, model: Any, env: TrainingEnv, progress: dict[str, Any]) -> None:
    """Write model, replay buffer and random/progress state into ``folder`` (a new directory).

    The caller makes the checkpoint visible atomically afterwards (a pointer file written with
    ``os.replace``); a crash while writing leaves an unreferenced folder behind, never a torn one.
    """
    folder.mkdir(parents=True, exist_ok=False)
    model.save(folder / "model.zip")
    model.save_replay_buffer(folder / "replay.pkl")
    # The env was already reset for the next episode; a resumed run resets it again with the same seed.
    state = {"episodes_started": env.episodes_started - 1, "random": _random_state(model), "progress": progress}
    _write_json(folder / "state.json", state)


def load_checkpoint(folder: Path, vec_env: Any, env: TrainingEnv) -> tuple[Any, dict[str, Any]]:
    """Load a checkpoint written by :func:`save_checkpoint`; returns (model, progress)."""
    torch.set_num_threads(1)
    state = json.loads((folder / "state.json").read_text())
    model = sb3.DDPG.load(folder / "model.zip", env=vec_env, device="cpu")
    model.load_replay_buffer(folder / "replay.pkl")
    _restore_random_state(model, state["random"])
    env.episodes_started = state["episodes_started"]
    model._last_obs = None  # make learn() reset the env: the saved observation belongs to the killed process
    return model, state["progress"]


class StepHooks(BaseCallback):
    """Calls ``on_boundary(model)`` at each rollout start that follows an episode end, ``on_step`` per step.

    At a rollout start the previous step's gradient update is done, so a checkpoint taken there loses
    nothing; a boundary (the last step ended an episode) makes the env's next state a seeded reset.
    """

    def __init__(self, on_boundary: Callable[[Any], None], on_step: Callable[[int], None]) -> None:
        super().__init__()
        self._on_boundary = on_boundary
        self._on_step_fn = on_step
        self._episode_ended = False

    def _on_rollout_start(self) -> None:
        if self._episode_ended:
            self._on_boundary(self.model)

    def _on_step(self) -> bool:
        # SB3's off-policy loop does not maintain _last_episode_starts; the step's dones tell.
        self._episode_ended = bool(self.locals["dones"][0])
        self._on_step_fn(self.model.num_timesteps)
        return True


def learn(model: Any, total_steps: int, hooks: StepHooks) -> None:
    """Train until ``model.num_timesteps`` reaches ``total_steps`` (continuing a loaded model)."""
    remaining = total_steps - model.num_timesteps
    if remaining > 0:
        model.learn(total_timesteps=remaining, callback=hooks, reset_num_timesteps=False, progress_bar=False)


def policy_parameters(model: Any) -> np.ndarray:
    """All actor and critic weights, flattened (to compare runs)."""
    return np.concatenate([p.detach().cpu().numpy().ravel() for p in model.policy.parameters()])


def save_policy(model: Any, path: Path) -> None:
    """Save the model without its replay buffer, atomically (``path`` ends in ``.zip``)."""
    tmp = path.with_name(path.stem + ".tmp.zip")
    model.save(tmp)
    os.replace(tmp, path)


class PolicyAgent:
    """A trained SB3 policy acting deterministically, through its interface when it has one."""

    def __init__(self, model: Any, interface: AgentInterface | None = None) -> None:
        self.model = model
        self.interface = interface

    def act(self, observation: Any) -> np.ndarray:
        if self.interface is None:
            action, _ = self.model.predict(observation, deterministic=True)
            return np.asarray(action, dtype=float)
        action, _ = self.model.predict(self.interface.features(observation), deterministic=True)
        return self.interface.env_action(action, observation)


def load_agent(spec: str) -> PolicyAgent:
    """Load ``shipped`` or ``[ALGO:]PATH.zip`` (ALGO one of ddpg, td3, sac, ppo, a2c; default ddpg).

    A ``PATH.json`` beside the model with an ``interface`` entry (written by ``mopmc rt train``)
    makes the agent act through that :class:`~mopmc.runtime.agents.AgentInterface`; without it the
    model reads the raw observation and writes the raw action.
    """
    algo, path = agent_file(spec)
    torch.set_num_threads(1)
    try:
        model = getattr(sb3, algo.upper()).load(path, device="cpu")
    except Exception as exc:  # SB3 raises many types for a wrong or corrupt file
        raise ConfigError(f"agent file {path!r} is not a loadable {algo.upper()} model ({type(exc).__name__}: {exc})") from None
    return PolicyAgent(model, interface_beside(path))
