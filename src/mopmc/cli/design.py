"""``mopmc design build`` and ``mopmc design show``: timed-automata designs to models and pictures."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from mopmc.cli.common import comma_list, print_json, ray_option, run_cli

app = typer.Typer(help="Design switches as timed automata; build the MDP; draw the automata.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)

SpecArg = typer.Argument(..., help="Design spec: a YAML file, or the built-in 'paper-switch' (the paper's SW2, Table 3 parameters).")
ParamsOpt = typer.Option(None, "--params", help="Parameter file (YAML) for the switch, or probabilities for a YAML spec.")


@app.command()
def build(
    spec: str = SpecArg,
    out: str = typer.Option(..., "--out", help="Output model: .prism (PRISM text) or .umb (binary)."),
    params: Optional[Path] = ParamsOpt,
    n: Optional[int] = typer.Option(None, "--n", help="Episode length n (switch specs only); overrides the parameter file."),
    binding_out: Optional[str] = typer.Option(None, "--binding", help="Where to write the variable binding JSON (switch specs; default MODEL.binding.json)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Compose the automata, convert to an MDP and write it (paper Sec. 3.3)."""

    def body():
        from mopmc.design.build import build_design

        t0 = time.perf_counter()
        _check_n(n)
        result = build_design(spec, out, params=params, n=n, binding_path=binding_out)
        summary = {"spec": spec, "out": str(result.out), **result.summary(), "seconds": round(time.perf_counter() - t0, 3)}
        if json_out:
            print_json(summary)
            return
        typer.echo(f"{summary['states']} states, {summary['choices']} choices, {summary['transitions']} transitions -> {result.out}")
        if result.binding_path is not None:
            typer.echo(f"binding -> {result.binding_path}")

    run_cli(body)


@app.command()
def show(
    spec: str = SpecArg,
    out: str = typer.Option(..., "--out", help="Picture: .dot (Graphviz text), or .png/.svg/.pdf (needs Graphviz 'dot')."),
    component: Optional[str] = typer.Option(None, "--component", help="Draw one automaton instead of the composition."),
    params: Optional[Path] = ParamsOpt,
) -> None:
    """Draw the composed automata (or one component) with Graphviz."""

    def body():
        from mopmc.design.build import check_output
        from mopmc.design.dot import automaton_dot, network_dot, render
        from mopmc.design.spec import load_design

        path = check_output(out, "--out", inputs=(("the spec", spec), ("--params", params)))
        design = load_design(spec, params)
        net = design.network
        text = automaton_dot(net.component(component)) if component else network_dot(net)
        render(text, path)
        typer.echo(f"{component or net.name} -> {path}")

    run_cli(body)


def _check_n(n: Optional[int]) -> None:
    """``--n`` in range, named in the message (before anything is built)."""
    if n is not None:
        from mopmc.design.params import episode_length

        episode_length(n, "--n")


@app.command()
def sensitivity(
    out: Path = typer.Option(..., "--out", help="Folder for the runs (resumed when it holds some), CSV, Markdown and the box plots."),
    params: Optional[Path] = typer.Option(None, "--params", help="Parameter file (YAML) of the switch; default: the built-in Table 3 set."),
    n: Optional[int] = typer.Option(None, "--n", help="Episode length n; overrides the parameter file."),
    prop: Optional[List[str]] = typer.Option(None, "--prop", help="The multi(...) property of the convex query; default: Table 3's (the mo thresholds)."),
    soft: bool = typer.Option(True, "--soft/--box", help="--soft: MSE to the thresholds, no box (the paper's query); --box: MSE to the origin within the thresholds."),
    loss: str = typer.Option("mse", "--loss", help="mse or var."),
    levels: str = typer.Option(",".join(f"{d:g}" for d in (0.015 * i for i in range(1, 11))), "--levels",
                               help="Perturbation levels (relative), comma-separated."),
    eps_rel: float = typer.Option(1e-7, "--eps-rel", help="Relative gap of each convex query."),
    workers: int = typer.Option(1, "--workers", help="Processes running the queries side by side (with --ray local: its CPUs)."),
    ray: Optional[str] = typer.Option(None, "--ray", callback=ray_option, help="Run the queries as Ray tasks: 'local' starts a local instance, else a cluster address."),
    engine: str = typer.Option("kernel", "--engine", help="kernel (CPU) or torch (the kernel on a PyTorch device)."),
    device: Optional[str] = typer.Option(None, "--device", help="With --engine torch: cuda or cpu."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Draw OUT/figure9.png (needs matplotlib)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (the summary)."),
) -> None:
    """Sensitivity of the convex query to every probability of the parameter file (paper Figure 9)."""

    def body():
        from mopmc.cli.convex import _one_prop
        from mopmc.cli.table3 import MO, _multi
        from mopmc.design import sensitivity as sens
        from mopmc.design.params import load_parameters
        from mopmc.errors import ConfigError, DependencyError
        from mopmc.queries.tolerances import check_eps_rel

        if engine not in ("kernel", "torch"):
            raise ConfigError(f"--engine {engine!r}: use kernel or torch")
        if device is not None and engine != "torch":
            raise ConfigError(f"--device {device}: only --engine torch runs on a device")
        if engine == "torch":
            from mopmc.engine.torch_engine import check_device_name

            check_device_name(device)
        if loss not in ("mse", "var"):
            raise ConfigError(f"--loss {loss!r}: use mse or var")
        check_eps_rel(eps_rel)
        _check_n(n)
        one = _one_prop(prop) if prop else None  # a repeated --prop is refused, not cut to its last
        try:
            lv = tuple(float(x) for x in comma_list(levels, "--levels", "level", "0.015,0.03"))
        except ValueError:
            raise ConfigError(f"--levels {levels!r}: give numbers in (0, 1), comma-separated") from None
        p = load_parameters(params if params is not None else "table3")
        if n is not None:
            p = p.with_n(n)
        query = sens.Query(one or _multi(MO), loss, soft, eps_rel, engine, device)
        bar = None
        if not json_out and sys.stderr.isatty():  # a transient bar ends with an empty line elsewhere
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            bar = Progress(TextColumn("sensitivity"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                           console=Console(stderr=True), transient=True)
        task = bar.add_task("runs", total=None) if bar else None
        last = [time.monotonic()]

        def progress(done: int, total: int) -> None:
            if bar:
                bar.update(task, completed=done, total=total)
            elif done == total or time.monotonic() - last[0] >= 5.0:  # a log, not a terminal: a line now and then
                last[0] = time.monotonic()
                print(f"sensitivity: {done}/{total} runs", file=sys.stderr, flush=True)

        if bar:
            bar.start()
        try:
            results = sens.run(p, query, out, levels=lv, workers=workers, ray_address=ray, progress=progress)
        finally:
            if bar:
                bar.stop()
        objectives = [o.reward_model or o.text for o in sens.objectives_of(p, query)]
        summary = sens.summarise(results, objectives)
        files = sens.write_summary(out, summary, results, objectives)
        if plot:
            labels = {m.reward: f"{m.reward} ({m.name})" for m in p.metrics}
            try:
                files["plot"] = sens.plot(summary, results, out / "figure9.png", labels)
            except DependencyError as e:
                sys.stderr.write(f"note: no plot: {e}\n")
        if json_out:
            print_json({**summary, "files": {k: str(v) for k, v in files.items()}})
            return
        typer.echo(sens.markdown(summary).rstrip())
        typer.echo(f"{len(results)} runs -> {out} ({', '.join(v.name for v in files.values())})")

    run_cli(body)
