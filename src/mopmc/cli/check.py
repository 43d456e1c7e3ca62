"""``mopmc check MODEL --prop P | --props FILE``: single-objective values (and multi(...) when available).

Results go to stdout (a rich table, or with ``--json`` a JSON list with one object per property);
errors are one line on stderr. An infinite optimum: with one property a one-line error; with several,
every result is printed, that one marked ``"status": "infinite"``; the exit code is 2 in both cases.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from mopmc.cli.common import load_timings, parse_consts, print_json, run_cli
from mopmc.errors import InfiniteValueError, PropertyError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def check_command(
    model: str,
    prop: str | None,
    props_file: str | None,
    const: list[str] | None,
    json_out: bool,
    export_scheduler: str | None,
    precision: float | None,
    engine: str,
    device: str | None = None,
    plot: str | None = None,
    exact_margin: bool = False,
) -> None:
    """The body of ``mopmc check`` (wrapped by :func:`run_cli` in :func:`check`)."""
    from mopmc.io.load import load
    from mopmc.properties.parse import read_property_file
    from mopmc.queries.single import check as check_single

    if (prop is None) == (props_file is None):
        raise PropertyError("give exactly one of --prop TEXT or --props FILE")
    if engine not in ("kernel", "lp", "torch"):
        raise PropertyError(f"--engine {engine!r}: use kernel, lp or torch")
    if device is not None and engine != "torch":
        raise PropertyError(f"--device {device}: only --engine torch runs on a device")
    if precision is not None and not 0 < precision < 1:
        raise PropertyError(f"--precision {precision}: give a relative precision between 0 and 1, e.g. 1e-6")
    text = prop if prop is not None else read_property_file(props_file)
    loaded = load(model, parse_consts(const), properties=text, warm="check" if engine != "lp" else None,
                  warm_engine=engine, warm_device=device)
    props = loaded.properties()
    if not props:
        raise PropertyError(f"no property found in {props_file or repr(prop)}")
    if plot:
        from mopmc.queries.plot import check_plottable

        if Path(plot).suffix.lower() not in (".png", ".pdf", ".svg"):
            raise PropertyError(f"--plot {plot}: give a .png, .pdf or .svg file name")
        if not Path(plot).resolve().parent.is_dir():
            raise PropertyError(f"--plot {plot}: folder {Path(plot).resolve().parent} does not exist")

        if len(props) != 1:
            raise PropertyError(f"--plot {plot}: give one property ({len(props)} given)")
        check_plottable(props[0].kind, len(props[0].objectives), f"property 1 ({props[0].text})")
    rows, schedulers, infinite = [], [], []
    for p in props:
        if p.multi:
            row, res = _multi(loaded.model, p, engine, precision, device, exact_margin)
            sched = _MultiSchedulers(res, engine) if export_scheduler else None
            if plot:
                from mopmc.queries.plot import plot_pareto

                plot_pareto(res, plot)
        else:
            res = check_single(loaded.model, p, precision=1e-6 if precision is None else precision,
                               engine=engine, device=device)
            row, sched = res.to_json(), res.scheduler
            if res.status == "infinite":
                infinite.append(res.message)
        row["timings"] = {**load_timings(loaded), **row.get("timings", {})}
        rows.append(row)
        schedulers.append(sched)
    if infinite and len(props) == 1:
        raise InfiniteValueError(infinite[0])
    if export_scheduler:
        _export(export_scheduler, loaded.model, props, schedulers)
    if json_out:
        print_json(rows)
    else:
        _table(model, rows)
    if infinite:
        raise SystemExit(2)


def _multi(model, p, engine: str, precision: float | None, device: str | None = None, exact_margin: bool = False):
    """The JSON row and the :class:`~mopmc.queries.multi.MultiResult` of a ``multi(...)`` property;
    a near-boundary achievability verdict is reported on stderr (one line)."""
    from mopmc.queries.dispatch import multi_query
    from mopmc.queries.multi import DEFAULT_PRECISION

    start = time.perf_counter()
    res = multi_query(model, p, engine=engine, precision=DEFAULT_PRECISION if precision is None else precision,
                      device=device, exact_margin=exact_margin)
    out = {"property": p.text, "name": p.name, **res.to_json(),
           "timings": {"check": time.perf_counter() - start}}
    if res.near_boundary:
        sys.stderr.write(
            f"warning: {p.text}: margin {res.margin:.3g} is within the precision {res.precision:g} of the "
            f"thresholds: the verdict ({'true' if res.achievable else 'false'}) is near the boundary "
            "(Storm's sound and exact modes may disagree); lower --precision to decide it\n"
        )
    return out, res


class _MultiSchedulers:
    """The deterministic schedulers behind a multi-objective result, for ``--export-scheduler``:
    one per Pareto vertex, or the witness mixture of an achievability or numerical query."""

    def __init__(self, res, engine: str):
        if engine == "lp":  # the LP oracle's vertices are occupation measures, not deterministic schedulers
            raise PropertyError("--export-scheduler with a multi(...) property needs --engine kernel or torch (got lp)")
        self.res = res

    def to_json(self, model) -> dict:
        res = self.res
        if res.kind == "pareto" and res.mixtures:
            # thresholds as constraints: each front vertex is a mixture of deterministic schedulers
            return {"kind": "pareto", "status": res.status, "vertices": [
                {"point": pt, "mixture": _mixture(model, [w for w, _ in mix], [res.vertices[i] for _, i in mix],
                                                  [res.vertex_schedulers[i] for _, i in mix])}
                for pt, mix in zip(res.points, res.mixtures)]}
        if res.kind == "pareto":
            return {"kind": "pareto", "status": res.status,
                    "vertices": [{"point": pt, "scheduler": s.scheduler.to_json(model)}
                                 for pt, s in zip(res.points, res.schedulers)]}
        if res.witness is None:
            return {"kind": res.kind, "status": res.status, "mixture": []}
        w = res.witness
        return {"kind": res.kind, "mixture": _mixture(model, w.weights, w.points, w.schedulers)}


def _mixture(model, weights, points, schedulers) -> list[dict]:
    """A randomised mixture of deterministic schedulers as exported: weight, point, scheduler each."""
    return [{"weight": lam, "point": pt, "scheduler": s.scheduler.to_json(model)}
            for lam, pt, s in zip(weights, points, schedulers)]


def _export(path: str, model, props, schedulers) -> None:
    found = [(p, s) for p, s in zip(props, schedulers) if s is not None]
    if not found:
        raise PropertyError(f"--export-scheduler {path}: no property produced a scheduler")
    doc = [{"property": p.text, **s.to_json(model)} for p, s in found]
    Path(path).write_text(json.dumps(doc[0] if len(doc) == 1 else doc, indent=1) + "\n")


def _fmt(v) -> str:
    if isinstance(v, float):
        return "inf" if v == math.inf else "-inf" if v == -math.inf else f"{v:.10g}"
    return str(v)


def _table(model: str, rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=model)
    for col in ("property", "value", "status", "seconds"):
        table.add_column(col)
    for r in rows:
        value = r.get("value")
        if "satisfied" in r:
            value = f"{_fmt(value)} ({'true' if r['satisfied'] else 'false'})"
        elif r.get("kind") == "achievability":
            value = f"{'true' if r['achievable'] else 'false'} (margin {_fmt(r['margin'])})"
        elif r.get("kind") == "pareto":
            value = f"{len(r['points'])} Pareto points"
        table.add_row(r.get("property", ""), _fmt(value), r.get("status", "ok"), f"{r['timings'].get('check', 0):.3f}")
    Console().print(table)


@app.command("check")
def check(
    model: str = typer.Argument(..., help="Model file: PRISM (.prism .nm .pm), JANI (.jani) or UMB (.umb)."),
    prop: Optional[str] = typer.Option(None, "--prop", help="Property text, e.g. 'Pmax=? [F \"goal\"]'."),
    props_file: Optional[str] = typer.Option(None, "--props", help="A file of properties (PRISM syntax)."),
    const: Optional[List[str]] = typer.Option(None, "--const", help="Constant values NAME=VALUE[,NAME=VALUE...]; may be repeated."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON list, one object per property."),
    export_scheduler: Optional[str] = typer.Option(None, "--export-scheduler", help="Write the optimal scheduler as JSON."),
    precision: Optional[float] = typer.Option(None, "--precision", help="Precision: relative for single objectives (default 1e-6); absolute per objective for multi(...) (default 1e-4)."),
    engine: str = typer.Option("kernel", "--engine", help="kernel (fast, CPU), lp (exact occupation LP) or torch (the kernel on a PyTorch device)."),
    device: Optional[str] = typer.Option(None, "--device", help="With --engine torch: cuda or cpu (default cuda when available)."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Draw the Pareto front (2 or 3 objectives) to this PNG file."),
    exact_margin: bool = typer.Option(False, "--exact-margin", help="Achievability: refine the margin to the precision (default: stop once the verdict is certain; margin and margin_upper then bracket it)."),
) -> None:
    """Check properties: single-objective values, and multi(...) queries."""
    run_cli(lambda: check_command(model, prop, props_file, const, json_out, export_scheduler, precision, engine, device, plot, exact_margin))
