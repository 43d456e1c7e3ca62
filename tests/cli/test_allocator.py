"""The ``mopmc`` command keeps freed memory in glibc's heap (``mopmc.cli.allocator``)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

# numpy's huge-page switch: numpy._core in numpy 2, numpy.core in 1.x (the pyproject allows both)
GET_HUGE = """
try:
    from numpy._core.multiarray import _get_madvise_hugepage
except ImportError:
    from numpy.core.multiarray import _get_madvise_hugepage
"""

PROBE = GET_HUGE + r"""
import ctypes, sys
import numpy as np
from mopmc.cli.allocator import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
tuned = keep_freed_memory() if sys.argv[1] == "command" else False  # "library": import mopmc only
import mopmc.io.load, mopmc.queries.dispatch  # noqa: E401,F401
a = np.ones(20 << 17)  # 20 MiB, touched
mapped_while_alive = libc.mallinfo2().hblkhd
del a
info = libc.mallinfo2()
print(int(tuned), mapped_while_alive, info.fordblks, int(_get_madvise_hugepage()))
"""


def _probe(how: str, malloc: str | None = None) -> tuple[bool, int, int, bool]:
    env = {k: v for k, v in os.environ.items() if k != "MOPMC_MALLOC"}
    if malloc is not None:
        env["MOPMC_MALLOC"] = malloc
    out = subprocess.run([sys.executable, "-c", PROBE, how], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    tuned, mapped, free, huge = out.stdout.split()
    return bool(int(tuned)), int(mapped), int(free), bool(int(huge))


def _numpy_default_huge_pages() -> bool:
    """numpy's own choice in a fresh process (on for Linux 4.6 and newer, unless its environment variable says otherwise)."""
    code = GET_HUGE + "print(int(_get_madvise_hugepage()))"
    return bool(int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout))


def _has_mallinfo2() -> bool:
    try:
        ctypes.CDLL(None).mallinfo2
        return sys.platform.startswith("linux")
    except (OSError, AttributeError):
        return False


@pytest.mark.skipif(not _has_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
def test_tuned_allocator_serves_large_arrays_from_the_heap_and_keeps_them_after_free():
    tuned, mapped, free, huge = _probe("command")
    assert tuned
    assert mapped < 20 << 20  # the 20 MiB array did not get its own mmap
    assert free >= 20 << 20  # and its memory stayed in the heap after del
    assert not huge  # numpy no longer asks for transparent huge pages


@pytest.mark.skipif(not _has_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
def test_default_allocator_when_asked_gives_large_arrays_back():
    tuned, mapped, free, huge = _probe("command", "default")
    assert not tuned
    assert huge == _numpy_default_huge_pages()
    assert mapped >= 20 << 20  # glibc's own choice: an mmap per large array
    assert free < 20 << 20


@pytest.mark.skipif(not _has_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
def test_importing_mopmc_as_a_library_leaves_the_allocator_alone():
    tuned, mapped, free, huge = _probe("library")
    assert not tuned and huge == _numpy_default_huge_pages()
    assert mapped >= 20 << 20 and free < 20 << 20
