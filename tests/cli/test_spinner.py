"""``mopmc check`` shows a transient spinner on stderr when it is a terminal (never under --json or
in a pipe), and the results come out as without it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _run_with_terminal_stderr(*args: str) -> tuple[int, str, str]:
    """Run ``mopmc`` with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "mopmc", *args], stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other end closed (Linux: EIO)
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read()
        code = proc.wait(timeout=300)
    finally:
        os.close(master)
    return code, out, b"".join(chunks).decode(errors="replace")


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_check_spins_on_a_terminal_and_prints_the_same_results():
    from support import run_mopmc

    args = ("check", "example:robot", "--prop", 'Pmax=? [F "goal"]', "--prop", 'Pmin=? [F "goal"]')
    code, out, term = _run_with_terminal_stderr(*args)
    assert code == 0, term
    assert "property 2/2" in term or "loading" in term  # the spinner's text (it may finish between frames)
    piped = run_mopmc(*args)
    assert piped.code == 0 and piped.stderr == ""  # no spinner in a pipe
    values = [line.split("│")[2].strip() for line in out.splitlines() if "goal" in line and "│" in line]
    assert values == [line.split("│")[2].strip() for line in piped.stdout.splitlines() if "goal" in line and "│" in line]
    assert len(values) == 2


def test_no_spinner_under_json_even_on_a_terminal():
    code, out, term = _run_with_terminal_stderr("check", "example:robot", "--prop", 'Pmax=? [F "goal"]', "--json")
    assert code == 0
    assert "loading" not in term and "Pmax" not in term
    assert out.lstrip().startswith("[")
