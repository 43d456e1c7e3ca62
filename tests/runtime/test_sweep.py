"""Sweeps: resume after a real kill without loss or repetition; local pool and Ray give the same files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("highway_env")

from mopmc.errors import ConfigError
from mopmc.runtime.sweep import Setting, episode_path, read_episode, run_sweep, small_config

EPISODES = 6


def _settings() -> list[Setting]:
    config = small_config(vehicles=4, duration=8)
    return [Setting("none", delay="exp:0.2", config=config, seed=3),
            Setting("C2", delay="exp:0.2", switch="C2", config=config, seed=3)]


_SCRIPT = """
import sys
from mopmc.runtime.sweep import Setting, run_sweep, small_config
config = small_config(vehicles=4, duration=8)
settings = [Setting("none", delay="exp:0.2", config=config, seed=3),
            Setting("C2", delay="exp:0.2", switch="C2", config=config, seed=3)]
run_sweep(sys.argv[1], settings, %d, workers=int(sys.argv[2]))
""" % EPISODES


def _files(out: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted((out / "episodes").glob("*/*.json"))}


def _contents(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text() for p in sorted((out / "episodes").glob("*/*.json"))}


def test_killed_sweep_resumes_without_loss_or_repetition(tmp_path: Path) -> None:
    interrupted = tmp_path / "interrupted"
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(interrupted), "2"], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while (len(_files(interrupted)) if (interrupted / "episodes").exists() else 0) < 3:
        assert proc.poll() is None, proc.stderr.read().decode()  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the sweep wrote no episodes"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its pool workers, mid-way
    proc.wait()
    before = _files(interrupted)
    assert 3 <= len(before) < 2 * EPISODES, "the kill came too late to interrupt anything"

    resumed = run_sweep(interrupted, _settings(), EPISODES, workers=0)
    assert resumed.skipped == len(before)
    assert resumed.ran == 2 * EPISODES - len(before)
    after = _files(interrupted)
    assert {k: after[k] for k in before} == before  # finished episodes were not rewritten
    assert not list(interrupted.glob("episodes/*/*.tmp"))

    reference = tmp_path / "reference"
    full = run_sweep(reference, _settings(), EPISODES, workers=0)
    assert full.ran == 2 * EPISODES and full.skipped == 0
    assert _contents(interrupted) == _contents(reference)
    assert [len(e.records) for e in resumed.episodes["C2"]] == [8] * EPISODES
    assert any(r.controller != "primary" for e in resumed.episodes["C2"] for r in e.records)


def test_episode_files_are_the_run_episodes(tmp_path: Path) -> None:
    from mopmc.runtime.simulate import simulate

    setting = _settings()[1]
    run_sweep(tmp_path, [setting], 2, workers=0)
    direct = simulate(episodes=2, delay=setting.delay, switch=setting.switch, agent=setting.agent, seed=setting.seed, config=setting.config)
    for e in range(2):
        assert read_episode(episode_path(tmp_path, "C2", e)).records == direct.episodes[e].records


def test_restart_with_other_settings_is_refused(tmp_path: Path) -> None:
    run_sweep(tmp_path, _settings()[:1], 1, workers=0)
    other = [Setting("none", delay="exp:0.3", config=small_config(vehicles=4, duration=8), seed=3)]
    with pytest.raises(ConfigError, match="setting 'none' differs in delay"):
        run_sweep(tmp_path, other, 1, workers=0)
    # the message names the keys that differ inside the config, with both values (docs/experiments.md)
    longer = [Setting("none", delay="exp:0.2", config=small_config(vehicles=4, duration=9), seed=3)]
    with pytest.raises(ConfigError) as info:
        run_sweep(tmp_path, longer, 1, workers=0)
    assert "setting 'none' differs in config.env.duration (folder 8, now 9); use another output folder" in str(info.value)
    with pytest.raises(ConfigError, match="setting name"):
        run_sweep(tmp_path / "x", [Setting("a/b")], 1, workers=0)


def test_a_script_without_a_main_guard_gets_one_clear_error(tmp_path: Path) -> None:
    """M2: the docs' snippet saved as a script: spawn re-imports it in every worker, which used to
    crash each worker with a traceback and the script with BrokenProcessPool."""
    script = tmp_path / "sweep_script.py"
    script.write_text(_SCRIPT.replace("sys.argv[1]", repr(str(tmp_path / "out"))).replace("int(sys.argv[2])", "2"))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.count("Traceback") == 1, proc.stderr  # the script's own, none from the workers
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("mopmc.errors.ConfigError: ") and "BrokenProcessPool" not in proc.stderr
    assert f"{script} runs the sweep when it is imported" in last and 'if __name__ == "__main__":' in last
    assert "workers=0" in last


def test_new_settings_extend_a_sweep_and_reuse_its_episodes(tmp_path: Path) -> None:
    first, second = _settings()
    run_sweep(tmp_path, [first], 2, workers=0)
    before = episode_path(tmp_path, "none", 1).read_bytes()
    os.utime(episode_path(tmp_path, "none", 1), (0, 0))
    result = run_sweep(tmp_path, [first, second], 2, workers=0)
    assert (result.ran, result.skipped) == (2, 2)  # only the new setting's episodes ran
    assert episode_path(tmp_path, "none", 1).stat().st_mtime == 0 and episode_path(tmp_path, "none", 1).read_bytes() == before
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert [d["name"] for d in manifest["settings"]] == ["none", "C2"]
    # asking for a subset later keeps the manifest whole and runs nothing
    again = run_sweep(tmp_path, [second], 2, workers=0)
    assert again.ran == 0 and [d["name"] for d in json.loads((tmp_path / "sweep.json").read_text())["settings"]] == ["none", "C2"]


def test_ray_local_instance_gives_the_same_episodes(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mopmc[cluster]')")
    settings = _settings()
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = run_sweep(tmp_path / "ray", settings, 2, ray_address="auto")
    finally:
        ray.shutdown()
    assert on_ray.ran == 4
    run_sweep(tmp_path / "local", settings, 2, workers=0)
    assert _contents(tmp_path / "ray") == _contents(tmp_path / "local")
    doc = json.loads((tmp_path / "ray" / "sweep.json").read_text())
    assert [s["name"] for s in doc["settings"]] == ["none", "C2"]


def test_fast_simulator_gives_the_stock_episodes(tmp_path: Path) -> None:
    import dataclasses

    stock = _settings()[1]
    fast = dataclasses.replace(stock, simulator="fast")
    a = run_sweep(tmp_path / "stock", [stock], 2, workers=0).episodes["C2"]
    b = run_sweep(tmp_path / "fast", [fast], 2, workers=0).episodes["C2"]
    assert a == b
    with pytest.raises(ConfigError, match="simulator"):
        run_sweep(tmp_path / "bad", [dataclasses.replace(stock, simulator="turbo")], 1, workers=0)


def test_a_trained_agent_setting_runs_at_the_agent_policy_frequency(tmp_path: Path) -> None:
    model = tmp_path / "agent.zip"
    model.write_bytes(b"")
    (tmp_path / "agent.json").write_text(json.dumps({"interface": {"policy_frequency": 5.0}}))
    trained = Setting("trained", agent=str(model), config=small_config())
    assert trained.config.env.policy_frequency == 5.0
    assert trained.describe()["config"]["env"]["policy_frequency"] == 5.0
    assert Setting("idm", agent="idm", config=small_config()).config.env.policy_frequency == small_config().env.policy_frequency


def test_resume_refuses_foreign_or_corrupt_episode_files_before_running(tmp_path: Path) -> None:
    """A file copied from another setting or episode was summed silently; a corrupt one failed only after the run."""
    first, second = _settings()
    run_sweep(tmp_path, [first, second], 2, workers=0)
    own = episode_path(tmp_path, "C2", 1).read_text()
    episode_path(tmp_path, "C2", 1).write_text(episode_path(tmp_path, "none", 0).read_text())
    with pytest.raises(ConfigError, match=r"holds setting 'none' episode 0 seed 3, expected setting 'C2' episode 1"):
        run_sweep(tmp_path, [first, second], 2, workers=0)
    doc = json.loads(own)
    doc["records"][0][7] = "x"  # cc
    episode_path(tmp_path, "C2", 1).write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r"records\[0\]\.cc: unexpected value 'x'; remove it"):
        run_sweep(tmp_path, [first, second], 3, workers=0)
    assert not episode_path(tmp_path, "C2", 2).exists()  # refused before running the missing episodes
    episode_path(tmp_path, "C2", 1).write_text(own)
    (tmp_path / "sweep.json").write_text(json.dumps({"format": "other", "settings": []}))
    with pytest.raises(ConfigError, match="corrupt or foreign manifest"):
        run_sweep(tmp_path, [first, second], 2, workers=0)


def _marked(folder: str, i: int) -> int:
    """A job that leaves a mark when it starts (run in a spawned worker)."""
    Path(folder, f"{i}.started").write_text("")
    time.sleep(0.2 if i == 0 else 2.0)
    return i


def test_a_stopped_local_run_cancels_its_queued_jobs(tmp_path):
    """Ctrl-C on a sweep with workers waited for every queued episode to run (20 s and more) before
    the process ended: stopping the run now cancels the queue and ends the workers."""
    from mopmc.runtime.sweep import run_local

    run = run_local(_marked, [(str(tmp_path), i) for i in range(12)], 2)
    assert next(run) == 0
    run.close()  # what an exception in the consumer (KeyboardInterrupt) does to the generator
    time.sleep(2.5)
    started = len(list(tmp_path.glob("*.started")))
    assert started < 12, started  # with the old with-block all 12 ran before close() returned
