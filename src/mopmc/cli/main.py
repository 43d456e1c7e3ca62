"""The ``mopmc`` command: ``info``, ``check``, ``design``, ``rt`` and friends."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import traceback
from importlib import import_module
from typing import List, Optional

import typer
import typer.main

from mopmc import __version__
from mopmc.cli.common import fail, parse_consts, print_json, run_cli
from mopmc.errors import MopmcError

app = typer.Typer(
    name="mopmc",
    help="Design and multi-objective model checking of fault-tolerant real-time DRL systems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mopmc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    verbose: bool = typer.Option(False, "--verbose", help="Show Storm's own log output on stderr."),
    builder: str = typer.Option(
        "auto", "--builder",
        help="Who builds PRISM models: auto (mopmc's explicit builder, Storm's where it does not apply), mopmc or storm.",
    ),
) -> None:
    from mopmc.io.quiet import set_verbose

    set_verbose(verbose)
    if builder not in ("auto", "mopmc", "storm"):
        fail(f"--builder {builder}: unknown builder; choose one of auto, mopmc, storm", 2)
    from mopmc.io.load import set_default_builder

    set_default_builder(builder)


ConstOpt = typer.Option(None, "--const", help="Constant values NAME=VALUE[,NAME=VALUE...]; may be repeated.")


@app.command()
def info(
    model: str = typer.Argument(..., help="Model file: PRISM (.prism .nm .pm), JANI (.jani) or UMB (.umb), or example:NAME."),
    const: Optional[List[str]] = ConstOpt,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Load a model and show what is in it."""

    def body():
        from mopmc.io.load import load

        loaded = load(model, parse_consts(const), valuations=True)  # (the state variables' names are part of the answer)
        m = loaded.model
        summary = {"model": model, "type": loaded.kind, **m.summary(), "load_seconds": round(loaded.seconds, 4),
                   "builder": loaded.builder if loaded.program is not None else None}  # (a UMB file is read, not built)
        summary["actions"] = [a for a in summary["actions"] if a]  # (the unnamed action of unlabelled commands: no name)
        if json_out:
            print_json(summary)
            return
        from rich.console import Console
        from rich.table import Table

        table = Table(title=model, show_header=False)
        for key in ("type", "states", "choices", "transitions", "initial_state"):
            table.add_row(key, str(summary[key]))
        table.add_row("reward models", ", ".join(summary["reward_models"]) or "(none)")
        table.add_row("labels", ", ".join(summary["labels"]) or "(none)")
        if summary["actions"]:
            table.add_row("actions", ", ".join(summary["actions"]))
        if summary["variables"]:
            table.add_row("variables", ", ".join(summary["variables"]))
        table.add_row("load time", f"{summary['load_seconds']:.3f} s ({loaded.builder}'s builder)" if loaded.program is not None
                      else f"{summary['load_seconds']:.3f} s")
        Console(markup=False).print(table)

    run_cli(body)


def _register_optional() -> None:
    """Attach the command groups that live in their own modules (when present)."""
    for module, name in (("mopmc.cli.check", None), ("mopmc.cli.design", "design"), ("mopmc.cli.rt", "rt"), ("mopmc.cli.bench", None),
                         ("mopmc.cli.convex", None), ("mopmc.cli.evaluate", None), ("mopmc.cli.table3", None)):
        try:
            mod = import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        sub = getattr(mod, "app", None)
        if sub is None:
            continue
        if name is None:
            for cmd in sub.registered_commands:
                app.registered_commands.append(cmd)
        else:
            app.add_typer(sub, name=name)


def _click_exceptions():
    """The exception module of the Click that Typer runs on: ``click.exceptions``, or the copy that
    newer Typers carry inside them (``typer.BadParameter`` is that module's class in both)."""
    return sys.modules[typer.BadParameter.__module__]


def usage_message(exc) -> str:
    """A Click usage error (unknown option or command, missing argument, bad value) as the one line
    :func:`fail` prints: Click's message, then the command it concerns and where its help is."""
    text = " ".join(str(exc.format_message()).split())
    if text[:1].isupper() and text[1:2].islower():  # "No such option" -> "no such option", not "JSON"
        text = text[0].lower() + text[1:]
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        text += f" (in '{ctx.command_path}'; see '{ctx.command_path} --help')"
    return text


def main() -> None:
    """Entry point of the ``mopmc`` script: never a traceback for user errors.

    Click runs with ``standalone_mode=False``, so that its usage errors (an unknown option or
    command, a missing argument, a value of the wrong type) reach this function and become one
    line on stderr with exit code 2, instead of Typer's boxed message. In that mode Click returns
    the code of a ``typer.Exit`` (``--help``, ``--version``) instead of exiting; the commands
    themselves return None and exit through ``SystemExit`` (:func:`fail`), which passes through."""
    from mopmc.cli.allocator import keep_freed_memory

    keep_freed_memory()
    if "--verbose" not in sys.argv[1:]:  # (numpy's overflow warnings on extreme models: not lines for users)
        import numpy as np

        np.seterr(all="ignore")
    click_exc = _click_exceptions()
    try:
        _register_optional()
        command = typer.main.get_command(app)
        code = command.main(args=sys.argv[1:], prog_name="mopmc", standalone_mode=False)
    except SystemExit:
        raise
    except click_exc.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare ``mopmc`` or ``mopmc design``: the help, exit 2
            if exc.format_message().strip():  # Typer's rich help is already printed on stdout
                exc.show()
            raise SystemExit(exc.exit_code) from None
        message = usage_message(exc)
        if "--json" in sys.argv[1:]:  # stdout stays JSON, as for the commands' own errors (cli.common.fail)
            from mopmc.cli.common import error_json, print_json

            print_json(error_json(message, 2, "UsageError"))
        fail(message, 2)
    except click_exc.ClickException as exc:  # e.g. a FileError of a click.File parameter
        fail(" ".join(str(exc.format_message()).split()), exc.exit_code)
    except MopmcError as exc:  # raised while the options are parsed (a --ray address): one line
        fail(exc.one_line(), exc.exit_code)
    except typer.Abort:  # Click turns an EOF or Ctrl-C outside a command body into Abort
        fail("interrupted", 130)
    except Exception as exc:  # an internal error: one line, exit 1, traceback only with --verbose
        if "--verbose" in sys.argv:
            traceback.print_exc()
        fail(f"internal error: {type(exc).__name__}: {exc}", 1)
    if isinstance(code, int) and not isinstance(code, bool):
        raise SystemExit(code)


def entry() -> None:
    """The ``mopmc`` script and ``python -m mopmc``: :func:`main`, then a fast exit.

    Tearing the interpreter down after a check (numba, scipy, stormpy, torch modules and their
    objects) took 0.25-0.3 s of a 1.3 s run on a small model. Once the command is done, this runs
    the exit handlers (warm-up joins, logging, process pools), flushes stdout and stderr and ends
    the process with ``os._exit``. Where another non-daemon thread still runs, it exits the normal
    way, which waits for it."""
    code: int = 0
    try:
        main()
    except SystemExit as exc:
        code = _exit_status(exc.code)
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None:  # not CPython: the normal exit
        sys.exit(code)
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``mopmc ... | head``) or stream
            code = code or 1
    os._exit(code)


def _exit_status(code) -> int:
    """The status ``sys.exit(code)`` gives: None -> 0, an int as is, else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    entry()
