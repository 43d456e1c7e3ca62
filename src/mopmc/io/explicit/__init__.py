"""mopmc's own explicit-state builder for PRISM programs, compiled with numba.

Storm parses the program (and substitutes constants and formulas); :mod:`.program` compiles its
commands, rewards and labels to bytecode; :mod:`.explore` explores the reachable states. The result
is the model Storm's sparse builder builds, up to the numbering of states (equal array by array after
renumbering; ``tests/io/test_explicit.py``), several times faster. :func:`build` returns ``None`` for
what it does not cover (several initial states, transition rewards, atomic expressions in the
properties, DTMCs with overlapping guards, malformed programs), and the caller uses Storm's builder,
which also words the errors.
"""

from mopmc.io.explicit.program import build

#: "auto" leaves programs whose variables span fewer valuations to Storm's builder: it finishes
#: before numba has started (about 0.5 s), and small models are built in well under a second.
AUTO_MIN_SPACE = 1 << 18

__all__ = ["AUTO_MIN_SPACE", "build"]
