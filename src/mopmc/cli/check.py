"""``mopmc check MODEL --prop P | --props FILE``: single-objective values (and multi(...) when available).

Results go to stdout (a rich table, or with ``--json`` a JSON list with one object per property);
errors are one line on stderr (with ``--json`` also a JSON object ``{"error": ...}`` on stdout,
:func:`mopmc.cli.common.fail`). ``--prop`` may be repeated: the properties are checked in order, as
those of a ``--props`` file. An infinite single-objective value is a result, as in Storm: the row
has ``"status": "infinite"`` and ``"value": "inf"`` (or ``"-inf"``: strict JSON has no infinity;
``float()`` reads both), a ``message`` saying why, a note on stderr, and the exit code is 0, for
one property or several alike.
"""

from __future__ import annotations

import math
import sys
import time
from typing import List, Optional

import typer

from mopmc.cli.common import Spinner, load_timings, parse_consts, print_json, run_cli
from mopmc.errors import PropertyError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def check_command(
    model: str,
    prop: str | list[str] | None,
    props_file: str | None,
    const: list[str] | None,
    json_out: bool,
    export_scheduler: str | None,
    precision: float | None,
    engine: str,
    device: str | None = None,
    plot: str | None = None,
    exact_margin: bool = False,
    precision_type: str = "abs",
    max_iter: int | None = None,
) -> None:
    """The body of ``mopmc check`` (wrapped by :func:`run_cli` in :func:`check`)."""
    from mopmc.io.load import load
    from mopmc.properties.parse import read_property_file
    from mopmc.queries.single import check as check_single

    prop = _join_props(prop)
    if (prop is None) == (props_file is None):
        raise PropertyError("give exactly one of --prop TEXT (may be repeated) or --props FILE")
    if engine not in ("kernel", "lp", "torch"):
        raise PropertyError(f"--engine {engine!r}: use kernel, lp or torch")
    if device is not None and engine != "torch":
        raise PropertyError(f"--device {device}: only --engine torch runs on a device")
    inputs = (("the model", model), ("--props", props_file))  # no output may overwrite them (nor another output)
    _check_export(export_scheduler, engine, inputs=inputs, outputs=(("--plot", plot),))
    if plot is not None:
        from mopmc.queries.plot import check_plot_path

        check_plot_path(plot, inputs=inputs)  # before the model is built
    text = prop if prop is not None else read_property_file(props_file)
    multi = "multi(" in text.replace(" ", "")  # (before parsing: the options that need one)
    if precision is not None:
        _check_precision(precision, None, multi)
    _check_precision_type(precision_type, multi)
    if max_iter is not None:
        if max_iter < 1:
            raise PropertyError(f"--max-iter {max_iter}: give a positive number of oracle calls")
        if not multi:
            raise PropertyError(f"--max-iter {max_iter}: only multi(...) queries take it (single objectives iterate "
                                "to their precision)")
    with Spinner(f"loading {model}", show=not json_out) as spin:
        loaded = load(model, parse_consts(const), properties=text, warm="check" if engine != "lp" else None,
                      warm_engine=engine, warm_device=device, valuations=export_scheduler is not None,
                      properties_source=props_file)
        props = loaded.properties()
        if not props:
            raise PropertyError(f"no property found in {props_file or repr(prop)}")
        _check_export_properties(export_scheduler, props)
        if precision is not None:
            for i, p in enumerate(props):
                _check_precision(precision, f"property {i + 1} ({p.text})", p.multi)
        if plot is not None:
            from mopmc.queries.plot import check_plottable

            if len(props) != 1:
                raise PropertyError(f"--plot {plot}: give one property ({len(props)} given)")
            check_plottable(props[0].kind, len(props[0].objectives), f"property 1 ({props[0].text})")
        rows, results = [], []
        for i, p in enumerate(props):
            label = f"property {i + 1}/{len(props)}: {p.text}" if len(props) > 1 else p.text
            spin.update(label)
            if p.multi:
                row, res = _multi(loaded.model, p, engine, precision, device, exact_margin, precision_type, max_iter,
                                  progress=_progress(spin, label, p, precision, precision_type, max_iter))
                if plot is not None:
                    from mopmc.queries.plot import plot_pareto

                    plot_pareto(res, plot)
            else:
                res = check_single(loaded.model, p, precision=1e-6 if precision is None else precision,
                                   engine=engine, device=device)
                row = res.to_json()
                if res.status == "infinite":  # a result (as in Storm), explained on stderr
                    sys.stderr.write(f"note: {res.message}\n")
            if getattr(res, "note", None):  # answered by another engine than the one asked for
                sys.stderr.write(f"note: {p.text}: {res.note}\n")
            row["timings"] = {**load_timings(loaded), **row.get("timings", {})}
            rows.append(row)
            results.append(res)
    if export_scheduler:  # (one property: _check_export_properties)
        rows[0]["scheduler"] = _export(export_scheduler, loaded.model, props[0], results[0], quiet=json_out)
    if json_out:
        print_json(rows)
    else:
        _table(model, rows)


def _join_props(prop: str | list[str] | tuple | None) -> str | None:
    """The property text of one or several ``--prop`` options: one property per line, in order
    (Storm's parser separates properties by ``;``; a repeated ``;`` is harmless)."""
    if prop is None or isinstance(prop, str):
        return prop
    return ";\n".join(prop) or None


def _check_precision(precision: float, where: str | None, multi: bool) -> None:
    """``--precision`` as the query kind takes it: relative in (0, 1) for single objectives,
    per objective (positive, finite; absolute or ``reldiff``) for ``multi(...)``. ``where``: the property, once
    parsed; before (``None``) only what no kind accepts is refused, worded by ``multi`` (whether
    the text has a ``multi(...)``)."""
    at = f" for {where}" if where else ""
    if multi:
        if not (math.isfinite(precision) and precision > 0):
            raise PropertyError(f"--precision {precision}{at}: multi(...) queries take a precision per objective "
                                "(absolute, or in units of its range with --precision-type reldiff): give a "
                                "positive number, e.g. 1e-4")
    elif not 0 < precision < 1:
        raise PropertyError(f"--precision {precision}{at}: single objectives take a relative precision: give a "
                            "number between 0 and 1, e.g. 1e-6")


def _check_precision_type(precision_type: str, multi: bool) -> None:
    """``--precision-type``: one of :data:`~mopmc.queries.multi.PRECISION_TYPES`, and ``reldiff``
    only where some property is a ``multi(...)`` query (single objectives have their own, relative,
    precision)."""
    from mopmc.queries.multi import PRECISION_TYPES

    if precision_type not in PRECISION_TYPES:
        raise PropertyError(f"--precision-type {precision_type}: use {' or '.join(PRECISION_TYPES)}")
    if precision_type != "abs" and not multi:
        raise PropertyError(f"--precision-type {precision_type}: only multi(...) queries take it (single objectives "
                            "take a relative --precision already)")


def _precision_words(res) -> str:
    """``res``'s precision as the notes on stderr say it."""
    if res.precision_type == "reldiff":
        return f"{res.precision:g} (relative to each objective's range)"
    return f"{res.precision:g}"


def _progress(spin, label: str, p, precision: float | None, precision_type: str, max_iter: int | None):
    """The spinner's text during a ``multi(...)`` query: the oracle call under way against the
    limit, and the gap still to close against the precision (``None`` without a spinner)."""
    if not spin.active:
        return None
    from mopmc.queries.multi import DEFAULT_PRECISION, MAX_ITER

    limit = MAX_ITER[p.kind] if max_iter is None else max_iter  # (as multi_query takes it)
    eta = DEFAULT_PRECISION if precision is None else precision
    unit = " of the ranges" if precision_type == "reldiff" else ""

    def show(calls: int, gap: float) -> None:
        spin.update(f"oracle call {calls + 1}/{limit}, gap {gap:.2g} (precision {eta:g}{unit}): {label}")

    return show


def _multi(model, p, engine: str, precision: float | None, device: str | None = None, exact_margin: bool = False,
           precision_type: str = "abs", max_iter: int | None = None, progress=None):
    """The JSON row and the :class:`~mopmc.queries.multi.MultiResult` of a ``multi(...)`` property;
    a near-boundary achievability verdict is reported on stderr (one line). ``progress``: see
    :func:`~mopmc.queries.dispatch.multi_query`."""
    from mopmc.queries.dispatch import multi_query

    start = time.perf_counter()
    res = multi_query(model, p, engine=engine, precision=precision, device=device, exact_margin=exact_margin,
                      precision_type=precision_type, max_iter=max_iter, progress=progress)
    out = {"property": p.text, "name": p.name, **res.to_json(),
           "timings": {"check": time.perf_counter() - start}}
    if res.status == "iteration_limit":
        hint = (" or --precision-type reldiff (the precision in units of each objective's range, for objectives far "
                "from 1)" if res.precision_type == "abs" else "")
        sys.stderr.write(f"note: {p.text}: not within the precision {_precision_words(res)} after {res.iterations} "
                         f"oracle calls (status iteration_limit; the answer is certified as far as it goes): give a "
                         f"coarser --precision{hint}, or a larger --max-iter\n")
    if res.near_boundary and res.kind == "numerical":
        sys.stderr.write(
            f"note: {p.text}: a threshold is within the precision {_precision_words(res)} of its objective's best "
            "value, so the schedulers meeting it are few: Storm's approximate modes may call the query infeasible\n"
        )
    elif res.near_boundary:
        verdict = "true" if res.achievable else "false"
        if res.margin < 0 <= res.margin_upper:  # not decided: true within the precision
            sys.stderr.write(
                f"warning: {p.text}: margin {res.margin:.3g} is within the precision {_precision_words(res)} of the "
                f"thresholds: the verdict ({verdict}) is near the boundary (Storm's sound and exact modes may "
                "disagree); lower --precision to decide it\n"
            )
        else:  # decided: the margin's bounds have one sign
            sys.stderr.write(
                f"note: {p.text}: the verdict ({verdict}) is certain (margin between {res.margin:.3g} and "
                f"{res.margin_upper:.3g}) but within the precision {_precision_words(res)} of the thresholds: Storm's "
                "approximate modes may disagree\n"
            )
    return out, res


def _check_export(path: str | None, engine: str, *, inputs=(), outputs=()) -> None:
    """Before the model is built: ``--export-scheduler`` names a file in an existing folder, none of
    the ``inputs`` or other ``outputs`` (:func:`~mopmc.design.build.check_output`), and the engine
    computes schedulers."""
    if path is None:
        return
    from mopmc.design.build import check_output

    check_output(path, "--export-scheduler", inputs=inputs, outputs=outputs)
    if engine == "lp":
        raise PropertyError(f"--export-scheduler {path}: the lp engine computes values, not schedulers; "
                            "use --engine kernel or torch")


def _check_export_properties(path: str | None, props) -> None:
    """A scheduler file holds the scheduler of one query: one property (checked before the queries)."""
    if path is not None and len(props) != 1:
        raise PropertyError(f"--export-scheduler {path}: give one property ({len(props)} given); "
                            "a scheduler file holds the scheduler of one query")
    if path is not None:
        refuse_step_bounded_export(path, props[0])


def refuse_step_bounded_export(path: str, prop) -> None:
    """Schedulers of step-bounded objectives count steps; scheduler files map model states to choices."""
    bounded = [o.text for o in prop.objectives if o.steps is not None]
    if bounded:
        raise PropertyError(f"--export-scheduler {path}: {bounded[0]} is step-bounded: its scheduler counts steps, "
                            "and a scheduler file maps the model's states to choices; export an unbounded query")


def _export(path: str, model, p, res, quiet: bool = False) -> dict:
    """Write the scheduler of property ``p`` (its result ``res``): ``mopmc-scheduler`` (a single
    objective: the deterministic optimum; achievability, numerical: the witness, a mixture of
    deterministic schedulers) or ``mopmc-pareto-schedulers`` (Pareto: one scheduler per front
    point), entries for the states each scheduler reaches (docs/formats.md). Returns what was
    written; says so on stderr unless ``quiet``. Where there is no scheduler (an infinite value, an
    unachievable or infeasible query) nothing is written: a note on stderr, and ``{"path": null,
    "reason": ...}``."""
    try:
        return _document(path, model, p, res, quiet)
    except _NoScheduler as exc:  # the answer stands (exit 0); the file is not written
        sys.stderr.write(f"note: --export-scheduler {path}: nothing written: {p.text} has no scheduler to export "
                         f"({exc})\n")
        return {"path": None, "reason": str(exc)}


class _NoScheduler(Exception):
    """Raised by :func:`_document` with the reason where the result has no scheduler."""


def _document(path: str, model, p, res, quiet: bool) -> dict:
    """The body of :func:`_export`; raises :class:`_NoScheduler` where there is no scheduler."""
    import numpy as np

    from mopmc.engine.evaluate import Mixture, Policy
    from mopmc.io.scheduler_file import pareto_document, scheduler_document, write_document

    if not p.multi:  # a single objective: the kernel's deterministic optimum
        if res.scheduler is None:
            raise _NoScheduler(f"the value is {res.value}")
        doc = scheduler_document(model, p.objectives, [res.value], Policy.of(res.scheduler), reachable=True)
        info = {"path": str(path), "format": doc["format"], "kind": doc["kind"]}
    elif res.kind == "pareto":
        if not res.points:
            raise _NoScheduler(f"status {res.status}")
        if res.mixtures:  # thresholds as constraints: each front point mixes deterministic vertices
            scheds = [(pt, Policy.of(k)) for pt, k in zip(res.vertices, res.vertex_schedulers)]
            verts = list(zip(res.points, res.mixtures))
        else:
            scheds = [(pt, Policy.of(k)) for pt, k in zip(res.points, res.schedulers)]
            verts = [(pt, [(1.0, i)]) for i, pt in enumerate(res.points)]
        doc = pareto_document(model, p.objectives, scheds, verts, status=res.status)
        info = {"path": str(path), "format": doc["format"], "vertices": len(verts)}
    else:  # achievability or numerical: the witness mixture meets every threshold
        w = res.witness
        if w is None:
            raise _NoScheduler("not achievable" if res.kind == "achievability" and not res.achievable else f"status {res.status}")
        weights = np.asarray(w.weights, float) / float(np.sum(w.weights))
        point = weights @ np.asarray(w.points, float)
        pols = tuple(Policy.of(k) for k in w.schedulers)
        sched = pols[0] if len(pols) == 1 else Mixture(weights, pols)
        doc = scheduler_document(model, p.objectives, point.tolist(), sched, reachable=True)
        info = {"path": str(path), "format": doc["format"], "kind": doc["kind"]}
    write_document(path, doc)
    if not quiet:
        what = info.get("kind") or f"{info['vertices']} Pareto vertices"
        sys.stderr.write(f"scheduler ({what}) -> {path}\n")
    return info


def _fmt(v) -> str:
    if isinstance(v, float):
        return "inf" if v == math.inf else "-inf" if v == -math.inf else f"{v:.10g}"
    return str(v)


#: at most this many Pareto points are listed in the text output (all are in the JSON)
PARETO_ROWS = 20


def _table(model: str, rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(markup=False)  # property texts hold [...]: never rich markup
    table = Table(title=model)
    for col in ("property", "value", "status", "seconds"):
        table.add_column(col)
    fronts = []
    for r in rows:
        value = r.get("value")
        if "satisfied" in r:
            value = f"{_fmt(value)} ({'true' if r['satisfied'] else 'false'})"
        elif r.get("kind") == "achievability":
            value = f"{'true' if r['achievable'] else 'false'} (margin {_fmt(r['margin'])})"
        elif r.get("kind") == "pareto":
            value = f"{len(r['points'])} Pareto point{'' if len(r['points']) == 1 else 's'} (below)"
            fronts.append(r)
        table.add_row(r.get("property", ""), _fmt(value), r.get("status", "ok"), f"{r['timings'].get('check', 0):.3f}")
    console.print(table)
    for r in fronts:
        console.print(_points_table(r))
        if len(r["points"]) > PARETO_ROWS:
            console.print(f"({len(r['points']) - PARETO_ROWS} more points: --json lists them all)")


def _points_table(row: dict):
    """The vertices of a Pareto front (at most :data:`PARETO_ROWS`), one column per objective."""
    from rich.table import Table

    table = Table(title=f"Pareto points of {row.get('property', '')}")
    table.add_column("#", justify="right")
    for o in row.get("objectives", []):
        table.add_column(o.get("formula", ""), justify="right")
    order = sorted(range(len(row["points"])), key=lambda i: [float(v) for v in row["points"][i]])
    for i in order[:PARETO_ROWS]:  # along the front, by the first objective (# is the JSON order)
        table.add_row(str(i + 1), *(_fmt(float(v)) for v in row["points"][i]))
    return table


@app.command("check")
def check(
    model: str = typer.Argument(..., help="Model file: PRISM (.prism .nm .pm), JANI (.jani) or UMB (.umb), or example:NAME."),
    prop: Optional[List[str]] = typer.Option(None, "--prop", help="Property text, e.g. 'Pmax=? [F \"goal\"]'; may be repeated (checked in order)."),
    props_file: Optional[str] = typer.Option(None, "--props", help="A file of properties (PRISM syntax)."),
    const: Optional[List[str]] = typer.Option(None, "--const", help="Constant values NAME=VALUE[,NAME=VALUE...] of the model or of the properties; may be repeated."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON list, one object per property (on an error: one object with \"error\")."),
    export_scheduler: Optional[str] = typer.Option(None, "--export-scheduler", help="Write the scheduler as JSON (docs/formats.md; mopmc evaluate reads it back; a Pareto query: one per front point)."),
    precision: Optional[float] = typer.Option(None, "--precision", help="Precision: relative for single objectives (default 1e-6); absolute per objective for multi(...) (default 1e-4; see --precision-type)."),
    precision_type: str = typer.Option("abs", "--precision-type", help="multi(...) queries: abs (the precision in each objective's units) or reldiff (in units of each objective's range, as Storm's reldiff: for objectives in the hundreds)."),
    engine: str = typer.Option("kernel", "--engine", help="kernel (fast, CPU), lp (exact occupation LP) or torch (the kernel on a PyTorch device)."),
    device: Optional[str] = typer.Option(None, "--device", help="With --engine torch: cuda or cpu (default cuda when available)."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Draw the Pareto front of a Pareto query (2 or 3 objectives with =?) to this .png, .pdf or .svg file."),
    max_iter: Optional[int] = typer.Option(None, "--max-iter", help="multi(...) queries: the most oracle calls after the first ones (default 200; Pareto 500)."),
    exact_margin: bool = typer.Option(False, "--exact-margin", help="Achievability: refine the margin to the precision (default: stop once the verdict is certain; margin and margin_upper then bracket it)."),
) -> None:
    """Check properties: single-objective values, and multi(...) queries."""
    run_cli(lambda: check_command(model, prop, props_file, const, json_out, export_scheduler, precision, engine, device, plot, exact_margin,
                                  precision_type, max_iter),
            json_out=json_out)
