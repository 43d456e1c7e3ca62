"""``mopmc evaluate MODEL --scheduler FILE --prop P``: the values of a fixed scheduler.

The scheduler file (docs/formats.md) is mapped onto the model by state valuations and choice names,
and evaluated on its induced Markov chain (one sparse solve), independently of the kernel. A Pareto
file (``mopmc-pareto-schedulers``, from ``mopmc check --export-scheduler``) holds one scheduler per
front point: ``--vertex I`` picks one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from mopmc.cli.common import parse_consts, print_json, run_cli
from mopmc.errors import PropertyError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def evaluate_command(model: str, scheduler: str, prop: str | list[str], const, json_out: bool, missing: str,
                     vertex: int | None = None) -> None:
    from mopmc.cli.check import _join_props
    from mopmc.engine.evaluate import evaluate
    from mopmc.errors import SchedulerError
    from mopmc.io.load import load
    from mopmc.io.scheduler_file import point_note, read_scheduler

    prop = _join_props(prop)  # a repeated --prop: all its properties, in order (as mopmc check)
    if missing not in ("error", "first"):
        raise PropertyError(f"--missing {missing!r}: use error or first")
    if vertex is not None and vertex < 0:
        raise PropertyError(f"--vertex {vertex}: give a vertex index >= 0")
    if not Path(scheduler).is_file():  # before the model is built
        raise SchedulerError(f"{scheduler}: no such scheduler file" if not Path(scheduler).exists()
                             else f"{scheduler}: not a file; give a scheduler JSON file")
    loaded = load(model, parse_consts(const), properties=prop, valuations=True)
    props = loaded.properties(directionless_ok=True)  # (a fixed scheduler: a Markov chain)
    if not props:
        raise PropertyError(f"--prop {prop!r}: no property found")
    objectives = [o for p in props for o in p.objectives]
    bounded = [o.text for o in objectives if o.steps is not None]
    if bounded:
        raise PropertyError(f"--prop {bounded[0]}: step-bounded objectives are not evaluated on a scheduler file "
                            "(its schedulers do not count steps); use mopmc check")
    sched, meta = read_scheduler(scheduler, loaded.model, vertex=vertex)
    try:
        ev = evaluate(loaded.model, sched, objectives, missing=missing)
    except SchedulerError as exc:  # the engine's words for the library; the CLI names the file and option
        text = exc.one_line().replace("evaluate with missing='first'", "evaluate with --missing first")
        raise SchedulerError(text if text.startswith(f"{scheduler}: ") else f"{scheduler}: {text}") from None
    note = point_note(scheduler, meta, [o.text for o in objectives], ev.values)
    if note:  # the file's own objectives, evaluated to other values than its point
        sys.stderr.write(f"note: {note}\n")
    out = {
        "model": model, "scheduler": scheduler, "kind": meta["kind"],
        "objectives": [o.text for o in objectives], "values": ev.values.tolist(),
        "file_point": meta["point"], "file_objectives": meta["objectives"],
        "chain_states": ev.states, "defaulted_states": ev.defaulted,
    }
    if "vertex" in meta:
        out["vertex"], out["vertices"] = meta["vertex"], meta["vertices"]
    if json_out:
        print_json(out)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{scheduler}{'' if vertex is None else f' (vertex {vertex})'} on {model}")
    table.add_column("objective")
    table.add_column("value", justify="right")
    for o, v in zip(out["objectives"], out["values"]):
        table.add_row(o, f"{v:.10g}")
    if missing == "first":  # docs/formats.md: --missing first reports how many states it defaulted
        table.caption = f"--missing first: {ev.defaulted} reachable state(s) without an entry took their first choice"
    Console(markup=False).print(table)


@app.command("evaluate")
def evaluate_cmd(
    model: str = typer.Argument(..., help="Model file (PRISM, JANI, UMB) or example:NAME."),
    scheduler: str = typer.Option(..., "--scheduler", help="A scheduler file (docs/formats.md)."),
    prop: List[str] = typer.Option(..., "--prop", help="Objectives to evaluate: properties or one multi(...); may be repeated (in order)."),
    const: Optional[List[str]] = typer.Option(None, "--const", help="Constant values NAME=VALUE[,...]; may be repeated."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    missing: str = typer.Option("error", "--missing", help="A reachable state with several choices and no entry: error, or take its first choice (runtime files list decision points only)."),
    vertex: Optional[int] = typer.Option(None, "--vertex", help="A Pareto file (mopmc check --export-scheduler on a Pareto query): evaluate the scheduler of front point I (0-based)."),
) -> None:
    """Evaluate a scheduler file on a model (induced Markov chain, sparse solve)."""
    run_cli(lambda: evaluate_command(model, scheduler, prop, const, json_out, missing, vertex))
