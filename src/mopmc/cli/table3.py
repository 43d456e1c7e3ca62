"""``mopmc table3 [MODEL]``: the paper's Table 3, every number computed in the run.

Rows: direct evaluation of the fixed strategies C1..C4 and uniform (our sparse solve; Storm on the
induced chain beside it), the four single-objective minima (kernel; Storm), the two achievability
queries (ours; Storm's multi-objective engine), the convex queries (MSE to the ``mo`` thresholds
without a box, the paper's query; MSE to the origin within the ``mo2`` box), whether the paper's
reported point is achievable, and the exported randomised scheduler, re-evaluated by us and by
Storm on its induced chain. MODEL defaults to the built-in paper-switch, built in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import typer

from mopmc.cli.common import print_json, run_cli
from mopmc.errors import PropertyError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

REWARDS = ("ctrl_cost", "headway_cost", "lane_dep_cost", "ttc_cost")
MO = (1.9, 0.22, 0.169, 0.035)
MO2 = (2.0, 0.23, 0.174, 0.04)
PAPER_POINT = (1.9, 0.2189, 0.1720, 0.0377)


def _multi(bounds) -> str:
    return "multi(" + ", ".join(f'R{{"{r}"}}<={b}[ C ]' for r, b in zip(REWARDS, bounds)) + ")"


def _objectives(model, bounds):
    from mopmc.properties.objectives import Objective

    return tuple(Objective(i, f'R{{"{r}"}}<={b} [C]', "total_reward", "min", r, comparison="<=", threshold=float(b))
                 for i, (r, b) in enumerate(zip(REWARDS, bounds)))


def _model(spec: str | None, binding_spec: str | None = None):
    """The model, its runtime binding (``None``: none), its name, and why a binding found beside the
    model is not used. A model file takes ``binding_spec`` (as ``mopmc convex --binding``), by default
    the ``MODEL.binding.json`` that ``mopmc design build`` writes beside it, when there is one."""
    if spec is None or spec == "paper-switch":
        from mopmc.design.build import convert_design
        from mopmc.design.spec import load_design
        from mopmc.io.scheduler_file import runtime_binding

        design = load_design("paper-switch")
        return convert_design(design).model, runtime_binding(design), "paper-switch", None
    from mopmc.io.load import load

    from mopmc.cli.convex import binding_steps, load_binding
    from mopmc.errors import MopmcError
    from mopmc.io.scheduler_file import check_binding

    sidecar = binding_spec is None and Path(f"{spec}.binding.json").is_file()
    binding_spec = f"{spec}.binding.json" if sidecar else binding_spec
    binding = load_binding(binding_spec) if not sidecar else None
    model = load(spec, valuations=True).model
    _check_switch_model(model, spec)
    if sidecar:
        try:
            binding = load_binding(binding_spec)
            check_binding(model, binding, binding_spec, steps=binding_steps(binding_spec))
        except MopmcError as exc:  # not asked for: the export is then for evaluation, with a note why
            return model, None, spec, f"not a runtime file: {exc}"
    elif binding is not None:
        check_binding(model, binding, f"--binding {binding_spec}", steps=binding_steps(binding_spec))
    return model, binding, spec, None


def _check_switch_model(model, name: str) -> None:
    """Table 3 needs the switch's reward models and its configuration variable (the strategies check the actions)."""
    from mopmc.errors import UnknownNameError

    missing = [r for r in REWARDS if r not in model.rewards]
    if missing:
        raise UnknownNameError(f"{name}: not a switch model: no reward model {', '.join(map(repr, missing))} "
                               f"(table3 needs {', '.join(REWARDS)}; build one with mopmc design build paper-switch)")
    if model.valuations is None or "conf" not in model.valuations.names:
        raise UnknownNameError(f"{name}: not a switch model: no configuration variable 'conf' in its states")


def table3(spec: str | None, export_path: str | None, storm: bool, eps_rel: float, progress=None,
           binding: str | None = None) -> dict:
    """All rows of Table 3 as a JSON-ready dict."""
    from mopmc.engine.evaluate import evaluate, induced_chain
    from mopmc.engine.mixing import randomise
    from mopmc.engine.oracle import kernel_oracle
    from mopmc.io.scheduler_file import write_export
    from mopmc.queries.convex import convex_query, mixture_of
    from mopmc.queries.dispatch import multi_query
    from mopmc.queries.switch_strategies import configurations, switch_strategy

    step = progress or (lambda text: None)
    model, binding, name, binding_note = _model(spec, binding)
    objs = _objectives(model, MO)
    out: dict = {"model": name, "states": model.n_states, "choices": model.n_choices,
                 "objectives": list(REWARDS), "with_storm": storm}
    storm_chain = _storm_chain if storm else (lambda chain, objectives: None)

    step("direct evaluation")
    direct = []
    for c in [*configurations(model), "uniform"]:
        pol = switch_strategy(model, c)
        ours = evaluate(model, pol, objs).values
        direct.append({"strategy": f"C{c}" if c != "uniform" else "uniform", "values": ours.tolist(),
                       "storm": storm_chain(induced_chain(model, pol, objs), objs)})
    out["direct"] = direct

    step("single-objective minima")
    oracle = kernel_oracle(model, objs)
    storm_min = _storm(model, ";".join(f'R{{"{r}"}}min=? [C]' for r in REWARDS)) if storm else [None] * 4
    out["minima"] = [{"objective": r, "value": float(oracle(-np.eye(4)[i]).point[i]), "storm": storm_min[i]}
                     for i, r in enumerate(REWARDS)]

    step("achievability")
    from mopmc.properties.objectives import Property

    ach = []
    for bounds in (MO, MO2):
        prop = Property(0, _multi(bounds), None, _objectives(model, bounds), True)
        res = multi_query(model, prop)
        ach.append({"property": prop.text, "achievable": res.achievable, "margin": res.margin,
                    "storm": _storm(model, prop.text)[0] if storm else None})
    out["achievability"] = ach

    step("convex query (soft MSE to the mo thresholds)")
    soft = convex_query(model, objs, "mse", soft=True, eps_rel=eps_rel)
    out["convex_soft"] = {**soft.to_json(), "storm": None}
    step("convex query (MSE to the origin within the mo2 box)")
    boxed = convex_query(model, _objectives(model, MO2), "mse", eps_rel=eps_rel)
    out["convex_box"] = {**boxed.to_json(), "storm": None}
    paper = convex_query(model, _objectives(model, PAPER_POINT), "mse", soft=True, eps_rel=eps_rel)
    out["paper_point"] = {"point": list(PAPER_POINT), "achievable": bool(paper.lower_bound <= 0.0),
                          "distance_lower_bound": float(np.sqrt(4 * max(paper.lower_bound, 0.0))),
                          "nearest_achievable": paper.point.tolist()}

    step("scheduler")
    mix = mixture_of(soft)
    rnd = randomise(model, mix)
    sched = rnd.policy if rnd.policy is not None else mix
    re_ours = evaluate(model, sched, objs).values
    re_storm = storm_chain(induced_chain(model, sched, objs), objs) if rnd.policy is not None else None
    info = {"kind": "randomised" if rnd.policy is not None else "mixture", "note": rnd.reason,
            "components": len(mix.policies), "evaluated": re_ours.tolist(), "storm": re_storm, "path": None}
    if export_path:
        write_export(export_path, model, objs, soft.point, sched, binding)
        info["path"] = export_path
        info["runtime"] = binding is not None
        if binding_note:
            info["note"] = "; ".join(filter(None, (info["note"], binding_note)))
    out["scheduler"] = info
    return out


def _storm(model, text: str) -> list:
    from mopmc.io.storm_check import storm_values

    return storm_values(model, text)


def _storm_chain(chain, objectives):
    from mopmc.io.storm_check import storm_chain_values

    return storm_chain_values(chain, objectives).tolist()


def _fmt(v, digits: int = 8) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(_fmt(x, digits) for x in v) + ")"
    return f"{v:.{digits}g}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def render(out: dict) -> None:
    """The rows as a table and lines; Storm's answer beside ours unless the run was ``--no-storm``."""
    from rich.console import Console
    from rich.table import Table

    storm = out.get("with_storm", True)

    def beside(ours: str, theirs: str) -> str:
        return f"{ours} | {theirs}" if storm else ours

    console = Console(markup=False)  # property texts hold [...]: never rich markup
    t = Table(title=f"Table 3 on {out['model']} ({out['states']} states): " + ("ours | Storm" if storm else "ours (--no-storm)"))
    t.add_column("row")
    for r in out["objectives"]:
        t.add_column(r, justify="right")
    for d in out["direct"]:
        theirs = d["storm"] or [None] * 4
        t.add_row(d["strategy"], *[beside(_fmt(a), _fmt(b)) for a, b in zip(d["values"], theirs)])
    t.add_row("min", *[beside(_fmt(m["value"]), _fmt(m["storm"])) for m in out["minima"]])
    console.print(t)
    for a in out["achievability"]:
        console.print(beside(f"{a['property']}: achievable {_fmt(a['achievable'])} (margin {_fmt(a['margin'], 4)})",
                             f"Storm {_fmt(a['storm'])}"))
    for key, what in (("convex_soft", "MSE to the mo thresholds, no box"), ("convex_box", "MSE to the origin within the mo2 box")):
        c = out[key]
        console.print(beside(f"convex ({what}): {c['status']}, loss {_fmt(c['loss'], 10)} (lower bound "
                             f"{_fmt(c['lower_bound'], 10)}) at {_fmt(c['point'], 8)}", "Storm has no convex query"))
    p = out["paper_point"]
    console.print(f"paper's point {_fmt(p['point'], 5)}: achievable {_fmt(p['achievable'])}; distance to the achievable "
                  f"set >= {_fmt(p['distance_lower_bound'], 4)}, nearest {_fmt(p['nearest_achievable'], 6)}")
    s = out["scheduler"]
    console.print(beside(f"scheduler ({s['kind']}, mixing {_plural(s['components'], 'deterministic scheduler')}) "
                         f"re-evaluated: {_fmt(s['evaluated'], 8)}", f"Storm on its chain {_fmt(s['storm'], 8)}")
                  + (f" -> {s['path']}" + (" (for the switch runtime)" if s.get("runtime") else "") if s["path"] else "") + (f" ({s['note']})" if s["note"] else ""))


@app.command("table3")
def table3_cmd(
    model: Optional[str] = typer.Argument(None, help="A switch model (PRISM/UMB); default: the built-in paper-switch."),
    export_scheduler: Optional[str] = typer.Option("table3-scheduler.json", "--export-scheduler", help="Where to write the convex query's scheduler ('' to skip)."),
    binding: Optional[str] = typer.Option(None, "--binding", help="A model file's runtime binding (paper-switch or a binding JSON; default: MODEL.binding.json of mopmc design build when it exists): the scheduler is exported for the switch runtime."),
    storm: bool = typer.Option(True, "--storm/--no-storm", help="Print Storm's answer beside ours."),
    eps_rel: float = typer.Option(1e-7, "--eps-rel", help="Relative gap of the convex queries."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The paper's Table 3: direct evaluations, minima, achievability and convex queries, with Storm beside."""

    def body():
        from rich.console import Console

        from mopmc.design.build import check_output
        from mopmc.queries.tolerances import check_eps_rel

        check_eps_rel(eps_rel)
        if binding is not None and model in (None, "paper-switch"):
            raise PropertyError(f"--binding {binding}: the built-in paper-switch has its own binding; give --binding "
                                "with a model file")
        if export_scheduler:  # not over the model or a binding (the sidecar MODEL.binding.json too)
            sidecar = f"{model}.binding.json" if model else None
            check_output(export_scheduler, "--export-scheduler",
                         inputs=(("the model", model), ("--binding", binding), ("the model's binding", sidecar)))
        console = Console(stderr=True)
        with console.status("table 3") as status:
            out = table3(model, export_scheduler or None, storm, eps_rel,
                         progress=lambda text: status.update(f"table 3: {text}"), binding=binding)
        if json_out:
            print_json(out)
        else:
            render(out)

    run_cli(body)
