"""The stormpy adapter: the only module that imports stormpy.

Parses PRISM and JANI files, defines constants, builds sparse models and moves them out of Storm in
bulk through an uncompressed UMB archive.
"""

from __future__ import annotations

import os
import re
import signal
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

from mopmc.errors import (
    ModelSyntaxError,
    PropertyError,
    UndefinedConstantsError,
    UnsupportedModelError,
)
from mopmc.io.quiet import storm_output

PRISM_SUFFIXES = (".prism", ".nm", ".pm", ".mdp", ".dtmc")
JANI_SUFFIXES = (".jani",)


def stormpy():
    """Import stormpy on first use (it takes a few hundred ms)."""
    import stormpy as sp  # noqa: PLC0415 - lazy on purpose

    return sp


def _storm_message(exc: BaseException) -> str:
    text = str(exc).strip()
    text = re.sub(r"^(?:\w*Exception:\s*)+", "", text)
    text = re.sub(r"\d{30,}", lambda m: f"{m.group()[:4]}...({len(m.group())} digits)", text)  # 1e-320 as 1/10...0
    return " ".join(text.split())


#: a division (``/``) whose divisor is not a non-zero number literal, or PRISM's ``mod(``
_RISKY_DIVISION = re.compile(r"/(?!\s*(?:\d*[1-9]\d*(?:\.\d*)?|\d*\.\d*[1-9]\d*)(?![\w.]))|\bmod\s*\(")


def _risky_lines(text: str) -> list[int]:
    """Lines (1-based) of PRISM or JANI text with a division or modulo that may be by zero."""
    return [i for i, line in enumerate(text.splitlines(), 1)
            if _RISKY_DIVISION.search(line.split("//", 1)[0])]


def _survives(action) -> bool:
    """Whether ``action`` (a Storm call) returns in a forked child rather than killing it.

    Storm's exact arithmetic raises SIGFPE on a division or modulo by zero in a constant expression
    (``1/0``, ``1/Z`` with ``Z = 0``) while it parses or substitutes constants: the process dies
    with no exception to catch. Only called for text with such an operator (:func:`_risky_lines`).
    """
    import threading

    if not hasattr(os, "fork") or threading.active_count() > 1:
        return True  # (forking beside other threads may deadlock the child: no probe, as before)
    pid = os.fork()
    if pid == 0:  # the child: nothing of the parent's state may run here (no atexit, no flushes)
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            action()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return not (os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGFPE, signal.SIGSEGV, signal.SIGABRT))


def _crash_error(where: str, lines: list[int], what: str) -> ModelSyntaxError:
    at = f" (divisions on line {', '.join(map(str, lines[:8]))})" if lines else ""
    return ModelSyntaxError(f"{where}: Storm aborts {what}: a division or modulo by zero in a constant expression{at}; "
                            "change the divisor or the constant's value")


def _read_text(path: Path) -> str:
    """The model file's text for the division scan ('' when unreadable: Storm's parse then words the error)."""
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def read_model_text(path: Path) -> str:
    """The text of a model file, read once by :func:`mopmc.io.load.load` and handed to
    :func:`parse_program` and :func:`define_constants` (which otherwise each read it)."""
    return _read_text(path)


def parse_program(path: Path, text: str | None = None):
    """Parse a PRISM or JANI file into a Storm symbolic description (PrismProgram or JaniModel).

    ``text``: the file's text when the caller has read it (:func:`read_model_text`); else it is read here.
    """
    sp = stormpy()
    suffix = path.suffix.lower()

    def parse():
        if suffix in JANI_SUFFIXES:
            model, _props = sp.parse_jani_model(str(path))
            return model
        return sp.parse_prism_program(str(path), prism_compatibility=True)

    lines = _risky_lines(_read_text(path) if text is None else text)
    if lines and not _survives(parse):
        raise _crash_error(str(path), lines, "parsing the model")
    try:
        with storm_output():
            return parse()
    except UnicodeDecodeError as exc:  # Storm's message quotes the file's bytes, which do not decode
        kind = "JANI" if suffix in JANI_SUFFIXES else "PRISM"
        raise ModelSyntaxError(f"{path}: not a {kind} file: Storm rejects it, and it is not UTF-8 text ({exc.reason})") from None
    except Exception as exc:  # stormpy raises RuntimeError subclasses carrying Storm's message
        msg = _storm_message(exc)
        m = re.search(r"Parsing error at (\d+):(\d+):?\s*(.*)", msg)
        if m:
            detail = m.group(3).split(" here:")[0].strip().rstrip(",;: ")
            raise ModelSyntaxError(f"{path}:{m.group(1)}:{m.group(2)}: syntax error: {detail}") from None
        m = re.search(r"(?:line|Line) (\d+)", msg)
        where = f"{path}:{m.group(1)}" if m else str(path)
        raise ModelSyntaxError(f"{where}: {msg}") from None


def parse_program_text(text: str, path: Path):
    """Parse PRISM text (read from ``path`` and amended) into a PrismProgram; ``None`` when Storm
    rejects it (the caller then parses ``path`` itself, for Storm's error message)."""
    sp = stormpy()
    fd, name = tempfile.mkstemp(suffix=".nm", prefix="mopmc-", dir=_shm())
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        if _risky_lines(text) and not _survives(lambda: sp.parse_prism_program(name, prism_compatibility=True)):
            return None  # (Storm's builder then words the error: an infinite reward, say)
        with storm_output():
            return sp.parse_prism_program(name, prism_compatibility=True)
    except Exception:  # noqa: BLE001 - any rejection means: let Storm's own parse of the file speak
        return None
    finally:
        os.unlink(name)


def define_property_constants(text: str, constants: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    r"""``text`` with the ``--const`` values of the constants it declares without one
    (``const int K;`` -> ``const int K = 3;``), and the constants left for the model.

    >>> define_property_constants("const int K;\nPmax=? [F s=K]", {"K": "3", "N": "2"})
    ('const int K = 3;\nPmax=? [F s=K]', {'N': '2'})
    """
    kinds = {m.group(2): m.group(1) or "int" for m in _UNDEFINED_CONSTANT.finditer(text)}
    mine = set(kinds) & set(constants)
    for name in sorted(mine):
        _check_property_constant(name, kinds[name], constants[name])

    def value(m: re.Match) -> str:
        name = m.group(2)
        return m.group(0) if name not in mine else m.group(0)[:-1].rstrip() + f" = {constants[name]};"

    return _UNDEFINED_CONSTANT.sub(value, text), {k: v for k, v in constants.items() if k not in mine}


def _check_property_constant(name: str, kind: str, text: str) -> None:
    """A property constant's ``--const`` value is a literal of its type (``const int K;``: an
    integer; ``double``: a number; ``bool``: true or false), refused by name otherwise."""
    from mopmc.properties.display import rational

    if kind == "bool":
        ok = text.strip() in ("true", "false")
    else:
        number = rational(text)
        ok = number is not None and (kind == "double" or number.denominator == 1)
    if not ok:
        what = {"bool": "true or false", "int": "an integer", "double": "a number"}[kind]
        raise UndefinedConstantsError(f"--const {name}={text}: the property constant {name} ({kind}) takes {what}")


def constant_names(program) -> list[str]:
    """Names of the program's undefined constants."""
    return [c.name for c in program.constants if not c.defined]


def define_constants(program, path: Path, constants: Mapping[str, str], text: str | None = None):
    """Substitute ``constants`` (name -> value text) into the program; reject unknown or missing names.

    ``text``: the text of ``path`` when the caller has it (as for :func:`parse_program`); it is
    read here only when constants are given and ``text`` is not.
    """
    sp = stormpy()
    known = {c.name for c in program.constants}
    defined = {c.name for c in program.constants if c.defined}
    for name in constants:
        if name in defined:
            raise UndefinedConstantsError(
                f"{path}: --const {name}: constant {name!r} is already defined in the model; only undefined constants can be set"
            )
        if name not in known:
            raise UndefinedConstantsError(
                f"{path}: --const {name}: no constant {name!r} in the model; it has: {', '.join(sorted(known)) or '(none)'}"
            )
    if constants:
        spec = ",".join(f"{k}={v}" for k, v in constants.items())
        lines = _risky_lines(_read_text(path) if text is None else text)
        if (lines or _risky_lines(spec)) and not _survives(lambda: sp.instantiate_constants(program, spec)):
            raise _crash_error(f"{path}: --const {spec}", lines, "substituting the constants")
        try:
            with storm_output():
                program, _ = sp.instantiate_constants(program, spec)
        except Exception as exc:
            raise UndefinedConstantsError(f"{path}: bad --const {spec}: {_storm_message(exc)}") from None
    missing = constant_names(program)
    if missing:
        hint = ",".join(f"{n}=VALUE" for n in missing)
        raise UndefinedConstantsError(f"{path}: undefined constants {', '.join(missing)}; define them with --const {hint}")
    empty = _empty_ranges(program)
    if empty:  # (Storm's builder says only "Lower bound must not be above upper bound")
        given = f" with --const {','.join(f'{k}={v}' for k, v in constants.items())}" if constants else ""
        raise UndefinedConstantsError(f"{path}: variable {empty[0]} has an empty range{given}")
    return program


def _empty_ranges(program) -> list[str]:
    """Integer variables whose lower bound is above their upper bound, as ``s: [0..-1]``."""
    out = []
    try:
        variables = list(getattr(program, "global_integer_variables", []))
        for module in program.modules:
            variables += list(module.integer_variables)
        for v in variables:
            lo, hi = v.lower_bound_expression, v.upper_bound_expression
            if "__storm::notinitialized__" in (str(lo), str(hi)):  # `x : int`: touching the unset bound crashes
                continue
            if lo.contains_variables() or hi.contains_variables():
                continue
            a, b = lo.evaluate_as_int(), hi.evaluate_as_int()
            if a > b:
                out.append(f"{v.name}: [{a}..{b}]")
    except Exception:  # noqa: BLE001 - a program Storm's API does not describe: Storm's own message later
        return []
    return out


def parse_formulas(text: str, program, where: str, labels: Iterable[str] | None = None):
    """Parse property text against the program; return Storm Property objects in order.

    ``program`` is ``None`` for a model without one (a UMB file): the properties then cannot name
    variables; ``labels`` (that model's labels) are listed in the message when they try to."""
    undefined = [m.group(2) for m in _UNDEFINED_CONSTANT.finditer(text)]
    if undefined:  # Storm takes them as 0 without a word
        raise PropertyError(f"{where}: property constant(s) {', '.join(undefined)} without a value; give "
                            f"--const {undefined[0]}=VALUE or write 'const int {undefined[0]} = VALUE;' in the properties")
    sp = stormpy()
    try:
        with storm_output():
            return sp.parse_properties(text, program)
    except Exception as exc:
        raise PropertyError(f"{where}: {_property_message(_storm_message(exc), text, program, labels)}") from None


#: ``const int K;`` in property text: a constant declared without a value
_UNDEFINED_CONSTANT = re.compile(r"^\s*const\s+(?:(int|double|bool)\s+)?([A-Za-z_]\w*)\s*;", re.M)

#: the words of Storm's property language (operators, path operators, functions): not model names
_PROPERTY_WORDS = frozenset(
    "P R S E A T LRA Pmin Pmax Rmin Rmax Smin Smax Emin Emax Tmin Tmax LRAmin LRAmax min max F G U W X C I "
    "true false multi filter quantile floor ceil pow mod log round sqrt exp ite sum avg count forall exists "
    "argmin argmax print values range state init deadlock".split()
)
_NOTE = re.compile(r"\s*Note that the used API function does not have access to model variables\..*$")


def _model_names(program) -> set[str] | None:
    """The variables, constants and formulas a property may name (``None`` when not known)."""
    try:
        names = {c.name for c in program.constants}
        names |= {f.name for f in getattr(program, "formulas", [])}
        for v in list(getattr(program, "global_integer_variables", [])) + list(getattr(program, "global_boolean_variables", [])):
            names.add(v.name)
        for module in program.modules:
            names |= {v.name for v in module.integer_variables} | {v.name for v in module.boolean_variables}
        return names
    except Exception:  # noqa: BLE001 - a JANI model, say: no hint
        return None


def unknown_identifiers(text: str, known: set[str]) -> list[str]:
    """Identifiers of property ``text`` (outside quotes) that are neither property-language words
    nor in ``known``, in order of appearance.

    >>> unknown_identifiers('Pmax=? [F t=7 & "six"]; R{"r"}min=? [C]', {"s", "d"})
    ['t']
    """
    bare = re.sub(r'"[^"]*"', '""', text)
    out: list[str] = []
    for name in re.findall(r"(?<![\w.])[A-Za-z_][A-Za-z_0-9]*", bare):
        if name not in _PROPERTY_WORDS and name not in known and name not in out:
            out.append(name)
    return out


def _property_message(msg: str, text: str, program, labels) -> str:
    """Storm's property-parse error, cleaned: the position and what was expected, where, and the
    identifiers the model does not have (Storm's grammar error does not name them); for a model
    without a program (UMB) a hint to use labels instead of Storm's note on its API."""
    msg = _NOTE.sub("", msg).strip()
    m = re.match(r"Parsing error at (\d+):(\d+):\s*(.*?)(?:,?\s*here:\s*(.*?))?\s*\^?\s*$", msg)
    if m:
        line, col, expecting, near = m.groups()
        msg = f"property syntax error at {line}:{col} (line:column of the property text): {expecting.rstrip(',;: ')}"
        if near:
            msg += f" (here: {near.strip()})"
    else:  # a semantic refusal (C>=2, ...): Storm names no property
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("//")]
        if len(lines) == 1 and lines[0] not in msg:
            msg = f"{msg.rstrip('.')} (in {lines[0]})"
    known = set() if program is None else _model_names(program)
    if known is None:
        return msg
    unknown = unknown_identifiers(text, known)
    at = _identifier_at(text, m) if m else None
    if at is not None and at not in known and at not in unknown:  # a word of the language used as a name (T)
        unknown.insert(0, at)
    if not unknown:
        return msg
    msg = msg.rstrip(".")
    what = f"unknown identifier{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)}"
    if program is None:
        names = ", ".join(f'"{label}"' for label in sorted(labels or ()))
        return (f"{msg}; {what}: this model (UMB) keeps no variable names, so properties refer to states by "
                f"label{': ' + names if names else ''}")
    return f"{msg}; {what}; the model's variables and constants: {', '.join(sorted(known)) or '(none)'}"


def _identifier_at(text: str, m: re.Match) -> str | None:
    """The identifier where Storm's parse error points (``T`` of ``R{"r"}<=T [C]``), if any."""
    lines = text.splitlines()
    line, col = int(m.group(1)) - 1, int(m.group(2)) - 1
    if not 0 <= line < len(lines) or col < 0:
        return None
    found = re.match(r"[A-Za-z_]\w*", lines[line][col:])
    if found is not None and not (col > 0 and re.match(r"[\w.]", lines[line][col - 1])):
        return found.group() if _used_as_name(found.group(), lines[line][col + found.end():]) else None
    near = (m.group(4) or "").strip()  # Storm's column is sometimes of a sub-parse: what follows "here:"
    found = re.match(r"[A-Za-z_]\w*", near)
    return found.group() if found is not None and _used_as_name(found.group(), near[found.end():]) else None


def _used_as_name(word: str, rest: str) -> bool:
    """Whether ``word`` followed by ``rest`` stands where a value goes: any word that is not of the
    property language, and one that is (``T``, ``F``) when no operand follows it (``T=1``, ``<=T [C]``)."""
    return word not in _PROPERTY_WORDS or re.match(r"\s*(?:$|[\])&|;\[]|=(?!\?))", rest) is not None


def check_labels(program, formulas, where: str) -> None:
    """Reject properties that name labels the PRISM program does not define (before building)."""
    from mopmc.errors import UnknownNameError
    from mopmc.properties.states import label_names

    if not hasattr(program, "labels"):
        return
    known = {l.name for l in program.labels} | {"init", "deadlock"}
    rewards = {r.name for r in program.reward_models}
    for i, prop in enumerate(formulas):
        for name in re.findall(r'R\{"([^"]*)"\}', str(prop.get_raw_formula())):
            if name not in rewards:
                raise UnknownNameError(
                    f"{where}: property {i + 1}: unknown reward model {name!r}; the model has: {', '.join(sorted(rewards)) or '(none)'}"
                )
        for name in label_names(prop.get_raw_formula()):
            if name not in known:
                raise UnknownNameError(
                    f"{where}: property {i + 1}: unknown label {name!r}; the model has: {', '.join(sorted(known))}"
                )


def build(program, path: Path, formulas: Iterable = (), *, valuations: bool = False, origins: bool = False):
    """Build Storm's sparse model with all labels and reward models (and labels for formula atoms)."""
    sp = stormpy()
    formulas = list(formulas)
    options = sp.BuilderOptions(formulas) if formulas else sp.BuilderOptions()
    options.set_build_all_labels()
    options.set_build_all_reward_models()
    if valuations:
        options.set_build_state_valuations()
    if origins:
        options.set_build_choice_origins()
        options.set_build_choice_labels()
    else:
        options.set_build_choice_labels()
    try:
        with storm_output():
            model = sp.build_model(program, options=options)
    except Exception as exc:
        raise UnsupportedModelError(f"{path}: Storm could not build the model: {_storm_message(exc)}") from None
    return model


def model_kind(model, path: Path | str = "the model") -> str:
    """'mdp' or 'dtmc', or an UnsupportedModelError naming ``path``."""
    name = model.model_type.name
    if name in ("MDP", "DTMC"):
        return name.lower()
    raise UnsupportedModelError(f"{path}: unsupported model type {name}: mopmc analyses MDPs and DTMCs")


def to_umb(model, path: Path) -> None:
    """Write Storm's sparse model as an uncompressed UMB archive (Storm's own bulk export)."""
    sp = stormpy()
    options = sp.io.UmbExportOptions()
    options.compression = sp.io.CompressionMode.NO_COMPRESSION
    with storm_output():
        sp.io.export_to_umb(model, str(path), options=options)


def choice_origin_texts(model) -> list[str]:
    """For each choice, the PRISM command(s) behind it ('' when unknown)."""
    if not model.has_choice_origins():
        return [""] * model.nr_choices
    origins = model.choice_origins
    out = []
    for c in range(model.nr_choices):
        try:
            out.append(" ".join(origins.get_choice_info(c).split()))
        except Exception:
            out.append("")
    return out


def build_from_umb(path: Path):
    """Build a Storm sparse model from a UMB file (used for round-trip checks)."""
    sp = stormpy()
    with storm_output():
        return sp.build_model_from_umb(str(path))


def _shm() -> str | None:
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def temp_umb_path() -> Path:
    """A fresh temporary path for an UMB archive (the caller deletes it)."""
    fd, name = tempfile.mkstemp(suffix=".umb", prefix="mopmc-", dir=_shm())
    os.close(fd)
    return Path(name)
