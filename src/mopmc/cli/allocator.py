"""Keep freed memory in the process for the ``mopmc`` command (glibc ``mallopt``).

Model building and preprocessing allocate and free many arrays of tens of MiB. glibc serves each
from a fresh ``mmap`` and unmaps it on ``free``, so every such array pays page faults again on first
touch. Serving arrays up to 32 MiB from the heap and keeping freed heap memory reuses pages that are
already mapped: at Model A n=200 ``mopmc check`` went from 3.3-3.8 s to 2.9-3.3 s, peak resident
memory unchanged (docs/builder.md).

It also stops numpy from asking for transparent huge pages (``madvise(MADV_HUGEPAGE)`` on every
array of 4 MiB or more): where the kernel's THP defrag setting is ``madvise`` (the usual default),
such a fault may stall in direct memory compaction, so first touches cost 0.1-1.8 ms per MiB from
run to run instead of a steady 0.45. At Model A n=200 ``mopmc check`` went from 2.60-2.75 to
2.37-2.63 s (check 0.83-0.93 -> 0.68-0.69 s), Model C team 5 with 10 objectives from 3.02-3.15 to
2.66-2.71 s, with 7% less peak memory there (docs/builder.md).

Only the command does this, before any large allocation; importing :mod:`mopmc` as a library leaves
the allocator alone. ``MOPMC_MALLOC=default`` turns both off. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MMAP_THRESHOLD = 32 << 20  # arrays up to 32 MiB from the heap (glibc default: 128 KiB, adjusted upwards)
TOP_PAD = 256 << 20
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: the largest one (2 GiB of free heap kept)


def keep_freed_memory() -> bool:
    """Tune glibc's allocator as described above; whether it was done."""
    if os.environ.get("MOPMC_MALLOC", "").lower() == "default" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok &= mallopt(M_TOP_PAD, TOP_PAD) == 1
    ok &= mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    no_huge_pages()
    return bool(ok)


def no_huge_pages() -> bool:
    """numpy's huge-page advice off (see the module docstring); whether this numpy has the switch."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray
    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    if switch is None:
        return False
    switch(False)
    return True
