"""Resumable sweeps: many seeded episodes over several settings, on a process pool or on Ray.

A sweep is a list of jobs ``(setting, episode index, seed)``. Layout of the output folder::

    OUT/sweep.json                         the manifest: format, settings (fingerprinted), episodes
    OUT/episodes/<setting>/<episode>.json  one file per finished episode (its step records)

Every episode file is written by the main process to ``<name>.tmp``, flushed and fsynced, then
renamed (``os.replace``, atomic on POSIX) and the folder fsynced, so a file either exists whole or
not at all. A restarted sweep reads the folder, skips every job whose file exists and runs only the
rest: killed at any moment, it loses no finished episode and repeats none. Leftover ``*.tmp`` files
of an interrupted write are removed on restart. Restarting with a setting of the same name but a
different description is refused (naming the setting and what differs); new settings extend the
folder (e.g. a scheduler added to a table that has run) and reuse the others' finished episodes.

Episode ``e`` of a setting with seed ``S`` uses the seeds of ``(S, e)``
(:func:`~mopmc.runtime.episode.episode_seeds`), so the result does not depend on the order, the
number of workers or the backend.

>>> s = Setting("none", delay="0.1", switch="none", config=small_config())  # doctest: +SKIP
>>> run_sweep("out", [s], episodes=4)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from mopmc.errors import ConfigError
from mopmc.runtime.agents import env_for_agent
from mopmc.runtime.config import SIMULATORS, EnvConfig, RuntimeConfig
from mopmc.runtime.delay import DEFAULT_DELAY_SPEC
from mopmc.runtime.differences import differences
from mopmc.runtime.episode import EpisodeResult, StepRecord

FORMAT = "mopmc-sweep/1"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+=-]*$")


@dataclass(frozen=True)
class Setting:
    """One simulated setting: delay, switch, agent, root seed and runtime configuration."""

    name: str
    delay: str = DEFAULT_DELAY_SPEC
    switch: str = "none"
    agent: str = "idm"
    seed: int = 0
    config: RuntimeConfig = field(default_factory=RuntimeConfig)
    simulator: str = "stock"  # or "fast": the accelerated road (mopmc.runtime.fastsim), same dynamics

    def __post_init__(self) -> None:
        # The scene itself (vehicles, duration, frequencies, lanes) is checked by EnvConfig.
        if not isinstance(self.config, RuntimeConfig):
            raise ConfigError(f"setting {self.name}: config must be a RuntimeConfig, got {type(self.config).__name__}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"setting {self.name}: seed must be an integer >= 0, got {self.seed!r}")
        if self.simulator not in SIMULATORS:
            raise ConfigError(f"setting {self.name}: simulator must be 'stock' or 'fast', got {self.simulator!r}")
        # A trained agent runs at the decision frequency it was trained at (agent_policy_frequency).
        env = env_for_agent(self.config.env, self.agent)
        if env is not self.config.env:
            object.__setattr__(self, "config", dataclasses.replace(self.config, env=env))

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (a scheduler file or agent file is identified by its sha256)."""
        doc = {"name": self.name, "delay": self.delay, "switch": self.switch, "agent": self.agent,
               "seed": self.seed, "config": dataclasses.asdict(self.config), "simulator": self.simulator}
        for key in ("switch", "agent"):
            path = Path(getattr(self, key).split(":", 1)[-1])
            if path.is_file():
                doc[f"{key}_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        return doc


class Job(NamedTuple):
    setting: str
    episode: int
    seed: int


class SweepResult(NamedTuple):
    """What a sweep holds after the call: every episode per setting (in episode order)."""

    out: Path
    ran: int
    skipped: int
    episodes: dict[str, tuple[EpisodeResult, ...]]


def small_config(vehicles: int = 5, duration: float = 10.0) -> RuntimeConfig:
    """A cheap scene for tests and smoke runs (stock integration step)."""
    return RuntimeConfig(env=EnvConfig(vehicles=vehicles, duration=duration, max_substep=1 / 15))


# --- worker side (a process-pool worker or a Ray task) -------------------------------------------
_CACHE: dict[Any, Any] = {}


def _runtime(setting: Setting) -> tuple[Any, Any, Any, Any]:
    """World, agent, policy and controllers of a setting, cached per worker process."""
    key = (setting.config.env, setting.delay, setting.agent, setting.switch, repr(setting.config), setting.simulator)
    if key not in _CACHE:
        from mopmc.runtime import highway_adapter as hw
        from mopmc.runtime.delay import parse_delay_spec
        from mopmc.runtime.policy import parse_switch
        from mopmc.runtime.simulate import _controllers

        distribution = parse_delay_spec(setting.delay)
        world = hw.make_world(setting.config.env, distribution, setting.simulator)
        agent = hw.IdmAgent(world) if setting.agent == "idm" else hw.load_agent(setting.agent)
        policy = parse_switch(setting.switch, setting.config.switch.configurations)
        _CACHE.clear()  # one setting at a time per worker keeps memory flat
        _CACHE[key] = (world, agent, policy, _controllers(setting.config, world.decision_period), distribution)
    return _CACHE[key]


def run_job(setting: Setting, episode: int) -> dict[str, Any]:
    """Run one episode of ``setting``; returns its JSON-ready document."""
    from mopmc.runtime.episode import ExitCondition, episode_seeds, run_episode
    from mopmc.runtime.policy import SchedulerPolicy

    world, agent, policy, controllers, distribution = _runtime(setting)
    k = setting.config.switch.min_consecutive_calls
    if isinstance(policy, SchedulerPolicy) and policy.scheduler.binding.min_consecutive_calls is not None:
        k = policy.scheduler.binding.min_consecutive_calls
    result = run_episode(
        world, agent, distribution, episode_seeds(setting.seed, episode), episode=episode, policy=policy,
        controllers=controllers, k=k, exit_condition=ExitCondition(setting.config.switch.exit_headway),
        secondary_delay=setting.config.switch.secondary_delay,
    )
    return {"format": FORMAT, "setting": setting.name, "episode": episode, "seed": setting.seed,
            "terminated": result.terminated, "fields": list(StepRecord._fields),
            "records": [list(r) for r in result.records]}


# --- files ---------------------------------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that the file appears whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def episode_path(out: Path, setting: str, episode: int) -> Path:
    return out / "episodes" / setting / f"{episode:06d}.json"


def episode_from_doc(doc: dict[str, Any]) -> EpisodeResult:
    """An :class:`EpisodeResult` from an episode file's document."""
    records = tuple(StepRecord(*r) for r in doc["records"])
    return EpisodeResult(int(doc["episode"]), records, bool(doc["terminated"]))


def read_episode(path: Path, setting: Setting | None = None, episode: int | None = None) -> EpisodeResult:
    """Read an episode file; with ``setting`` and ``episode``, also check that it is that episode's
    (a file copied from another setting, episode or sweep is refused by name, not summed silently)."""
    fix = "remove it to run that episode again" if setting is not None else "expected an episode file of a sweep"
    try:
        doc = json.loads(path.read_text())
        result = episode_from_doc(doc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = f"missing key {exc}" if isinstance(exc, KeyError) else " ".join(str(exc).split())
        raise ConfigError(f"{path}: not a readable sweep episode file ({why}); {fix}") from None
    if doc.get("format") != FORMAT or doc.get("fields") != list(StepRecord._fields):
        raise ConfigError(f"{path}: not a {FORMAT} episode file with the fields of this mopmc; {fix}")
    if setting is not None:
        found = (doc.get("setting"), doc.get("episode"), doc.get("seed"))
        if found != (setting.name, episode, setting.seed):
            raise ConfigError(f"{path}: holds setting {found[0]!r} episode {found[1]!r} seed {found[2]!r}, expected "
                              f"setting {setting.name!r} episode {episode} seed {setting.seed}; {fix}")
    for i, record in enumerate(result.records):
        for name, value in zip(StepRecord._fields, record):
            if not isinstance(value, _FIELD_TYPES[name]) or (isinstance(value, bool) and bool not in _FIELD_TYPES[name]):
                raise ConfigError(f"{path}: records[{i}].{name}: unexpected value {value!r}; {fix}")
    return result


_NUMBER = (int, float)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "episode": (int,), "step": (int,), "time": _NUMBER, "delay": _NUMBER, "hold": _NUMBER,
    "configuration": (str, type(None)), "controller": (str,), "cc": (int, type(None)),
    "exit_condition": (bool, type(None)), "exit_allowed": (bool, type(None)), "exited": (bool, type(None)),
    "ttc": _NUMBER, "headway": _NUMBER, "lane_departure": (bool,), "cost": (int,),
}


def _fingerprint(described: Sequence[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(list(described), sort_keys=True).encode()).hexdigest()


def _manifest(settings: Sequence[Setting], episodes: int) -> dict[str, Any]:
    described = json.loads(json.dumps([s.describe() for s in settings]))  # as read back from the file
    return {"format": FORMAT, "episodes": episodes, "fingerprint": _fingerprint(described), "settings": described}


def check_settings(settings: Sequence[Setting]) -> None:
    """What can be checked before any episode runs: switch names, scheduler files and whether each
    scheduler covers its setting's episode length (:func:`~mopmc.runtime.policy.check_episode_length`)."""
    from mopmc.errors import SchedulerError
    from mopmc.runtime.policy import check_episode_length, parse_switch

    for s in settings:
        try:
            policy = parse_switch(s.switch, s.config.switch.configurations)
            check_episode_length(policy, s.config.env, s.agent)
        except (ConfigError, SchedulerError) as exc:
            raise type(exc)(f"setting {s.name}: {exc}") from None


def _prepare(out: Path, settings: Sequence[Setting], episodes: int) -> None:
    names = [s.name for s in settings]
    for name in names:
        if not _NAME.match(name):
            raise ConfigError(f"setting name {name!r}: use letters, digits and . _ @ + = - only")
    if len(set(names)) != len(names):
        raise ConfigError(f"setting names must be unique, got {names}")
    if episodes < 1:
        raise ConfigError(f"episodes must be >= 1, got {episodes}")
    manifest = _manifest(settings, episodes)
    path = out / "sweep.json"
    for folder in (out, out / "episodes"):
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{folder}: is a file, not an output folder; remove it or use another --out")
    if path.exists():
        try:
            old = json.loads(path.read_text())
            if old["format"] != FORMAT:
                raise ValueError(old["format"])
            old_settings = {d["name"]: d for d in old["settings"]}
        except (OSError, ValueError, KeyError, TypeError):
            raise ConfigError(f"{path}: corrupt or foreign manifest (not {FORMAT}); remove {out} or use another "
                              "output folder") from None
        # A setting already in the folder must be the same setting; new settings extend the sweep
        # (e.g. a scheduler added to a finished table), and the folder keeps the ones not asked for.
        for described in manifest["settings"]:
            before = old_settings.get(described["name"])
            if before is not None and before != described:
                raise ConfigError(
                    f"{out}: holds a sweep with other settings: setting {described['name']!r} differs in "
                    f"{differences(before, described)}; use another output folder"
                )
        merged = list(old["settings"]) + [d for d in manifest["settings"] if d["name"] not in old_settings]
        manifest["settings"] = merged
        manifest["fingerprint"] = _fingerprint(merged)
        manifest["episodes"] = max(episodes, int(old.get("episodes", 0)))
    write_atomic(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    for tmp in (out / "episodes").glob("*/*.tmp"):
        tmp.unlink()


def pending_jobs(out: Path, settings: Sequence[Setting], episodes: int) -> tuple[list[Job], int]:
    """Jobs without an episode file, and how many have one."""
    jobs, done = [], 0
    for s in settings:
        for e in range(episodes):
            if episode_path(out, s.name, e).exists():
                read_episode(episode_path(out, s.name, e), s, e)  # a corrupt or foreign file fails now, not after the run
                done += 1
            else:
                jobs.append(Job(s.name, e, s.seed))
    return jobs, done


# --- backends ------------------------------------------------------------------------------------
def run_local(fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], workers: int) -> Iterator[Any]:
    """Yield ``fn(*job)`` for every job: in this process in order (``workers`` <= 1), else on a
    process pool in the order they finish (``fn`` must be importable by the workers)."""
    if workers <= 1:
        for job in jobs:
            yield fn(*job)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # spawn, not fork: the parent may hold threads (the progress bar) and loaded simulators
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = [pool.submit(fn, *job) for job in jobs]
        for future in as_completed(futures):
            yield future.result()
    except BrokenProcessPool:
        _stop(pool)
        raise ConfigError(_broken_pool_message(workers)) from None
    except BaseException:  # Ctrl-C, or the consumer stopped: the episodes in flight are lost anyway
        _stop(pool)
        raise
    pool.shutdown(wait=True)


def _stop(pool: Any) -> None:
    """Shut ``pool`` down now: queued jobs cancelled, running ones killed (a with-block would wait for
    every queued episode to run: 20 s and more after Ctrl-C; finished ones are already written)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        p.terminate()
    for p in processes:
        p.join(timeout=5)


def _main_script() -> Path | None:
    """The script ``python SCRIPT`` runs, or None (``python -m``, ``-c``, an interactive session)."""
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        return None
    return Path(path) if Path(path).is_file() else None


def _has_main_guard(script: Path) -> bool:
    try:
        text = script.read_text()
    except (OSError, UnicodeDecodeError):
        return True  # cannot tell: do not claim it lacks one
    return re.search(r"""__name__\s*==\s*['"]__main__['"]""", text) is not None


def _broken_pool_message(workers: int) -> str:
    script = _main_script()
    if script is not None and not _has_main_guard(script):
        return (f"the process pool's workers could not start: {script} runs the sweep when it is imported, and the "
                f"pool starts its {workers} workers with spawn, which imports {script.name} again in each; put the "
                "sweep under `if __name__ == \"__main__\":` (docs/experiments.md), or pass workers=0 to run in this "
                "process; finished episodes are kept")
    return (f"a worker process of the pool ({workers} workers, spawn) ended abruptly (killed, out of memory, or a "
            "script that runs the sweep when imported: put it under `if __name__ == \"__main__\":`); rerun to "
            "resume, finished episodes are kept, or pass workers=0 to run in this process")


def _not_in_a_spawned_worker() -> None:
    """A pool worker starting up imports the main script again; a script without a main guard calls
    run_sweep from there. Stop that worker quietly (no traceback per worker, no second sweep writing the
    folder): the parent sees its pool break and explains the fix in one line."""
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(3)


def _local(by_name: dict[str, Setting], jobs: Sequence[Job], workers: int) -> Iterator[dict[str, Any]]:
    return run_local(run_job, [(by_name[j.setting], j.episode) for j in jobs], workers)


def run_sweep(
    out: str | Path,
    settings: Sequence[Setting],
    episodes: int,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: bool = False,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Run every missing episode of ``settings`` (``episodes`` each) and return all of them.

    Args:
        out: output folder (created; an existing sweep there is resumed).
        settings: the settings; names are folder names.
        episodes: episodes per setting (episode indices ``0 .. episodes - 1``).
        workers: local processes (default: CPU count; ``0``/``1`` runs in this process).
        ray_address: run on Ray instead (``local`` starts a local instance, else ``ray.init(address)``).
        progress: show a rich progress bar (episodes done, ETA) on stderr.
        on_episode: called with each newly finished episode document.
    """
    out = Path(out)
    _not_in_a_spawned_worker()
    check_settings(settings)
    _prepare(out, settings, episodes)
    by_name = {s.name: s for s in settings}
    jobs, skipped = pending_jobs(out, settings, episodes)
    if ray_address is not None:
        from mopmc.runtime import ray_adapter

        results = ray_adapter.run_jobs(ray_address, run_job, [(by_name[j.setting], j.episode) for j in jobs],
                                       num_cpus=workers)
    else:
        results = _local(by_name, jobs, (os.cpu_count() or 1) if workers is None else workers)
    ran = 0
    bar = _Progress(len(jobs) + skipped, skipped) if progress else None
    try:
        for doc in results:
            write_atomic(episode_path(out, doc["setting"], doc["episode"]), json.dumps(doc) + "\n")
            ran += 1
            if bar is not None:
                bar.advance()
            if on_episode is not None:
                on_episode(doc)
    finally:
        if bar is not None:
            bar.close()
    loaded = {s.name: tuple(read_episode(episode_path(out, s.name, e), s, e) for e in range(episodes)) for s in settings}
    return SweepResult(out, ran, skipped, loaded)


class _Progress:
    """A rich progress bar on stderr: episodes done of all, elapsed, ETA."""

    def __init__(self, total: int, done: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("episodes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=Console(stderr=True),
        )
        self._progress.start()
        self._task = self._progress.add_task("episodes", total=total, completed=done)

    def advance(self) -> None:
        self._progress.advance(self._task)

    def close(self) -> None:
        self._progress.stop()
