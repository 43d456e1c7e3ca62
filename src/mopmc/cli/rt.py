"""``mopmc rt``: the real-time runtime (simulate episodes, print metrics).

Registered by the main CLI as ``app.add_typer(rt_app, name="rt")``. User errors are
:class:`~mopmc.errors.MopmcError` subclasses, turned into one stderr line and exit 2 by
:func:`mopmc.cli.common.run_cli`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(help="Real-time highway runtime: delays, switch, secondary controllers, metrics.", no_args_is_help=True)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def _render(doc: dict) -> str:
    lines = [f"episodes {doc['episodes']}  steps {doc['steps']}  terminated {doc['terminated_episodes']}"]
    for key, label, unit in (
        ("p10_ttc", "P10 TTC", "s"), ("p50_headway", "P50 headway", "s"),
        ("prob_lane_departure", "LD per step", ""), ("episode_lane_departure", "LD per episode", ""),
        ("controller_cost", "controller cost", "per step"), ("secondary_share", "secondary share", ""),
    ):
        ci = doc.get(f"{key}_ci")
        ci_text = f"  [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else ""
        lines.append(f"{label:<20}{_fmt(doc[key])} {unit}{ci_text}".rstrip())
    for key, label in (("pr_ttc", "PR TTC"), ("pr_headway", "PR headway")):
        for score, e in doc[key].items():
            lines.append(f"{label + ' (' + score + ')':<20} {_fmt(e['value'])}")
    return "\n".join(lines)


@app.callback()
def rt() -> None:
    """Real-time highway runtime: delays, switch, secondary controllers, metrics."""


@app.command()
def simulate(
    episodes: int = typer.Option(10, "--episodes", "-n", help="Number of episodes."),
    delay: str = typer.Option("exp:0.2", "--delay", help="Delay spec: SECONDS, exp:MEAN[:TRUNC], uniform:A:B, empirical:FILE.csv."),
    switch: str = typer.Option("none", "--switch", help="none, C1..C4, uniform, or a scheduler FILE.json."),
    agent: str = typer.Option("idm", "--agent", help="idm (stand-in primary) or [ALGO:]PATH of a Stable-Baselines3 model."),
    vehicles: Optional[int] = typer.Option(None, "--vehicles", help="Other vehicles in the scene (default 50, highway-v0)."),
    seed: int = typer.Option(0, "--seed", help="Root seed; the same seed gives identical output."),
    config: Optional[Path] = typer.Option(None, "--config", help="Runtime config file (JSON or YAML)."),
    ttc_score: list[float] = typer.Option([], "--ttc-score", help="Report the TTC percentile rank of this score (repeatable)."),
    hw_score: list[float] = typer.Option([], "--hw-score", help="Report the headway percentile rank of this score (repeatable)."),
    log: Optional[Path] = typer.Option(None, "--log", help="Write the per-step log as CSV."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run seeded episodes of the real-time highway env and print the metrics."""
    from mopmc.cli.common import run_cli

    run_cli(lambda: _simulate(episodes, delay, switch, agent, vehicles, seed, config, ttc_score, hw_score, log, as_json))


def _simulate(
    episodes: int, delay: str, switch: str, agent: str, vehicles: Optional[int], seed: int,
    config: Optional[Path], ttc_score: list[float], hw_score: list[float], log: Optional[Path], as_json: bool,
) -> None:
    import dataclasses

    from mopmc.runtime.config import RuntimeConfig, load_config
    from mopmc.runtime.simulate import result_to_dict, simulate as run, write_log

    cfg = load_config(config) if config is not None else RuntimeConfig()
    if ttc_score or hw_score:
        cfg = dataclasses.replace(
            cfg,
            metrics=dataclasses.replace(
                cfg.metrics,
                ttc_scores=cfg.metrics.ttc_scores + tuple(ttc_score),
                headway_scores=cfg.metrics.headway_scores + tuple(hw_score),
            ),
        )
    started = time.perf_counter()

    def progress(result) -> None:  # type: ignore[no-untyped-def]
        print(f"episode {result.episode + 1}/{episodes}: {len(result.records)} steps", file=sys.stderr)

    result = run(
        episodes=episodes, delay=delay, switch=switch, agent=agent, vehicles=vehicles, seed=seed,
        config=cfg, on_episode=progress,
    )
    if log is not None:
        write_log(log, result.episodes)
    doc = result_to_dict(result)
    print(f"simulated {episodes} episode(s) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if as_json:
        typer.echo(json.dumps(doc, indent=2, sort_keys=True, allow_nan=False))
    else:
        typer.echo(_render(doc))
