"""Keep Storm's C++ log lines off our stdout.

stormpy's C++ code writes to file descriptors 1 and 2 directly, bypassing ``sys.stdout``. We redirect
at the descriptor level around every stormpy call: to /dev/null normally, to stderr with verbose on.
"""

from __future__ import annotations

import contextlib
import os
import sys

_verbose = False


def set_verbose(on: bool) -> None:
    """Let Storm's own output through to stderr (``--verbose``)."""
    global _verbose
    _verbose = on


@contextlib.contextmanager
def storm_output():
    """Context manager: inside it, Storm's writes to fd 1 and 2 go to stderr (verbose) or nowhere."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    sink = os.dup(2) if _verbose else os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(sink, 1)
        if not _verbose:
            os.dup2(sink, 2)
        yield
    finally:
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        for fd in (saved_out, saved_err, sink):
            os.close(fd)


#: the same descriptor-level redirection for other native code that logs to fd 1 and 2 (Ray's C++
#: core while ``ray.init`` connects: its retry lines would precede our one error line)
native_output = storm_output
