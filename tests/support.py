"""Shared test helpers: the reference-model folder, running the installed ``mopmc``, and the paper
switch's objectives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SWITCH_REWARDS = ("ctrl_cost", "headway_cost", "lane_dep_cost", "ttc_cost")


def switch_objectives(bounds):
    """``R{"r"}<=b [C]`` for the paper switch's four reward models, in the order of SWITCH_REWARDS."""
    from mopmc.properties.objectives import Objective

    return tuple(Objective(i, f'R{{"{r}"}}<={b} [C]', "total_reward", "min", r, comparison="<=", threshold=float(b))
                 for i, (r, b) in enumerate(zip(SWITCH_REWARDS, bounds)))


#: the reference models: ``../shared/benchmarks`` beside the checkout, or ``$MOPMC_SHARED`` (where
#: they do not sit beside it, as on a lent GPU machine: see benchmarks/gpu_bundle.py)
SHARED = Path(os.environ.get("MOPMC_SHARED") or Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks")


def shared_model(relative: str) -> Path:
    """A reference model from ../shared/benchmarks, or a visible skip when it is absent."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"reference model {relative} not found under {SHARED}")
    return path


class CliResult:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def json(self):
        return json.loads(self.stdout)


def run_mopmc(*args: str, cwd: str | Path | None = None, timeout: float = 300) -> CliResult:
    """Run the installed ``mopmc`` (via ``python -m mopmc``) in a subprocess."""
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", "mopmc", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
    return CliResult(proc)


def assert_one_line_error(result: CliResult, *fragments: str, code: int = 2) -> None:
    """Exit code, exactly one non-empty stderr line, no traceback, and the expected words."""
    assert result.code == code, (result.code, result.stderr, result.stdout)
    assert len(result.stderr.splitlines()) == 1, result.stderr  # not even an empty line beside it
    assert "Traceback" not in result.stderr
    for frag in fragments:
        assert frag in result.stderr, (frag, result.stderr)


#: a four-state MDP where "a" reaches A then B with probability 1 (after retries) and "b" never:
#: goal memory (reach A, then B) and scheduler exports are tested on it
TWO_WAYS = """mdp
module m
  s : [0..3] init 0;
  [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=0);
  [b] s=0 -> (s'=3);
  [] s=1 -> (s'=2);
  [] s=2 -> true;
  [] s=3 -> true;
endmodule
label "A" = s=1;
label "B" = s=2;
"""


def assert_scheduler_refused(path, model, words, **kw) -> None:
    """``read_scheduler(path, model, **kw)`` refuses the file in one message that starts with the
    path and holds each of ``words``."""
    from mopmc.errors import SchedulerError
    from mopmc.io.scheduler_file import read_scheduler

    with pytest.raises(SchedulerError) as info:
        read_scheduler(path, model, **kw)
    message = info.value.one_line()
    assert message.startswith(f"{path}: "), message
    for word in words:
        assert word in message, (word, message)


#: A cycle a-b whose rewards have both signs ("r": +1 then -1; "r2": +1 then -2), and "spin": b
#: loses 1, c (leaving to "done") gains 1: the kernel cannot weigh such end components.
ZERO_CYCLE = """mdp
module m
  s : [0..2] init 0;
  [a] s=0 -> (s'=1);
  [b] s=1 -> (s'=0);
  [c] s=0 -> (s'=2);
  [] s=2 -> true;
endmodule
label "done" = s=2;
rewards "r"
  [a] true : 1;
  [b] true : -1;
endrewards
rewards "r2"
  [a] true : 1;
  [b] true : -2;
endrewards
rewards "spin"
  [b] true : -1;
  [c] true : 1;
endrewards
"""
