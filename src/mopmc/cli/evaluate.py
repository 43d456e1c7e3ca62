"""``mopmc evaluate MODEL --scheduler FILE --prop P``: the values of a fixed scheduler.

The scheduler file (docs/formats.md) is mapped onto the model by state valuations and choice names,
and evaluated on its induced Markov chain (one sparse solve), independently of the kernel.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from mopmc.cli.common import parse_consts, print_json, run_cli
from mopmc.errors import PropertyError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def evaluate_command(model: str, scheduler: str, prop: str, const, json_out: bool, missing: str) -> None:
    from mopmc.engine.evaluate import evaluate
    from mopmc.io.load import load
    from mopmc.io.scheduler_file import read_scheduler

    if missing not in ("error", "first"):
        raise PropertyError(f"--missing {missing!r}: use error or first")
    loaded = load(model, parse_consts(const), properties=prop, valuations=True)
    props = loaded.properties()
    if not props:
        raise PropertyError(f"--prop {prop!r}: no property found")
    objectives = [o for p in props for o in p.objectives]
    sched, meta = read_scheduler(scheduler, loaded.model)
    ev = evaluate(loaded.model, sched, objectives, missing=missing)
    out = {
        "model": model, "scheduler": scheduler, "kind": meta["kind"],
        "objectives": [o.text for o in objectives], "values": ev.values.tolist(),
        "file_point": meta["point"], "file_objectives": meta["objectives"],
        "chain_states": ev.states, "defaulted_states": ev.defaulted,
    }
    if json_out:
        print_json(out)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{scheduler} on {model}")
    table.add_column("objective")
    table.add_column("value", justify="right")
    for o, v in zip(out["objectives"], out["values"]):
        table.add_row(o, f"{v:.10g}")
    Console().print(table)


@app.command("evaluate")
def evaluate_cmd(
    model: str = typer.Argument(..., help="Model file (PRISM, JANI, UMB) or example:NAME."),
    scheduler: str = typer.Option(..., "--scheduler", help="A scheduler file (docs/formats.md)."),
    prop: str = typer.Option(..., "--prop", help="Objectives to evaluate: properties or one multi(...)."),
    const: Optional[List[str]] = typer.Option(None, "--const", help="Constant values NAME=VALUE[,...]; may be repeated."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    missing: str = typer.Option("error", "--missing", help="A reachable state with several choices and no entry: error, or take its first choice (runtime files list decision points only)."),
) -> None:
    """Evaluate a scheduler file on a model (induced Markov chain, sparse solve)."""
    run_cli(lambda: evaluate_command(model, scheduler, prop, const, json_out, missing))
