"""The three measurements of a cell: Storm achievability, mopmc achievability, mopmc convex query.

Each is a fresh process (best of ``repeat`` by wall time, peak memory the largest seen); each
returns one flat record (a dict of JSON scalars) that :mod:`mopmc.bench.report` tabulates.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from typing import Callable

from mopmc.bench.cells import Cell
from mopmc.bench.measure import Run, run_measured

QUERIES = ("storm", "achievability", "convex")
NOT_AVAILABLE = "n/a (convex not available)"


def mopmc_argv(*args: str) -> list[str]:
    """The ``mopmc`` command line run by this Python (``python -m mopmc``, the console script's body)."""
    return [sys.executable, "-m", "mopmc", *args]


@lru_cache(maxsize=1)
def convex_available() -> bool:
    """Whether this installation has ``mopmc convex`` (asked of the CLI itself, in a fresh process)."""
    done = subprocess.run(mopmc_argv("convex", "--help"), capture_output=True, text=True, timeout=120)
    return done.returncode == 0


def property_text(cell: Cell) -> str:
    """The cell's property on one line (for ``--prop``)."""
    lines = [l.split("//", 1)[0] for l in cell.props.read_text().splitlines()]
    return " ".join(" ".join(lines).split())


def _last_json(text: str):
    """The last complete JSON document printed on stdout (tolerates log lines before it)."""
    for start in (i for i in range(len(text)) if text[i] in "[{" and (i == 0 or text[i - 1] == "\n")):
        try:
            return json.loads(text[start:])
        except json.JSONDecodeError:
            continue
    lines = [l for l in text.splitlines() if l.strip().startswith("{")]
    for line in reversed(lines):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


def _error_line(run: Run) -> str:
    lines = [l for l in run.stderr.strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else f"exit code {run.returncode}"


def parse_storm(run: Run) -> dict:
    lines = [json.loads(l) for l in run.stdout.splitlines() if l.startswith("{")]
    rec: dict = {}
    for line in lines:
        rec.update({k: v for k, v in line.items() if k != "stage"})
    out = {k: rec.get(k) for k in ("states", "choices", "transitions", "build", "check", "parse", "import")}
    out["result"] = rec.get("result")
    return out


def parse_achievability(run: Run) -> dict:
    doc = _last_json(run.stdout)
    row = doc[0] if isinstance(doc, list) else doc
    t = row.get("timings", {})
    return {
        "load": t.get("load"),
        "check": t.get("check"),
        "result": row.get("achievable", row.get("value")),
        "iterations": row.get("iterations"),
    }


def parse_convex(run: Run) -> dict:
    doc = _last_json(run.stdout)
    row = doc[0] if isinstance(doc, list) else doc
    t = row.get("timings", {})
    check = t.get("check", t.get("total"))
    return {
        "load": t.get("load"),
        "check": check,
        "result": row.get("loss"),
        "lower": row.get("lower_bound"),
        "iterations": row.get("iterations"),
        "query_status": row.get("status"),
    }


def command(cell: Cell, query: str) -> tuple[list[str], Callable[[Run], dict]]:
    """The command line of one measurement and the parser of its output."""
    if query == "storm":
        return [sys.executable, "-m", "mopmc.bench.storm_runner", str(cell.model), str(cell.props)], parse_storm
    if query == "achievability":
        return mopmc_argv("check", str(cell.model), "--props", str(cell.props), "--json"), parse_achievability
    if query == "convex":
        return mopmc_argv("convex", str(cell.model), "--prop", property_text(cell), "--soft", "--json"), parse_convex
    raise ValueError(query)


def measure(cell: Cell, query: str, *, repeat: int = 2, timeout: float = 300.0, nice: int = 0) -> dict:
    """Run one measurement ``repeat`` times (stopping at a timeout or an error); one record.

    The fastest finished run counts; the record is ``t.o.`` only when no run finished in time.
    """
    base = {"cell": cell.key, "family": cell.family, "param": cell.param, "objectives": cell.objectives, "query": query}
    if query == "convex" and not convex_available():
        return {**base, "status": NOT_AVAILABLE}
    argv, parse = command(cell, query)
    runs: list[tuple[Run, dict]] = []
    late = 0
    for _ in range(repeat):
        run = run_measured(argv, timeout, nice=nice)
        if run.timed_out and runs:
            late += 1
            break  # an earlier run finished: best of the finished runs
        if run.timed_out:
            partial = parse_storm(run) if query == "storm" else {}
            sizes = {k: partial.get(k) for k in ("states", "choices", "transitions", "build") if partial.get(k) is not None}
            return {**base, **sizes, "status": "t.o.", "e2e": None, "timeout": timeout, "walls": [round(r.wall, 3) for r, _ in runs]}
        if run.returncode != 0:
            return {**base, "status": "error", "message": _error_line(run), "command": " ".join(argv[:6])}
        try:
            fields = parse(run)
        except (AttributeError, TypeError, ValueError, IndexError, KeyError) as exc:
            return {**base, "status": "error", "message": f"unreadable output ({type(exc).__name__}: {exc})"}
        runs.append((run, fields))
    best, fields = min(runs, key=lambda rf: rf[0].wall)
    peaks = [r.peak_mib for r, _ in runs if r.peak_mib is not None]
    rec = {**base, "status": "ok", **fields}
    rec.update(e2e=best.wall, peak_mib=max(peaks) if peaks else None, walls=[round(r.wall, 3) for r, _ in runs])
    if late:
        rec["runs_timed_out"] = late
    return rec
