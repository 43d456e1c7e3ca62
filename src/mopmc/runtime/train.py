"""Train the primary controller: DDPG (Stable-Baselines3) on the undelayed real-time highway env.

``mopmc rt train CONFIG [--out DIR]`` loads a YAML/JSON file into a :class:`TrainConfig` (unknown keys
rejected by name), trains with one env step and one gradient step per decision, evaluates on a
separate env with its own seeds, and checkpoints (model, replay buffer, every random state, progress)
at the first episode boundary after every ``checkpoint_every`` steps. Running the same command again
resumes from the last checkpoint: the result is bit-identical to an uninterrupted run with the same
config (tests/runtime/test_train.py checks it, also after ``kill -9``). Output folder::

    train_config.json        the resolved config (a resume with a different config is refused)
    checkpoint.json          pointer to the last complete checkpoint (replaced atomically)
    checkpoints/step-N/      model.zip, replay.pkl, state.json (last two kept)
    evals.json               every evaluation: steps, collision rate, per-step lane departure
    best_model.zip/.json     the model with the best evaluation so far (no replay buffer) + metadata
    final_model.zip/.json    the model after ``total_steps``

>>> config = parse_train_config({"total_steps": 50, "env": {"vehicles": 3}})  # doctest: +SKIP
>>> train(config, "runs/tiny", progress=False).steps  # doctest: +SKIP
50
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mopmc.errors import ConfigError, MopmcError
from mopmc.runtime.agents import AgentInterface
from mopmc.runtime.config import SIMULATORS, EnvConfig, parse_config, read_config_file
from mopmc.runtime.differences import differences

_KEEP_CHECKPOINTS = 2


@dataclass(frozen=True)
class DdpgConfig:
    """DDPG hyperparameters (Lillicrap et al. 2016, https://arxiv.org/abs/1509.02971; SB3's ``DDPG``)."""

    actor: tuple[int, ...] = (256, 256)
    critic: tuple[int, ...] = (256, 256)
    buffer_size: int = 100_000
    learning_starts: int = 1000
    batch_size: int = 128
    learning_rate: float = 1e-3
    gamma: float = 0.95
    tau: float = 0.005
    action_noise: float = 0.1


@dataclass(frozen=True)
class RewardConfig:
    """Shaped training reward per decision (the runtime's metrics do not use it).

    ``alive + speed * clip((v - 20) / 10, 0, 1) - centering * (lateral / 2 m)^2
    - heading * (heading / 0.1 rad)^2``; a collision gives ``collision`` and ends the episode;
    leaving the road gives ``offroad`` (and ends the episode when ``offroad_terminal``).
    """

    alive: float = 1.0
    speed: float = 0.0
    centering: float = 0.5
    heading: float = 0.2
    collision: float = -5.0
    offroad: float = -5.0
    offroad_terminal: bool = True


@dataclass(frozen=True)
class InterfaceConfig:
    control: str = "steering"
    steering_limit: float = 0.05
    target_speed: float = 25.0


@dataclass(frozen=True)
class TrainConfig:
    """A training run. ``output`` is relative to the working directory; ``--out`` overrides it."""

    seed: int = 0
    total_steps: int = 20_000
    checkpoint_every: int = 2000
    eval_every: int = 2000
    eval_episodes: int = 5
    eval_seed: int = 1_000_000
    output: str = "runs/ddpg"
    simulator: str = "stock"
    ddpg: DdpgConfig = DdpgConfig()
    env: EnvConfig = field(default_factory=lambda: EnvConfig(vehicles=10, max_substep=1 / 15))
    interface: InterfaceConfig = InterfaceConfig()
    reward: RewardConfig = RewardConfig()

    def agent_interface(self) -> AgentInterface:
        i = self.interface
        return AgentInterface(i.control, i.steering_limit, self.env.lanes, i.target_speed, self.env.policy_frequency)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))


class TrainResult(NamedTuple):
    steps: int
    resumed_from: int
    evaluations: tuple[dict[str, Any], ...]
    final_model: Path
    best_model: Path | None
    already_complete: bool = False  # the folder held the finished run: nothing was trained


class TrainingInterrupted(MopmcError):
    """Raised by ``train(..., interrupt_at=N)``: the run stopped as if killed after N steps."""


# --- config --------------------------------------------------------------------------------------
def _check_keys(cls: type, raw: Any, where: str, src: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{src}: {where}: expected an object, got {type(raw).__name__}")
    names = set(cls._fields) if hasattr(cls, "_fields") else {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in set(raw) - names)  # YAML keys may be numbers
    if unknown:
        raise ConfigError(f"{src}: {where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(names))}")
    return dict(raw)


#: the least value of a number (``True``: the bound itself is allowed) where it is not 0 for integers
#: and any finite value for floats; SB3 fails deep inside (a traceback) on the others
_LIMITS: dict[str, tuple[float, bool]] = {
    "total_steps": (1, True), "checkpoint_every": (1, True), "eval_every": (1, True), "eval_episodes": (1, True),
    "ddpg.batch_size": (1, True), "ddpg.buffer_size": (1, True), "ddpg.learning_rate": (0, False),
    "ddpg.action_noise": (0, True), "interface.target_speed": (0, False),
}


def _typed(cls: type, raw: Any, where: str, src: str) -> Any:
    """Build dataclass ``cls`` from ``raw``, checking each value against the default's type."""
    d = _check_keys(cls, raw, where, src)
    defaults = cls()
    for key, value in d.items():
        default = getattr(defaults, key)
        name = f"{where}.{key}" if where != "top level" else key
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
            low, inclusive = _LIMITS.get(name, (0, True))
            if ok and not (value >= low if inclusive else value > low):
                raise ConfigError(f"{src}: {name}: expected an integer {'>=' if inclusive else '>'} {low}, got {value!r}")
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value)
            low, inclusive = _LIMITS.get(name, (-np.inf, True))
            if ok and not (value >= low if inclusive else value > low):
                raise ConfigError(f"{src}: {name}: expected a number {'>=' if inclusive else '>'} {low}, got {value!r}")
        elif isinstance(default, str):
            ok = isinstance(value, str) and value != ""
        elif isinstance(default, tuple):
            ok = isinstance(value, list) and bool(value) and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
            value = tuple(value) if ok else value
        else:  # pragma: no cover - every field has one of the types above
            ok = False
        if not ok:
            raise ConfigError(f"{src}: {name}: expected {type(default).__name__} like {default!r}, got {value!r}")
        d[key] = value
    return cls(**d)


def parse_train_config(raw: Any, source: str = "config") -> TrainConfig:
    """Build a :class:`TrainConfig` from parsed YAML/JSON, naming ``source`` and the key in errors."""
    d = _check_keys(TrainConfig, {} if raw is None else raw, "top level", source)
    base = TrainConfig()
    top = {k: v for k, v in d.items() if k not in ("ddpg", "env", "interface", "reward")}
    flat = _typed(_RunFields, top, "top level", source)
    env = base.env
    if "env" in d:
        if not isinstance(d["env"], dict):
            raise ConfigError(f"{source}: env: expected an object")
        env = parse_config({"env": {**dataclasses.asdict(base.env), **d["env"]}}, source).env
    config = TrainConfig(
        **flat._asdict(),
        ddpg=_typed(DdpgConfig, d.get("ddpg", {}), "ddpg", source),
        env=env,
        interface=_typed(InterfaceConfig, d.get("interface", {}), "interface", source),
        reward=_typed(RewardConfig, d.get("reward", {}), "reward", source),
    )
    for key in ("total_steps", "checkpoint_every", "eval_every"):
        if getattr(config, key) < 1:
            raise ConfigError(f"{source}: {key}: expected an integer >= 1, got {getattr(config, key)}")
    if config.simulator not in SIMULATORS:
        raise ConfigError(f"{source}: simulator: expected one of {', '.join(SIMULATORS)}, got {config.simulator!r}")
    if config.eval_seed == config.seed:
        raise ConfigError(f"{source}: eval_seed: must differ from seed ({config.seed}): evaluation uses its own episodes")
    if config.ddpg.batch_size < 1 or config.ddpg.buffer_size < config.ddpg.batch_size:
        raise ConfigError(f"{source}: ddpg.buffer_size must be >= ddpg.batch_size >= 1")
    if not 0 < config.ddpg.gamma <= 1 or not 0 < config.ddpg.tau <= 1:
        raise ConfigError(f"{source}: ddpg.gamma and ddpg.tau must be in (0, 1]")
    try:
        config.agent_interface()
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return config


class _RunFields(NamedTuple):
    seed: int = TrainConfig.seed
    total_steps: int = TrainConfig.total_steps
    checkpoint_every: int = TrainConfig.checkpoint_every
    eval_every: int = TrainConfig.eval_every
    eval_episodes: int = TrainConfig.eval_episodes
    eval_seed: int = TrainConfig.eval_seed
    output: str = TrainConfig.output
    simulator: str = TrainConfig.simulator


def load_train_config(path: str | Path) -> TrainConfig:
    """Read a training config file (``.yaml``/``.yml`` or ``.json``)."""
    raw = read_config_file(path)
    return parse_train_config(raw, str(path))


# --- evaluation ----------------------------------------------------------------------------------
def evaluate(agent: Any, env: EnvConfig, episodes: int, seed: int, simulator: str = "stock") -> dict[str, Any]:
    """Zero-delay episodes of ``agent`` on a fresh env: collision rate and per-step lane departure."""
    from mopmc.runtime.delay import parse_delay_spec
    from mopmc.runtime.episode import episode_seeds, run_episode
    from mopmc.runtime.highway_adapter import make_world

    delay = parse_delay_spec("0")
    world = make_world(env, delay, simulator)
    results = [run_episode(world, agent, delay, episode_seeds(seed, e), episode=e) for e in range(episodes)]
    steps = sum(len(r.records) for r in results)
    departures = sum(rec.lane_departure for r in results for rec in r.records)
    return {
        "episodes": episodes,
        "collision_rate": sum(r.terminated for r in results) / episodes,
        "prob_lane_departure": departures / steps if steps else 0.0,
        "mean_episode_steps": steps / episodes,
    }


def _score(evaluation: dict[str, Any]) -> float:
    return float(evaluation["collision_rate"] + evaluation["prob_lane_departure"])


# --- training loop -------------------------------------------------------------------------------
def _write_json(path: Path, doc: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True))
    os.replace(tmp, path)


def _metadata(config: TrainConfig, steps: int, evaluation: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "algorithm": "ddpg", "interface": config.agent_interface().to_dict(), "seed": config.seed,
        "steps": steps, "evaluation": evaluation, "config": config.to_dict(),
    }


def _read_json(path: Path, kind: type, out: Path) -> Any:
    """A JSON file of a run folder, or one line saying it is corrupt and how to start over."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable ({' '.join(str(exc).split())}); delete {out} to start over") from None
    if not isinstance(doc, kind):
        what = {dict: "object", list: "array"}.get(kind, kind.__name__)
        raise ConfigError(f"{path}: expected a JSON {what}; delete {out} to start over")
    return doc


def _prepare_output(config: TrainConfig, out: Path) -> Path | None:
    """Create ``out`` or check that it holds a run of the same config; returns the last checkpoint."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out}: is a file, not an output folder; remove it or use another --out")
    out.mkdir(parents=True, exist_ok=True)
    saved = out / "train_config.json"
    doc = config.to_dict()
    if saved.exists():
        old = _read_json(saved, dict, out)
        differ = differences(old, json.loads(json.dumps(doc)), ignore=("output", "total_steps"))
        if differ:
            raise ConfigError(f"{out}: holds a training run with a different config: {differ}; "
                              "use another --out or the same config")
        done = _steps_done(out)
        if done > config.total_steps:  # resuming would train a shorter run over the longer one's files
            raise ConfigError(f"{out}: holds a run trained to {done} steps, more than total_steps {config.total_steps}; "
                              f"use another --out, or total_steps >= {done} to go on with it")
    _write_json(saved, doc)
    pointer = out / "checkpoint.json"
    if not pointer.is_file():
        return None
    name = _read_json(pointer, dict, out).get("folder")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{pointer}: names no checkpoint folder; delete {out} to start over")
    folder = out / name
    if not (folder / "state.json").is_file():
        raise ConfigError(f"{pointer}: names {folder}, which is incomplete; delete {out} to start over")
    return folder


def _steps_done(out: Path) -> int:
    """The steps a run in ``out`` has reached: its final model's or its last checkpoint's (0: none)."""
    done = 0
    for name in ("final_model.json", "checkpoint.json"):
        if (out / name).is_file():
            steps = _read_json(out / name, dict, out).get("steps")
            if isinstance(steps, int) and not isinstance(steps, bool):
                done = max(done, steps)
    return done


def _finished(config: TrainConfig, out: Path) -> TrainResult | None:
    """The result of a run that already reached ``total_steps`` in ``out`` (its final model is
    written last, after every evaluation), or None when there is training left to do."""
    meta_path, final = out / "final_model.json", out / "final_model.zip"
    if not (meta_path.is_file() and final.is_file()):
        return None
    steps = _read_json(meta_path, dict, out).get("steps")
    if steps != config.total_steps:
        return None  # total_steps was raised: train on from the last checkpoint (lowered: refused before)
    evals = out / "evals.json"
    evaluations = tuple(_read_json(evals, list, out)) if evals.is_file() else ()
    best = out / "best_model.zip"
    return TrainResult(steps, steps, evaluations, final, best if best.is_file() else None, already_complete=True)


def train(
    config: TrainConfig, out: str | Path | None = None, *, progress: bool = True, interrupt_at: int | None = None
) -> TrainResult:
    """Train (or resume) a DDPG agent; see the module docstring for the output folder.

    A folder that already holds the finished run (its final model at ``total_steps``) is not
    trained again: the result has ``already_complete`` set and ``resumed_from == steps``.

    Args:
        config: the run.
        out: output folder (default ``config.output``); an existing run there is resumed.
        progress: draw a progress bar with ETA on stderr.
        interrupt_at: stop with :class:`TrainingInterrupted` after this many steps, without a final
            checkpoint (what ``kill -9`` does; for tests of resumption).
    """
    from mopmc.runtime import sb3_adapter as sb

    out_dir = Path(out if out is not None else config.output)
    last = _prepare_output(config, out_dir)
    finished = _finished(config, out_dir)
    if finished is not None:
        return finished
    interface = config.agent_interface()
    env = sb.TrainingEnv(config.env, interface, config.reward, config.seed, config.simulator)
    vec_env = sb.make_vec_env(env)
    d = config.ddpg
    settings = sb.DdpgSettings(d.actor, d.critic, d.buffer_size, d.learning_starts, d.batch_size,
                               d.learning_rate, d.gamma, d.tau, d.action_noise, config.seed)
    if last is None:
        model = sb.build_ddpg(settings, vec_env)
        state: dict[str, Any] = {"evaluations": [], "best_score": None, "next_checkpoint": config.checkpoint_every,
                                 "next_eval": config.eval_every}
    else:
        model, state = sb.load_checkpoint(last, vec_env, env)
    resumed_from = int(model.num_timesteps)

    bar = _Bar(progress, config.total_steps, resumed_from)

    def on_evaluation(steps: int) -> dict[str, Any]:
        evaluation = {"steps": steps, **evaluate(sb.PolicyAgent(model, interface),
                                                  config.env, config.eval_episodes, config.eval_seed,
                                                  config.simulator)}
        state["evaluations"].append(evaluation)
        _write_json(out_dir / "evals.json", state["evaluations"])
        if state["best_score"] is None or _score(evaluation) <= state["best_score"]:
            state["best_score"] = _score(evaluation)
            sb.save_policy(model, out_dir / "best_model.zip")
            _write_json(out_dir / "best_model.json", _metadata(config, steps, evaluation))
        bar.note(f"step {steps}: collisions {evaluation['collision_rate']:.0%}, "
                 f"LD/step {evaluation['prob_lane_departure']:.1%} ({config.eval_episodes} eval episodes)")
        return evaluation

    def checkpoint(steps: int) -> None:
        folder = out_dir / "checkpoints" / f"step-{steps:09d}"
        if folder.exists():  # left by a process killed while writing it
            shutil.rmtree(folder)
        sb.save_checkpoint(folder, model, env, state)
        _write_json(out_dir / "checkpoint.json", {"folder": str(folder.relative_to(out_dir)), "steps": steps})
        kept = sorted((out_dir / "checkpoints").glob("step-*"))
        for old in kept[:-_KEEP_CHECKPOINTS]:
            shutil.rmtree(old, ignore_errors=True)

    def on_boundary(m: Any) -> None:
        steps = int(m.num_timesteps)
        if steps >= state["next_eval"]:
            on_evaluation(steps)
            state["next_eval"] = (steps // config.eval_every + 1) * config.eval_every
        if steps >= state["next_checkpoint"]:
            state["next_checkpoint"] = (steps // config.checkpoint_every + 1) * config.checkpoint_every
            checkpoint(steps)

    def on_step(steps: int) -> None:
        bar.update(steps)
        if interrupt_at is not None and steps >= interrupt_at:
            raise TrainingInterrupted(f"interrupted after {steps} steps (interrupt_at)")

    with bar:
        sb.learn(model, config.total_steps, sb.StepHooks(on_boundary, on_step))
        steps = int(model.num_timesteps)
        if not state["evaluations"] or state["evaluations"][-1]["steps"] != steps:
            final_eval = on_evaluation(steps)
        else:
            final_eval = state["evaluations"][-1]
        sb.save_policy(model, out_dir / "final_model.zip")
        _write_json(out_dir / "final_model.json", _metadata(config, steps, final_eval))
    best = out_dir / "best_model.zip"
    return TrainResult(steps, resumed_from, tuple(state["evaluations"]), out_dir / "final_model.zip",
                       best if best.is_file() else None)


class _Bar:
    """A rich progress bar with ETA on stderr (or nothing); notes are printed above it."""

    def __init__(self, enabled: bool, total: int, start: int) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        self._total = total
        self._start = start
        self._started = time.perf_counter()

    def __enter__(self) -> "_Bar":
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._progress = Progress(
                TextColumn("train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                TimeRemainingColumn(), console=Console(file=sys.stderr),
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("train", total=self._total, completed=self._start)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def update(self, steps: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=steps)

    def note(self, text: str) -> None:
        if self._progress is not None:
            elapsed = time.perf_counter() - self._started
            self._progress.console.print(f"{text} [{elapsed:.0f} s]", markup=False, highlight=False)
