"""The explicit builder's exploration alone: one thread against worker threads, with and without
another thread busy in Python beside it (as the ``mopmc`` commands' warm-up thread is).

Builds each model once (numba's start-up and the program's compilation are not timed), then
times ``explore`` on the same compiled program ``--repeat`` times per setting, interleaved, and
reports the best and the median. Checks that every setting gives the same model as the first.
Writes ``benchmarks/results/explore.md``. Usage:

    python benchmarks/explore.py [--models A:60,200,C:5] [--threads 0,1,3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import models, write_report  # noqa: E402  (the same model names as benchmarks/load.py)

OUT = Path(__file__).resolve().parent / "results" / "explore.md"


def captured_arguments(path: Path) -> tuple:
    """The arguments ``load`` hands to ``explore`` for ``path`` (built once with the own builder)."""
    from mopmc.io.explicit import explore as ex
    from mopmc.io.load import load

    seen = {}
    real = ex.explore

    def grab(*args, **kw):
        seen["args"] = args
        return real(*args, **kw)

    ex.explore = grab
    try:
        load(path, builder="mopmc", warm=None)
    finally:
        ex.explore = real
    return seen["args"]


class Busy:
    """A thread running a pure-Python loop (it holds the GIL whenever it may) while in use."""

    def __enter__(self):
        self.stop = False
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()
        return self

    def _spin(self):
        x = 0
        while not self.stop:
            x += 1

    def __exit__(self, *exc):
        self.stop = True
        self.thread.join()


def timed(args: tuple, threads: int, busy: bool) -> tuple[float, tuple]:
    from contextlib import nullcontext

    from mopmc.io.explicit import explore as ex

    args = (*args[:-1], np.zeros_like(args[-1]))  # a fresh dense index (the exploration writes it)
    with Busy() if busy else nullcontext():
        t = time.perf_counter()
        out = ex.explore(*args, threads=threads)
        seconds = time.perf_counter() - t
    return seconds, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="A:60,200,C:5")
    ap.add_argument("--threads", default="0,1", help="worker counts to compare, e.g. 0,1,3,15")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    counts = [int(x) for x in args.threads.split(",")]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [
        f"# Exploration alone, seconds (best / median of {args.repeat}, interleaved; "
        f"`python benchmarks/explore.py --models {args.models} --threads {args.threads} --repeat {args.repeat}`)",
        "",
        f"{cpus} CPUs. `workers`: `MOPMC_BUILD_THREADS`; `busy`: another thread in a pure-Python loop beside it.",
        f"Load average when written: {', '.join(f'{x:.1f}' for x in os.getloadavg())}.",
        "",
        "| model | states | workers | alone | beside a busy thread |",
        "|---|---|---|---|---|",
    ]
    for label, path in models(args.models):
        explore_args = captured_arguments(path)
        settings = [(k, busy) for k in counts for busy in (False, True)]
        seconds = {s: [] for s in settings}
        reference = None
        for _ in range(args.repeat):
            for k, busy in settings:
                s, out = timed(explore_args, k, busy)
                seconds[(k, busy)].append(s)
                arrays = out[2:]
                if reference is None:
                    reference = arrays
                elif not all(np.array_equal(a, b) for a, b in zip(arrays, reference)):
                    raise SystemExit(f"{label}: {k} workers (busy={busy}) built another model")
        states = len(reference[0])
        for k in counts:
            cells = [f"{min(seconds[(k, b)]):.3f} / {statistics.median(seconds[(k, b)]):.3f}" for b in (False, True)]
            lines.append(f"| {label} | {states:,} | {k} | {cells[0]} | {cells[1]} |")
            print(lines[-1], flush=True)
    write_report(args.out, lines)


if __name__ == "__main__":
    main()
