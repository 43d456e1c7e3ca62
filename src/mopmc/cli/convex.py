"""``mopmc convex MODEL --prop 'multi(...)'``: the convex query with certified bounds.

Without ``--soft`` the thresholds of ``multi(...)`` are hard bounds and the target is ``--target``
(default: the origin); with ``--soft`` the thresholds are the target and there is no box. Results
on stdout (a table, or ``--json``), the progress bar and diagnostics on stderr.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import List, Optional

import typer

from mopmc.cli.common import load_timings, parse_consts, print_json, run_cli
from mopmc.errors import PropertyError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


def parse_vector(text: str | None, option: str, m: int) -> list[float] | None:
    """``"1.9,0.22"`` -> floats; the count must match the objectives, and no entry is empty."""
    if text is None:
        return None
    from mopmc.cli.common import comma_list

    parts = comma_list(text, option, "number", "1.9,0.22")
    try:
        out = [float(x) for x in parts]
    except ValueError:
        raise PropertyError(f"{option} {text!r}: expected comma-separated numbers, e.g. {option} 1.9,0.22") from None
    bad = [x for x, v in zip(parts, out) if not math.isfinite(v)]
    if bad:
        raise PropertyError(f"{option} {text!r}: {bad[0]} is not a finite number; expected {m} finite numbers "
                            "(one per objective)")
    if len(out) != m:
        raise PropertyError(f"{option} {text!r}: expected {m} finite numbers (one per objective), got {len(out)}")
    return out


def load_multi(model: str, prop: str, const: list[str] | None, *, valuations: bool = True, engine: str = "kernel",
               device: str | None = None):
    """Load ``model`` (with valuations: schedulers name states by them) and parse exactly one
    ``multi(...)`` property; the engine warms up while Storm builds."""
    from mopmc.io.load import load

    loaded = load(model, parse_consts(const), properties=prop, valuations=valuations, warm="convex" if engine != "lp" else None,
                  warm_engine=engine, warm_device=device)
    props = loaded.properties()
    if len(props) != 1 or not props[0].multi:
        raise PropertyError(f"--prop {prop!r}: give exactly one multi(...) property")
    return loaded, props[0]


def progress_reporter():
    """A rich progress bar on stderr: ``(callback, stop)``; none where stderr is not a terminal (a
    transient bar still ends with an empty line there, which would come before an error line)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    bar.start()
    task = bar.add_task("convex query", total=None)

    def callback(it: int, lower: float, upper: float) -> None:
        bar.update(task, description=f"convex query: iteration {it}, lower {lower:.10g}, upper {upper:.10g}")

    return callback, bar.stop


def export(path: str, model, result, *, binding=None, kind: str = "randomised") -> dict:
    """Write the scheduler behind ``result.point``; returns what was written (kind, note)."""
    from mopmc.engine.mixing import randomise
    from mopmc.io.scheduler_file import write_export
    from mopmc.queries.convex import mixture_of

    if result.point is None:  # the answer stands (exit 0); the file is not written
        sys.stderr.write(f"note: --export-scheduler {path}: nothing written: the query found no point "
                         f"({result.status})\n")
        return {"path": None, "reason": result.status}
    mix = mixture_of(result)
    sched, note = mix, None
    if kind == "randomised":
        rnd = randomise(model, mix)
        if rnd.policy is not None:
            sched = rnd.policy
        else:
            note = f"exported the mixture: {rnd.reason}"
    write_export(path, model, result.objectives, result.point, sched, binding)
    return {"path": path, "kind": "mixture" if sched is mix else "randomised", "note": note,
            "runtime": binding is not None}


def load_binding(spec: str | None):
    """``paper-switch`` (the built-in design's binding), the binding file of ``mopmc design build``
    (``MODEL.binding.json``) or a JSON file holding a runtime binding."""
    if spec is None:
        return None
    import json

    from mopmc.io.scheduler_file import runtime_binding

    from mopmc.design.spec import BUILTIN

    if spec in BUILTIN:
        from mopmc.design.spec import load_design

        return runtime_binding(load_design(spec))
    if not Path(spec).is_file():
        raise PropertyError(f"--binding {spec}: no such binding; give a built-in one ({', '.join(BUILTIN)}) or a binding "
                            "JSON file (MODEL.binding.json of mopmc design build)")
    try:
        doc = json.loads(Path(spec).read_text())
    except (OSError, ValueError) as exc:
        raise PropertyError(f"--binding {spec}: cannot read a JSON binding ({exc})") from None
    from mopmc.errors import SchedulerError

    if isinstance(doc, dict) and doc.get("format") == "mopmc-switch-binding/1":
        try:
            return runtime_binding(doc)
        except (SchedulerError, KeyError, TypeError, ValueError) as exc:
            raise PropertyError(f"--binding {spec}: {exc}") from None
    if isinstance(doc, dict) and "format" in doc:  # (a runtime binding has no format key)
        raise PropertyError(f"--binding {spec}: format: expected 'mopmc-switch-binding/1' (the binding file of "
                            f"mopmc design build), got {doc['format']!r}")
    from mopmc.runtime.scheduler import read_binding

    read_binding(doc, f"--binding {spec}")  # the runtime's checks now, not after the query
    return doc


def binding_steps(spec: str | None) -> int | None:
    """The episode length ``n`` of a binding file of ``mopmc design build`` (read by :func:`load_binding`
    first, which checked it); ``None`` for other bindings."""
    if spec is None or not Path(spec).is_file():
        return None
    import json

    doc = json.loads(Path(spec).read_text())
    return doc.get("n") if isinstance(doc, dict) and doc.get("format") == "mopmc-switch-binding/1" else None


def convex_command(model, prop, const, loss, target, weights, soft, eps_rel, eps_abs, max_iter, engine,
                   json_out, export_path, binding, kind, device=None, plot=None) -> None:
    prop = _one_prop(prop)
    if soft and target is not None:
        raise PropertyError("--soft uses the thresholds as the target; do not also give --target")
    if engine not in ("kernel", "lp", "torch"):
        raise PropertyError(f"--engine {engine!r}: use kernel, lp or torch")
    if device is not None and engine != "torch":
        raise PropertyError(f"--device {device}: only --engine torch runs on a device")
    if engine == "torch":
        from mopmc.engine.torch_engine import check_device_name

        check_device_name(device)  # no torch or a misspelt device fails before the model is built
    if kind not in ("randomised", "mixture"):
        raise PropertyError(f"--scheduler-kind {kind!r}: use randomised or mixture")
    inputs = (("the model", model), ("--binding", binding))  # no output may overwrite them (nor another output)
    if plot is not None:
        from mopmc.queries.plot import _pyplot, check_plot_path

        check_plot_path(plot, inputs=inputs)
        _pyplot()  # no matplotlib: say so before the model is built
    if loss not in ("mse", "wmse", "var"):
        raise PropertyError(f"--loss {loss!r}: use mse, wmse or var")
    if loss == "var" and target is not None:
        raise PropertyError(f"--target {target}: the var loss has no target (it measures the spread of the values); "
                            "use --loss mse or wmse")
    from mopmc.queries.tolerances import check_tolerances

    check_tolerances(eps_rel, eps_abs, max_iter, names=("--eps-rel", "--eps-abs", "--max-iter"))
    if export_path is not None:
        from mopmc.design.build import check_output

        # a missing folder, or an input or --plot under the same name, fails before the model is built
        check_output(export_path, "--export-scheduler", inputs=inputs, outputs=(("--plot", plot),))
    if binding is not None and export_path is None:
        raise PropertyError(f"--binding {binding}: the binding goes into the exported scheduler file; "
                            "it requires --export-scheduler FILE")
    bind = load_binding(binding)  # a misspelt or malformed binding fails before the model is built
    loaded, p = load_multi(model, prop, const, valuations=export_path is not None, engine=engine, device=device)
    if export_path is not None:
        from mopmc.cli.check import refuse_step_bounded_export

        refuse_step_bounded_export(export_path, p)
    if bind is not None:
        from mopmc.io.scheduler_file import check_binding

        # a binding for another model fails before the query
        check_binding(loaded.model, bind, f"--binding {binding}", steps=binding_steps(binding))
    # imported only now (0.24 s, scipy.sparse and the QP solver): the warm-up thread imports it
    # while the model is explored, which leaves the GIL free
    from mopmc.queries.convex import convex_query

    m = len(p.objectives)
    t = parse_vector(target, "--target", m)
    w = parse_vector(weights, "--weights", m)
    callback, stop = progress_reporter() if not json_out else (None, lambda: None)
    try:
        res = convex_query(loaded.model, p.objectives, loss, target=t, weights=w, soft=soft, eps_rel=eps_rel,
                           eps_abs=eps_abs, max_iter=max_iter, engine=engine, device=device, progress=callback)
    finally:
        stop()
    if res.note:  # answered by another engine than the one asked for
        sys.stderr.write(f"note: {p.text}: {res.note}\n")
    out = res.to_json()
    out["property"] = p.text
    out["timings"] = {**load_timings(loaded), **out["timings"]}
    if export_path:
        out["scheduler"] = export(export_path, loaded.model, res, binding=bind, kind=kind)
    if plot is not None:
        from mopmc.queries.plot import plot_convex

        title = f"{model}: convex query ({res.loss_name}), {res.status}, {res.iterations} iterations"
        out["plot"] = str(plot_convex(res, plot, title=title))
    if json_out:
        print_json(out)
    else:
        show(model, out)


def _one_prop(prop: str | list[str] | tuple) -> str:
    """The one ``--prop`` of a convex query: a repeated ``--prop`` is refused, not cut to its last."""
    if isinstance(prop, str):
        return prop
    if len(prop) != 1:
        raise PropertyError(f"--prop is given {len(prop)} times: a convex query takes exactly one multi(...) property")
    return prop[0]


def show(title: str, out: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{title}: convex query ({out['loss_name']})")
    table.add_column("objective")
    table.add_column("value", justify="right")
    for o, v in zip(out["objectives"], out["point"] or [None] * len(out["objectives"])):
        table.add_row(o["formula"], "-" if v is None else f"{v:.9g}")
    console = Console(markup=False)  # property texts hold [...]: never rich markup
    console.print(table)
    console.print(f"status {out['status']}: loss {out['loss']:.10g}, lower bound {out['lower_bound']:.10g}, "
                  f"gap {out['gap']:.3g}, {out['iterations']} iterations, {out['timings']['total']:.2f} s")
    if out["status"] == "iteration_limit":
        console.print(f"the gap is still open after {out['iterations']} iterations; --max-iter continues further "
                      "(each iteration asks the oracle at most twice)")
    if "separating_direction" in out:
        sd = out["separating_direction"]
        console.print(f"no achievable point in the box: direction {sd['direction']} reaches at most {sd['bound']:.9g}, "
                      f"the box needs {sd['required']:.9g}")
    if "scheduler" in out and out["scheduler"]["path"] is not None:  # (else the note said why not)
        sc = out["scheduler"]
        console.print(f"scheduler ({sc['kind']}) -> {sc['path']}" + (" (for the switch runtime)" if sc.get("runtime") else "")
                      + (f" ({sc['note']})" if sc["note"] else ""))


@app.command("convex")
def convex(
    model: str = typer.Argument(..., help="Model file (PRISM, JANI, UMB) or example:NAME."),
    prop: List[str] = typer.Option(..., "--prop", help="One multi(...) property; its thresholds give the box (or the target with --soft)."),
    const: Optional[List[str]] = typer.Option(None, "--const", help="Constant values NAME=VALUE[,...]; may be repeated."),
    loss: str = typer.Option("mse", "--loss", help="mse, wmse or var (original units)."),
    target: Optional[str] = typer.Option(None, "--target", help="Target t1,t2,... of mse/wmse (default: the origin)."),
    weights: Optional[str] = typer.Option(None, "--weights", help="Weights w1,w2,... of wmse."),
    soft: bool = typer.Option(False, "--soft", help="Thresholds are the target; no box."),
    eps_rel: float = typer.Option(1e-4, "--eps-rel", help="Stop when upper - lower <= max(eps_abs, eps_rel*|upper|)."),
    eps_abs: float = typer.Option(1e-10, "--eps-abs", help="Absolute gap tolerance."),
    max_iter: int = typer.Option(100, "--max-iter", help="Iterations after the 2m initial oracle calls (at most two calls each)."),
    engine: str = typer.Option("kernel", "--engine", help="kernel (fast, CPU), lp (exact occupation LP oracle) or torch (the kernel on a PyTorch device)."),
    device: Optional[str] = typer.Option(None, "--device", help="With --engine torch: cuda or cpu (default cuda when available)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    export_scheduler: Optional[str] = typer.Option(None, "--export-scheduler", help="Write the scheduler (docs/formats.md)."),
    binding: Optional[str] = typer.Option(None, "--binding", help="paper-switch or a runtime binding JSON: export a file the switch runtime executes."),
    kind: str = typer.Option("randomised", "--scheduler-kind", help="randomised (one memoryless scheduler) or mixture."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Draw the convergence (bounds and gap per iteration; with 2 objectives the objective space too): .png, .pdf or .svg."),
) -> None:
    """Minimise a convex loss over the achievable values within a box, with certified bounds."""
    run_cli(lambda: convex_command(model, prop, const, loss, target, weights, soft, eps_rel, eps_abs, max_iter,
                                   engine, json_out, export_scheduler, binding, kind, device, plot))
