"""The ``mopmc`` script's fast exit (``mopmc.cli.main.entry``): output, files and exit codes intact."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mopmc.cli.main import _exit_status


def _mopmc(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mopmc", *args], capture_output=True, text=True, timeout=300, **kw)


def test_results_and_written_files_are_complete_after_the_fast_exit(tmp_path):
    sched = tmp_path / "s.json"
    done = _mopmc("check", "example:dice", "--prop", 'Pmax=? [F "six"]', "--json", "--export-scheduler", str(sched))
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)  # the whole JSON reached the pipe before os._exit
    assert abs(rows[0]["value"] - 1 / 6) < 1e-9
    assert json.loads(sched.read_text())  # the exported scheduler is complete


def test_a_long_output_is_flushed_whole():
    done = _mopmc("info", "example:mini_switch", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["states"] > 0


def test_errors_keep_their_exit_code_and_one_line():
    done = _mopmc("check", "/nonexistent/model.prism", "--prop", 'P=? [F "x"]')
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "nonexistent" in done.stderr
    assert _mopmc("no-such-command").returncode == 2


def test_a_closed_pipe_is_not_a_traceback():
    # ``mopmc info ... --json | head -c 10``: the reader goes away before the output is flushed
    proc = subprocess.Popen([sys.executable, "-m", "mopmc", "info", "example:mini_switch", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    assert "Traceback" not in err


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (3, 3), ("bad thing", 1)])
def test_exit_status_is_what_sys_exit_gives(code, status, capsys):
    assert _exit_status(code) == status
    if isinstance(code, str):
        assert "bad thing" in capsys.readouterr().err
