"""Typed exceptions of mopmc: one base class, small subclasses.

Every message says what went wrong, where, and how to fix it; the CLI prints it as one line on
stderr and exits with :attr:`MopmcError.exit_code`.
"""

from __future__ import annotations


class MopmcError(Exception):
    """Base class of every error mopmc raises on purpose."""

    exit_code = 2

    def one_line(self) -> str:
        """The message folded onto a single line, for stderr."""
        return " ".join(str(self).split())


class ModelFileError(MopmcError):
    """A model file is missing, unreadable, or not a model."""


class ModelSyntaxError(MopmcError):
    """A model file does not parse (PRISM/JANI syntax)."""


class UndefinedConstantsError(MopmcError):
    """The model has constants without a value."""


class ConstantError(MopmcError):
    """A ``--const`` definition is malformed or names a constant twice."""


class UnsupportedModelError(MopmcError):
    """The model type or a model feature is not supported (e.g. CTMCs, several initial states)."""


class InvalidModelError(MopmcError):
    """The model violates the MDP invariants checked by :func:`mopmc.model.validate`."""


class PropertyError(MopmcError):
    """A property does not parse or is not supported."""


class UnknownNameError(MopmcError):
    """A reward model, label or other name does not exist in the model."""


class InfiniteValueError(MopmcError):
    """An optimum is infinite in the preferred direction."""


class MixedSignError(InfiniteValueError):
    """An end component collects rewards of both signs for one objective: the kernel, which decides
    infinity by the sign of an end component's rewards, cannot tell whether the total is infinite,
    finite (cycles netting 0) or undefined; the exact LP engine can (``--engine lp``). A subclass of
    :class:`InfiniteValueError` (the kernel used to report such a component as infinite), so that
    code skipping infinite objectives skips these too."""


class SchedulerError(MopmcError):
    """A scheduler file or object is malformed or does not fit the model."""


class ConfigError(MopmcError):
    """A configuration file is malformed or has unknown keys."""


class DependencyError(MopmcError):
    """An optional dependency is missing; the message names the extra to install."""
