"""The ``mopmc`` script's fast exit (``mopmc.cli.main.entry``): output, files and exit codes intact."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support import assert_one_line_error, run_mopmc
from mopmc import __version__
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


# --- usage errors (Click's): one line on stderr, exit 2, not Typer's boxed message ----------------

@pytest.mark.parametrize("args, fragments", [
    (["check"], ["missing argument", "'mopmc check'"]),
    (["check", "example:dice", "--foo"], ["no such option: --foo", "'mopmc check'"]),
    (["check", "example:dice", "--prop", 'P=? [F "six"]', "--precision", "abc"], ["--precision", "abc", "not a valid float"]),
    (["convex"], ["missing argument", "'mopmc convex'"]),
    (["convex", "example:tradeoff", "--prop", "x", "--max-iter", "many"], ["--max-iter", "many", "'mopmc convex'"]),
    (["convex", "example:tradeoff", "--pro", "x"], ["no such option: --pro", "--prop"]),
    (["design", "build"], ["missing argument", "'mopmc design build'"]),
    (["design", "build", "paper-switch", "--out", "m.prism", "--n", "two"], ["--n", "two", "'mopmc design build'"]),
    (["design", "no-such"], ["no such command", "no-such", "'mopmc design'"]),
    (["rt", "simulate", "--bogus"], ["no such option: --bogus", "'mopmc rt simulate'"]),
    (["rt", "simulate", "--episodes", "ten"], ["--episodes", "ten", "'mopmc rt simulate'"]),
    (["table3", "--eps-rel", "tiny"], ["--eps-rel", "tiny", "'mopmc table3'"]),
    (["table3", "--bogus"], ["no such option: --bogus", "'mopmc table3'"]),
    (["no-such-command"], ["no such command", "no-such-command", "'mopmc'"]),
    (["--builder"], ["--builder", "requires an argument"]),
])
def test_usage_errors_are_one_line(args, fragments, tmp_path):
    r = run_mopmc(*args, cwd=tmp_path, timeout=60)
    assert_one_line_error(r, "error: ", *fragments, code=2)
    assert "╭" not in r.stderr and "Usage:" not in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["convex", "--help"], ["design", "build", "--help"],
                                  ["rt", "simulate", "--help"], ["table3", "--help"]])
def test_help_still_exits_0_with_the_full_help(args):
    r = run_mopmc(*args, timeout=60)
    assert r.code == 0, r.stderr
    assert "Usage: mopmc" in r.stdout and "--help" in r.stdout
    assert r.stderr == ""


def test_version_and_bare_group_keep_their_behaviour():
    r = run_mopmc("--version", timeout=60)
    assert (r.code, r.stdout.strip(), r.stderr) == (0, f"mopmc {__version__}", "")
    r = run_mopmc("design", timeout=60)  # a group without a command: its help, exit 2 (as Typer does)
    assert r.code == 2 and "Usage: mopmc design" in r.stdout and "build" in r.stdout


def test_commands_keep_their_exit_codes():
    r = run_mopmc("check", "example:dice", "--prop", 'Pmax=? [F "six"]', "--json", timeout=120)
    assert r.code == 0 and r.stderr == "", r.stderr
    assert_one_line_error(run_mopmc("--builder", "fast", "info", "example:dice", timeout=60), "--builder fast", code=2)
    assert_one_line_error(run_mopmc("check", "/nonexistent/m.prism", "--prop", "P=? [F x]", timeout=60), "nonexistent", code=2)


def _app_with(monkeypatch):
    """``mopmc.cli.main.main`` over a small app whose commands end in each way a command can."""
    import typer

    from mopmc.cli import main as cli
    from mopmc.cli.common import fail

    test_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @test_app.command("ok")
    def ok() -> None:
        print("done")

    @test_app.command("exit3")
    def exit3() -> None:
        raise typer.Exit(3)

    @test_app.command("sysexit4")
    def sysexit4() -> None:
        raise SystemExit(4)

    @test_app.command("fail5")
    def fail5(n: int = typer.Option(1, "--n")) -> None:
        fail(f"failed with --n {n}", 5)

    @test_app.command("boom")
    def boom() -> None:
        raise RuntimeError("kaput")

    monkeypatch.setattr(cli, "app", test_app)
    monkeypatch.setattr(cli, "_register_optional", lambda: None)
    return cli


@pytest.mark.parametrize("args, code, err", [
    (["ok"], None, ""),
    (["exit3"], 3, ""),
    (["sysexit4"], 4, ""),
    (["fail5"], 5, "error: failed with --n 1\n"),
    (["boom"], 1, "error: internal error: RuntimeError: kaput\n"),
    (["fail5", "--n", "x"], 2, "error: invalid value for '--n': 'x' is not a valid int"),  # "int" or "integer" (Click)
    (["--help"], 0, ""),
])
def test_exit_codes_in_process(monkeypatch, capsys, args, code, err):
    cli = _app_with(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["mopmc", *args])
    if code is None:
        cli.main()  # returns: entry() exits 0
    else:
        with pytest.raises(SystemExit) as exc:
            cli.main()
        assert exc.value.code == code
    stderr = capsys.readouterr().err
    assert stderr.startswith(err) and stderr.count("\n") == (1 if err else 0), stderr


def test_a_usage_error_with_json_still_prints_json(tmp_path):
    r = run_mopmc("check", "example:dice", "--json", "--precison", "1e-6", cwd=tmp_path, timeout=60)
    assert_one_line_error(r, "no such option: --precison", code=2)
    doc = r.json()
    assert doc["exit_code"] == 2 and doc["type"] == "UsageError" and "--precison" in doc["error"]
