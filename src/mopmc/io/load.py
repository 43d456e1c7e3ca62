"""``load_model``: one entry point for PRISM, JANI and UMB files."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from mopmc.errors import InvalidModelError, ModelFileError, MopmcError, UnsupportedModelError
from mopmc.io import storm
from mopmc.io.umb import read_umb
from mopmc.model.sparse_mdp import SparseMDP, mark_reachable
from mopmc.model.validate import validate


@dataclass(frozen=True)
class LoadedModel:
    """A loaded model with what was needed to build it.

    ``program`` is Storm's symbolic description (``None`` for UMB files); ``formulas`` are Storm's
    parsed properties, in the order written; ``seconds`` is the wall time of the load.
    """

    model: SparseMDP
    program: object | None = None
    formulas: tuple = ()
    seconds: float = 0.0
    kind: str = "mdp"
    timings: dict = field(default_factory=dict)
    builder: str = "storm"

    def properties(self, where: str | None = None, *, directionless_ok: bool | None = None):
        """The properties given to :func:`load`, parsed into typed :class:`~mopmc.properties.Property` objects.

        ``directionless_ok``: accept ``P=?``/``R=?`` without ``min``/``max`` (see
        :func:`~mopmc.properties.parse.parse_properties`); default: when the model is a DTMC, as
        Storm. A fixed scheduler's induced chain (``mopmc evaluate``) passes ``True``."""
        from mopmc.properties.parse import parse_properties

        if directionless_ok is None:
            directionless_ok = self.kind == "dtmc"
        return parse_properties(self.formulas, self.model.rewards, self.model.labels, where or self.model.source,
                                directionless_ok=directionless_ok)


BUILDERS = ("auto", "mopmc", "storm")
_default_builder = "auto"


def set_default_builder(name: str) -> None:
    """The builder :func:`load` uses when none is given (the CLI's ``mopmc --builder``)."""
    global _default_builder
    if name not in BUILDERS:
        raise ModelFileError(f"--builder {name}: unknown builder; choose one of {', '.join(BUILDERS)}")
    _default_builder = name


def resolve_path(path: str | Path) -> Path:
    """A model path; ``example:NAME`` names a shipped example (see :mod:`mopmc.examples.files`)."""
    text = str(path)
    if not text.strip():
        raise ModelFileError("the model path is empty; give a model file (PRISM, JANI or UMB) or example:NAME")
    if text.startswith("example:"):
        from mopmc.examples.files import ALL

        name = text.split(":", 1)[1]
        if name not in ALL:
            raise ModelFileError(f"{text}: no such example; the examples are: {', '.join(sorted(ALL))}")
        return ALL[name]
    return Path(path)


def _check_path(path: Path) -> None:
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if path.is_dir():
        raise ModelFileError(f"{path}: is a directory, not a model file")
    if not os.access(path, os.R_OK):
        raise ModelFileError(f"{path}: permission denied (the file is not readable)")
    if not path.is_file():
        raise ModelFileError(f"{path}: not a regular file (a pipe or device?); give a model file")
    if path.stat().st_size == 0:
        raise ModelFileError(f"{path}: the file is empty")


def load(
    path: str | Path,
    constants: Mapping[str, str] | None = None,
    properties: str | None = None,
    *,
    valuations: bool = False,
    warm: str | None = None,
    warm_engine: str = "kernel",
    warm_device: str | None = None,
    builder: str | None = None,
    properties_source: str | None = None,
) -> LoadedModel:
    """Load and validate a model; parse ``properties`` (PRISM property text) against it.
    ``properties_source``: where that text came from (a ``--props`` file), named by its errors
    (default: the model).

    PRISM (``.prism .nm .pm``) and JANI files are built by Storm's sparse builder and moved out in
    bulk through an uncompressed UMB archive; ``.umb`` files are read directly. ``warm``
    (``"check"`` or ``"convex"``): meanwhile warm the engine up in a thread
    (:mod:`mopmc.engine.warmup`; Storm's builder releases the GIL): ``warm_engine`` (``kernel`` or
    ``torch``) on ``warm_device``; a torch engine waits for a torch warm-up before its first work
    on the device (:func:`mopmc.engine.warmup.join_device`, after its CPU preprocessing), so that
    the warm-up's device work never overlaps the query's.

    ``builder``: ``"auto"`` (the default) builds PRISM programs with mopmc's own explicit builder
    (:mod:`mopmc.io.explicit`, several times faster than Storm's, the same model up to the numbering
    of states) unless their variables span fewer than ``explicit.AUTO_MIN_SPACE`` valuations, and
    falls back to Storm's for what it does not cover; ``"storm"`` always uses Storm's; ``"mopmc"``
    always uses the own one and fails when it cannot build the model.
    """
    start = time.perf_counter()
    builder = builder or _default_builder
    if builder not in BUILDERS:
        raise ModelFileError(f"builder {builder!r}: unknown; choose one of {', '.join(BUILDERS)}")
    given = str(path)
    path = resolve_path(path)
    example = given.startswith("example:")  # messages and the model's source name it so, not the installed file
    source = given.strip() if example else str(path)
    try:
        return _load(path, constants, properties, valuations=valuations, warm=warm, warm_engine=warm_engine,
                     warm_device=warm_device, builder=builder, start=start, source=source,
                     properties_source=properties_source)
    except MopmcError as exc:
        if example:
            exc.args = tuple(a.replace(str(path), source) if isinstance(a, str) else a for a in exc.args)
        raise


def _load(path: Path, constants, properties, *, valuations, warm, warm_engine, warm_device, builder, start,
          source: str, properties_source: str | None = None) -> LoadedModel:
    """:func:`load` once the path is resolved; ``source``: the model's name in messages."""
    _check_path(path)
    constants = dict(constants or {})
    if path.suffix.lower() == ".umb":
        if constants:
            raise ModelFileError(f"{path}: a UMB file has no constants to define (got --const {', '.join(constants)})")
        model = read_umb(path, valuations=valuations, source=source)
        formulas: tuple = ()
        if properties:
            formulas = tuple(_parse_without_program(properties, properties_source or str(path), model.labels))
        validate(model)
        return LoadedModel(model, None, formulas, time.perf_counter() - start, "dtmc" if model.is_dtmc else "mdp")
    text = storm.read_model_text(path)  # once: Storm's parse and the constants scan it for divisions by zero
    program = storm.parse_program(path, text)
    if properties:  # --const also defines constants the properties declare without a value
        properties, constants = storm.define_property_constants(properties, constants)
    program = storm.define_constants(program, path, constants, text)
    formulas = tuple(storm.parse_formulas(properties, program, properties_source or str(path))) if properties else ()
    storm.check_labels(program, formulas, str(path))
    t_parse = time.perf_counter()
    started: list = []

    def start_warmup() -> None:
        # once, where the main thread is about to release the GIL for a while (Storm's builder, the
        # explicit explorer): the warm-up's imports and kernel loads hold the GIL and would
        # otherwise slow down the Python and numba-loading parts of the build beside them
        if warm is not None and not started and not _python_sized(program):
            from mopmc.engine import warmup

            started.append(warmup.start(warm, warm_engine, warm_device))

    raw = [f.get_raw_formula() for f in formulas]
    model = None
    if builder != "storm" and path.suffix.lower() in storm.PRISM_SUFFIXES:
        from mopmc.io import explicit

        floor = explicit.AUTO_MIN_SPACE if builder == "auto" else 0
        atoms = _atoms(program, formulas, str(path))
        why: list[str] = []
        model = explicit.build(path, constants, atoms, valuations=valuations, source=source, min_space=floor,
                               before_explore=start_warmup, text=text, why=why)
        if model is None and builder == "mopmc":
            reason = why[0] if why else "unknown reason"
            raise UnsupportedModelError(
                f"{path}: mopmc's builder does not cover this model: {reason}; use --builder storm (or auto), "
                "which builds it or names what is wrong with it"
            )
    del text
    start_warmup()  # (Storm's builder releases the GIL)
    used = "storm" if model is None else "mopmc"
    if model is None:
        # with valuations Storm checks that assignments stay in range (without, it builds on silently)
        built = storm.build(program, path, raw, valuations=valuations or builder == "auto")
        kind = storm.model_kind(built, path)
        t_build = time.perf_counter()
        tmp = storm.temp_umb_path()
        try:
            storm.to_umb(built, tmp)
            # Storm's copy is no longer needed: free it before ours is read, so the two never coexist.
            del built
            # mapped: the arrays stay in the temporary file's pages (deleted below, alive while mapped)
            model = read_umb(tmp, valuations=valuations, source=source, mapped=True)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        kind = program.model_type.name.lower()
        t_build = time.perf_counter()
    t_extract = time.perf_counter()
    try:
        validate(model)
        mark_reachable(model)  # Storm built the states reachable from the one initial state
    except InvalidModelError:
        # Name the PRISM command: rebuild with choice origins (only on this error path; it is slower).
        built = storm.build(program, path, [f.get_raw_formula() for f in formulas], valuations=True, origins=True)
        detailed = replace(_extract(built, path, valuations=True), choice_origins=tuple(storm.choice_origin_texts(built)))
        validate(detailed)
        raise
    timings = {"parse": t_parse - start, "build": t_build - t_parse, "extract": t_extract - t_build}
    return LoadedModel(model, program, formulas, time.perf_counter() - start, kind, timings, used)


def _python_sized(program) -> bool:
    """Whether the program's variables span so few valuations that the engine's kernels will run
    as plain Python (:data:`mopmc.engine.numba_kernels.PY_WORK`): then a warm-up would only import
    numba and load compiled code that nothing uses (about 1 s the process waits for at exit)."""
    from mopmc.engine.numba_kernels import PY_WORK
    from mopmc.io.explicit.program import space

    try:
        if program.has_initial_states_expression or program.model_type.name not in ("MDP", "DTMC"):
            return False  # (as the explicit builder: no initial values to read off, or not its kind)
        # (as the explicit builder reads it: bounds given by constants or formulas evaluate only so;
        # evaluating them before, stormpy crashes the process)
        return space(program.substitute_constants().substitute_formulas()) * 4 <= PY_WORK
    except Exception:  # (a program the explicit builder does not read: warm up as before)
        return False


def _atoms(program, formulas, where: str) -> list[str] | None:
    """The atomic expressions of the properties' state formulas (Storm's builder adds them as
    labels), or ``None`` when the properties do not parse into objectives here."""
    from mopmc.properties.parse import parse_properties
    from mopmc.properties.states import atomic_expressions

    if not formulas:
        return []
    labels = {label.name for label in program.labels} | {"init", "deadlock"}
    rewards = {r.name for r in program.reward_models}
    try:
        props = parse_properties(formulas, rewards, labels, where, directionless_ok=True)
    except MopmcError:
        return None
    # (G phi is kept as the target !(phi): phi is the state formula written)
    texts = [t for p in props for o in p.objectives
             for t in (o.left_text, o.right_text[2:-1] if o.negated else o.right_text) if t]
    return sorted({a for t in texts for a in atomic_expressions(t)})


def _extract(built, path: Path, *, valuations: bool = False) -> SparseMDP:
    tmp = storm.temp_umb_path()
    try:
        storm.to_umb(built, tmp)
        return read_umb(tmp, valuations=valuations, source=str(path))
    finally:
        tmp.unlink(missing_ok=True)


def _parse_without_program(text: str, where: str, labels=None):
    return storm.parse_formulas(text, None, where, labels)


def load_model(
    path: str | Path,
    constants: Mapping[str, str] | None = None,
    *,
    valuations: bool = False,
    builder: str | None = None,
) -> SparseMDP:
    """Load a PRISM, JANI or UMB model as a validated :class:`SparseMDP`.

    Args:
        path: the model file.
        constants: values for undefined constants, name -> value text (e.g. ``{"N": "3"}``).
        valuations: also build the variable values of each state.
        builder: who builds a PRISM program: ``"auto"`` (default), ``"mopmc"`` or ``"storm"``
            (see :func:`load` and docs/builder.md).

    >>> from mopmc.examples import files
    >>> load_model(files.coin_game).n_states  # doctest: +SKIP
    """
    return load(path, constants, valuations=valuations, builder=builder).model
