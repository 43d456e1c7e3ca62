"""Worker threads on which compiled kernels that release the GIL run side by side: the explicit
builder's exploration and passes (:mod:`mopmc.io.explicit`), and the engine's preprocessing passes
that split into independent ranges (:mod:`mopmc.engine`).

``MOPMC_BUILD_THREADS`` sets how many (0: the calling thread works alone). The default is one fewer
than the CPUs this process may use, so that with the calling thread every CPU has one (none on one
CPU). On 2 CPUs, in fresh ``mopmc`` runs beside the engine's warm-up thread, one worker took Model
C team 5's exploration from 0.84-0.95 to 0.66-0.68 s and left Model A n=200's as it was.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from mopmc.errors import ConfigError

MIN_RANGE = 65536  # states per task below which a pass over the states stays on one thread

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0  # the process that started the pool: a forked child has none of its threads
_lock = threading.Lock()


def count() -> int:
    """Worker threads besides the caller's."""
    value = os.environ.get("MOPMC_BUILD_THREADS")
    if value is not None:
        try:
            return max(0, int(value))
        except ValueError:
            raise ConfigError(f"MOPMC_BUILD_THREADS={value!r}: expected a whole number of threads") from None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, cpus - 1)


def submit(fn, *args) -> Future:
    """``fn(*args)`` on a worker thread (the pool starts at the first call, again in a forked child)."""
    global _pool, _pool_pid
    if _pool is None or _pool_pid != os.getpid():
        with _lock:
            if _pool is None or _pool_pid != os.getpid():
                _pool = ThreadPoolExecutor(max(1, count()), thread_name_prefix="mopmc-build")
                _pool_pid = os.getpid()
    return _pool.submit(fn, *args)


def over_ranges(n: int, fn) -> None:
    """``fn(s0, s1)`` over ``0 .. n`` cut into consecutive ranges, one per thread (this one does the first)."""
    parts = min(count() + 1, max(1, n // MIN_RANGE))
    _over_cuts([n * k // parts for k in range(parts + 1)], fn)


def over_weighted(weights, fn, min_weight: float) -> None:
    """``fn(i0, i1)`` over ``0 .. len(weights)`` cut into consecutive ranges of about equal total
    weight, one per thread (this one does the first), at least ``min_weight`` each."""
    ends = np.cumsum(np.asarray(weights, np.float64))
    n = len(ends)
    if n == 0:
        return fn(0, 0)
    total = float(ends[-1])
    parts = int(min(count() + 1, max(1, total // min_weight), n))
    _over_cuts(sorted({0, n, *(int(np.searchsorted(ends, total * k / parts)) for k in range(1, parts))}), fn)


def _over_cuts(cuts: list[int], fn) -> None:
    """``fn(cuts[k], cuts[k + 1])`` for every k: the first range here, the others on the workers."""
    tasks = [submit(fn, cuts[k], cuts[k + 1]) for k in range(1, len(cuts) - 1)]
    fn(cuts[0], cuts[1])
    for task in tasks:
        task.result()
