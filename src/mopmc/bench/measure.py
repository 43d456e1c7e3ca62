"""Run one command in a fresh process: wall time, peak memory from outside, a hard timeout.

Peak memory is the maximum resident set size of the process tree, read by ``/usr/bin/time -v``
when it exists, else by a small wrapper process that reads ``getrusage(RUSAGE_CHILDREN)``.
On timeout the whole process group is killed (the wrapper and the measured process).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple, Sequence

_GNU_TIME = "/usr/bin/time"

#: The fallback wrapper: run argv[1:], then print the children's peak RSS (KiB on Linux) to argv[0]'s file.
_WRAPPER = """
import resource, subprocess, sys
rc = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write("Maximum resident set size (kbytes): %d\\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(rc)
"""


class Run(NamedTuple):
    """One finished (or killed) process: ``timed_out`` means it was killed after ``timeout`` seconds."""

    argv: tuple[str, ...]
    returncode: int | None
    wall: float
    peak_mib: float | None
    stdout: str
    stderr: str
    timed_out: bool


def gnu_time_available() -> bool:
    """Whether GNU time (with ``-v``) is installed at /usr/bin/time."""
    return os.access(_GNU_TIME, os.X_OK)


def _wrapped(argv: Sequence[str], report: str) -> list[str]:
    if gnu_time_available():
        return [_GNU_TIME, "-v", "-o", report, *argv]
    return [sys.executable, "-c", _WRAPPER, report, *argv]


def _peak_mib(report: str) -> float | None:
    try:
        text = open(report).read()
    except OSError:
        return None
    m = re.search(r"Maximum resident set size \(kbytes\):\s*(\d+)", text)
    return int(m.group(1)) / 1024 if m else None


def run_measured(argv: Sequence[str], timeout: float, *, env: dict | None = None, nice: int = 0) -> Run:
    """Run ``argv`` in a new session; kill its process group after ``timeout`` seconds.

    The process runs as an installed program does, with Python's bytecode cache: without
    ``PYTHONDONTWRITEBYTECODE`` (set in some sandboxes, it recompiles an editable install's sources
    in every process: about 0.14 s of each mopmc check)."""
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    fd, report = tempfile.mkstemp(prefix="mopmc-bench-", suffix=".time")
    os.close(fd)
    cmd = _wrapped(list(argv), report)
    if nice:
        cmd = [shutil.which("nice") or "nice", "-n", str(nice), *cmd]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    wall = time.perf_counter() - start
    peak = None if timed_out else _peak_mib(report)
    os.unlink(report)
    return Run(tuple(argv), None if timed_out else proc.returncode, wall, peak, out, err, timed_out)

