"""``mopmc design build`` and ``mopmc design show``: timed-automata designs to models and pictures."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from mopmc.cli.common import print_json, run_cli

app = typer.Typer(help="Design switches as timed automata; build the MDP; draw the automata.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)

SpecArg = typer.Argument(..., help="Design spec: a YAML file, or the built-in 'paper-switch' (the paper's SW2, Table 3 parameters).")
ParamsOpt = typer.Option(None, "--params", help="Parameter file (YAML) for the switch, or probabilities for a YAML spec.")


@app.command()
def build(
    spec: str = SpecArg,
    out: Path = typer.Option(..., "--out", help="Output model: .prism (PRISM text) or .umb (binary)."),
    params: Optional[Path] = ParamsOpt,
    n: Optional[int] = typer.Option(None, "--n", help="Episode length n (switch specs only); overrides the parameter file."),
    binding_out: Optional[Path] = typer.Option(None, "--binding", help="Where to write the variable binding JSON (switch specs; default MODEL.binding.json)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Compose the automata, convert to an MDP and write it (paper Sec. 3.3)."""

    def body():
        from mopmc.design.build import build_design

        t0 = time.perf_counter()
        result = build_design(spec, out, params=params, n=n, binding_path=binding_out)
        summary = {"spec": spec, "out": str(out), **result.summary(), "seconds": round(time.perf_counter() - t0, 3)}
        if json_out:
            print_json(summary)
            return
        typer.echo(f"{summary['states']} states, {summary['choices']} choices, {summary['transitions']} transitions -> {out}")
        if result.binding_path is not None:
            typer.echo(f"binding -> {result.binding_path}")

    run_cli(body)


@app.command()
def show(
    spec: str = SpecArg,
    out: Path = typer.Option(..., "--out", help="Picture: .dot (Graphviz text), or .png/.svg/.pdf (needs Graphviz 'dot')."),
    component: Optional[str] = typer.Option(None, "--component", help="Draw one automaton instead of the composition."),
    params: Optional[Path] = ParamsOpt,
) -> None:
    """Draw the composed automata (or one component) with Graphviz."""

    def body():
        from mopmc.design.dot import automaton_dot, network_dot, render
        from mopmc.design.spec import load_design

        design = load_design(spec, params)
        net = design.network
        text = automaton_dot(net.component(component)) if component else network_dot(net)
        render(text, out)
        typer.echo(f"{component or net.name} -> {out}")

    run_cli(body)


