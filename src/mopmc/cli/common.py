"""What every command shares: constant parsing, JSON output, and turning errors into one line."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Callable

from mopmc.errors import ConfigError, ConstantError, MopmcError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_consts(specs: list[str] | None) -> dict[str, str]:
    """Parse repeated ``--const NAME=VALUE[,NAME=VALUE...]``; a name given twice is an error.

    >>> parse_consts(["N=3,p=0.5", "K=1"])
    {'N': '3', 'p': '0.5', 'K': '1'}
    """
    out: dict[str, str] = {}
    for spec in specs or []:
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, value = part.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not _NAME.match(name) or not value:
                raise ConstantError(f"--const {part!r}: expected NAME=VALUE, e.g. --const N=3")
            if name in out:
                raise ConstantError(f"--const: constant {name!r} is given twice ({out[name]} and {value})")
            out[name] = value
    return out


def comma_list(text: str, option: str, what: str, example: str, *, allow_none: bool = False) -> tuple[str, ...]:
    """The entries of a comma-separated option, stripped: an empty entry (``0.1,,0.2``, a trailing
    comma) is refused, not dropped, and so is an empty list unless ``allow_none``.

    >>> comma_list("C1, C2", "--methods", "method", "C1,C2")
    ('C1', 'C2')
    """
    if not text.strip():
        if allow_none:
            return ()
        raise ConfigError(f"--{option.lstrip('-')}: give at least one {what}, e.g. {option} {example}")
    parts = tuple(p.strip() for p in text.split(","))
    if not all(parts):
        raise ConfigError(f"{option} {text!r}: an entry is empty; give {what}s separated by single commas, "
                          f"e.g. {option} {example}")
    return parts


def ray_option(value: str | None) -> str | None:
    """Typer callback of the ``--ray ADDRESS`` options: an address that does not parse, where
    nothing listens, or where no Ray cluster answers is refused while the arguments are parsed (one
    line, exit 2), before the command starts or creates its output folder
    (:func:`mopmc.runtime.ray_adapter.connect`; the connection is kept for the command's tasks).
    ``local`` is started by the command itself (with its --workers CPUs)."""
    if value is not None:
        from mopmc.runtime.ray_adapter import check_address, connect

        check_address(value)
        if value != "local":
            connect(value)
    return value


def _clean(obj: Any) -> Any:
    """Replace NaN by None and infinities by strings, so the JSON is strict."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist"):
        return _clean(obj.tolist())
    return obj


def load_timings(loaded) -> dict:
    """A loaded model's seconds for the JSON ``timings``: ``load`` (all of it), and within it
    ``build`` (the builder; not for UMB files)."""
    return {"load": loaded.seconds, **{k: loaded.timings[k] for k in ("build",) if k in loaded.timings}}


def print_json(obj: Any) -> None:
    """Print strict JSON (no NaN) on stdout."""
    global _json_printed
    _json_printed = True
    sys.stdout.write(json.dumps(_clean(obj), indent=2) + "\n")
    sys.stdout.flush()


#: set by :func:`run_cli` while a command that was asked for ``--json`` runs: :func:`fail` then
#: also prints its line as a JSON object on stdout (unless the command already printed its JSON)
_json_errors = False
_json_printed = False


def json_requested() -> bool:
    """Whether the running Click command was given ``--json`` (a parameter named ``json_out`` or
    ``as_json``, as every mopmc command with ``--json`` names it)."""
    import importlib

    import typer

    # the Click that Typer runs on: ``click``, or the copy newer Typers carry (``typer._click``)
    base = typer.Context.__mro__[1].__module__.rsplit(".", 1)[0]
    for name in dict.fromkeys((f"{base}.globals", "click.globals")):
        try:
            ctx = importlib.import_module(name).get_current_context(silent=True)
        except Exception:  # noqa: BLE001 - not this Click
            continue
        if ctx is not None:
            params = getattr(ctx, "params", None) or {}
            return bool(params.get("json_out") or params.get("as_json"))
    return False


def error_json(message: str, code: int = 2, kind: str | None = None) -> dict:
    """The JSON object a command run with ``--json`` prints on stdout when it fails:
    ``{"error": the one line of stderr (without "error: "), "exit_code": ..., "type": ...}``
    (``type``: the class of the error, e.g. ``UnknownNameError``; absent when not known)."""
    out: dict = {"error": " ".join(str(message).split()), "exit_code": code}
    if kind:
        out["type"] = kind
    return out


def _error_to_stdout(message: str, code: int, kind: str | None) -> None:
    """Under a command run with ``--json`` that has printed no JSON yet: :func:`error_json` on stdout."""
    if _json_errors and not _json_printed:
        sys.stdout.write(json.dumps(error_json(message, code, kind), indent=2) + "\n")
        sys.stdout.flush()


def fail(message: str, code: int = 2, kind: str | None = None) -> None:
    """Print one line on stderr and exit; under a command run with ``--json`` (:func:`run_cli`)
    the same line also goes to stdout as :func:`error_json`, so that stdout is always JSON."""
    _error_to_stdout(message, code, kind)
    sys.stderr.write("error: " + " ".join(str(message).split()) + "\n")
    sys.stderr.flush()
    raise SystemExit(code)


def run_cli(fn: Callable[[], Any], json_out: bool | None = None) -> Any:
    """Run a command body; MopmcErrors become one stderr line and their exit code (2).

    ``json_out``: whether the command was asked for JSON (default: its ``--json`` option, read from
    Click's context, :func:`json_requested`). Then an error also prints ``{"error": ..., ...}`` on
    stdout (:func:`error_json`), an internal error (a bug: not a MopmcError) too, before it goes on
    to :func:`mopmc.cli.main.main`, which words it on stderr."""
    global _json_errors, _json_printed
    saved = _json_errors, _json_printed
    _json_errors, _json_printed = (json_requested() if json_out is None else bool(json_out)), False
    try:
        return fn()
    except MopmcError as exc:
        fail(exc.one_line(), exc.exit_code, type(exc).__name__)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except MemoryError:  # a model or product too large for this machine: not a bug
        fail("out of memory: the model (or the product the query builds on it) does not fit in this machine's "
             "memory; use smaller constants or bounds", 2, "MemoryError")
    except Exception as exc:
        _error_to_stdout(f"internal error: {type(exc).__name__}: {exc}", 1, "InternalError")
        raise
    finally:
        _json_errors, _json_printed = saved


class Spinner:
    """A transient spinner with elapsed time on stderr (``update(text)``, ``stop()``), shown only
    where stderr is a terminal and ``show`` holds (not under ``--json``): a bar still ends with an
    empty line where it is not a terminal, which would come before an error line."""

    def __init__(self, text: str, show: bool = True):
        self._bar = None
        if not (show and sys.stderr.isatty()):
            return
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                             console=Console(stderr=True), transient=True)
        self._bar.start()
        self._task = self._bar.add_task(text, total=None)

    @property
    def active(self) -> bool:
        """Whether it is shown (stderr a terminal, not ``--json``)."""
        return self._bar is not None

    def update(self, text: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, description=text)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> "Spinner":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
