"""``mopmc bench``: the paper's Table 5, mopmc and Storm side by side (see :mod:`mopmc.bench.table5`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from mopmc.cli.common import comma_list, run_cli

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def bench_command(models, families, sizes, quick, queries, repeat, timeout, out, force, skip, nice, report_only) -> None:
    from mopmc.bench.cells import BenchInputError, all_cells, default_models_dir, select
    from mopmc.bench.report import print_table
    from mopmc.bench.runs import QUERIES
    from mopmc.bench.table5 import run_table5, write_outputs

    chosen = comma_list(queries, "--queries", "query", "storm,convex")
    bad = [q for q in chosen if q not in QUERIES]
    if bad:
        raise BenchInputError(f"--queries {queries!r}: unknown query {bad[0] if bad else '(none)'!r}; use {', '.join(QUERIES)}")
    if repeat < 1:
        raise BenchInputError(f"--repeat {repeat}: must be at least 1")
    if not (math.isfinite(timeout) and timeout > 0):
        raise BenchInputError(f"--timeout {timeout:g}: must be a positive number of seconds")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BenchInputError(f"--out {out}: is a file, not a folder")
    if report_only:
        select([], families, sizes, quick)  # the options are checked alike, though the report takes every record
        result = write_outputs(out)
    else:
        cells = select(all_cells(Path(models) if models else default_models_dir()), families, sizes, quick)
        if not cells:
            raise BenchInputError("no benchmark cell matches --families/--sizes/--quick")
        try:  # before the first measurement, not after it
            (out / "cells").mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BenchInputError(f"--out {out}: cannot make the folder ({e.strerror})") from None
        result = run_table5(cells, out, queries=chosen, repeat=repeat, timeout=timeout, force=force,
                            skip_after_timeout=skip, nice=nice)
    print_table(result.rows, runs=result.runs)
    typer.echo(f"wrote {result.csv}, {result.markdown}, " + ", ".join(str(p) for p in result.plots), err=True)


@app.command("bench")
def bench(
    models: Optional[str] = typer.Option(None, "--models", help="Reference-model folder (default: $MOPMC_BENCH_MODELS or ../shared/benchmarks)."),
    families: Optional[str] = typer.Option(None, "--families", help="Model families: A (switch scaling), B (dive and rise), C (team formation), e.g. A,B."),
    sizes: Optional[str] = typer.Option(None, "--sizes", help="Cells per family, e.g. A:20-100,B:2-10,C:3x02."),
    quick: bool = typer.Option(False, "--quick", help="A small subset: A 20, B 2 and 3, C 3x02."),
    queries: str = typer.Option("storm,achievability,convex", "--queries", help="Which measurements: storm, achievability, convex."),
    repeat: int = typer.Option(2, "--repeat", help="Fresh-process runs per measurement; the fastest counts."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds per run before it is killed (t.o.)."),
    out: str = typer.Option("benchmarks/results/table5", "--out", help="Folder for per-cell records, CSV, markdown and plots."),
    force: bool = typer.Option(False, "--force", help="Measure again cells already recorded."),
    skip: bool = typer.Option(True, "--skip-after-timeout/--no-skip-after-timeout", help="After a timeout in Model A or B, record larger cells as t.o. without running them."),
    nice: int = typer.Option(0, "--nice", help="Run the measured processes under nice -n N."),
    report_only: bool = typer.Option(False, "--report-only", help="Only rebuild CSV, markdown and plots from the records."),
) -> None:
    """Table 5: achievability (Storm and mopmc) and the convex query (mopmc) per model, side by side."""
    run_cli(lambda: bench_command(models, families, sizes, quick, queries, repeat, timeout, out, force, skip, nice, report_only))
