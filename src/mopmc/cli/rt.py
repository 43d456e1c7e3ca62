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

from mopmc.cli.common import ray_option

app = typer.Typer(help="Real-time highway runtime: delays, switch, secondary controllers, metrics.", no_args_is_help=True)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def _seconds(option: str, values: list[float]) -> None:
    """Scores given on the command line: finite seconds >= 0, as in the config file's metrics."""
    from mopmc.errors import ConfigError

    for v in values:
        if not 0 <= v < float("inf"):
            raise ConfigError(f"{option} {v}: expected a finite number of seconds >= 0")


def _workers(workers: Optional[int]) -> None:
    from mopmc.errors import ConfigError

    if workers is not None and workers < 0:
        raise ConfigError(f"--workers must be >= 0 (0 = in this process), got {workers}")


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
    delay: str = typer.Option("exp:0.2", "--delay", help="Delay spec: SECONDS, exp:MEAN[:TRUNC], uniform:LO:HI, empirical:FILE.csv."),
    switch: str = typer.Option("none", "--switch", help="none, C1..C4, uniform, or a scheduler FILE.json."),
    agent: str = typer.Option("shipped", "--agent", help="shipped (the trained DDPG agent, docs/agents.md), idm (the previous IDM stand-in) or [ALGO:]PATH of a Stable-Baselines3 model."),
    vehicles: Optional[int] = typer.Option(None, "--vehicles", help="Other vehicles in the scene (default 50, highway-v0)."),
    seed: int = typer.Option(0, "--seed", help="Root seed; the same seed gives identical output."),
    config: Optional[Path] = typer.Option(None, "--config", help="Runtime config file (JSON or YAML)."),
    ttc_score: list[float] = typer.Option([], "--ttc-score", help="Report the TTC percentile rank of this score (repeatable)."),
    hw_score: list[float] = typer.Option([], "--hw-score", help="Report the headway percentile rank of this score (repeatable)."),
    log: Optional[Path] = typer.Option(None, "--log", help="Write the per-step log as CSV."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    fast: bool = typer.Option(False, "--fast", help="Use the accelerated road (same dynamics as stock highway-env, 10-15x faster at 50 vehicles)."),
) -> None:
    """Run seeded episodes of the real-time highway env and print the metrics."""
    from mopmc.cli.common import run_cli

    run_cli(lambda: _simulate(episodes, delay, switch, agent, vehicles, seed, config, ttc_score, hw_score, log, as_json,
                              fast))


def _simulate(
    episodes: int, delay: str, switch: str, agent: str, vehicles: Optional[int], seed: int,
    config: Optional[Path], ttc_score: list[float], hw_score: list[float], log: Optional[Path], as_json: bool,
    fast: bool = False,
) -> None:
    import dataclasses

    from mopmc.runtime.config import RuntimeConfig, load_config
    from mopmc.runtime.simulate import result_to_dict, simulate as run, write_log

    _seconds("--ttc-score", ttc_score)
    _seconds("--hw-score", hw_score)
    if log is not None:
        from mopmc.design.build import check_output

        # a missing folder, or an input under the same name, fails before the episodes run, not after
        check_output(log, "--log", inputs=(("--config", config), ("--switch", switch)))
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
        config=cfg, on_episode=progress, simulator="fast" if fast else "stock",
    )
    if log is not None:
        write_log(log, result.episodes)
    doc = result_to_dict(result)
    print(f"simulated {episodes} episode(s) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if as_json:
        typer.echo(json.dumps(doc, indent=2, sort_keys=True, allow_nan=False))
    else:
        typer.echo(_render(doc))


@app.command()
def estimate(
    logs: list[Path] = typer.Argument(..., help="Step logs: CSV files of 'rt simulate --log', or sweep folders / episode files."),
    out: Path = typer.Option(..., "--out", help="Parameter file to write (YAML, docs/parameter-file.md)."),
    reference: Optional[Path] = typer.Option(None, "--reference", help="Reference run (a log or sweep folder) whose P10 TTC and P50 HW are the scores."),
    ttc_score: Optional[float] = typer.Option(None, "--ttc-score", help="TTC score [s] (instead of the reference run's P10)."),
    hw_score: Optional[float] = typer.Option(None, "--hw-score", help="Headway score [s] (instead of the reference run's P50)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Runtime config the logs were made with (configurations, k)."),
    n: Optional[int] = typer.Option(None, "--n", help="Episode length n of the model (default: the decision steps per episode the logs record)."),
    method: str = typer.Option("clopper-pearson", "--ci", help="Interval: clopper-pearson or wilson."),
    level: float = typer.Option(0.95, "--level", help="Confidence level of the intervals."),
) -> None:
    """Estimate the switch model's probabilities per (configuration, controller) from runtime logs."""
    from mopmc.cli.common import run_cli

    run_cli(lambda: _estimate(logs, out, reference, ttc_score, hw_score, config, n, method, level))


def _estimate(logs, out, reference, ttc_score, hw_score, config, n, method, level) -> None:  # type: ignore[no-untyped-def]
    from mopmc.design.params import episode_length as check_n
    from mopmc.errors import ConfigError
    from mopmc.runtime.config import RuntimeConfig, load_config
    from mopmc.runtime.estimate import (METHODS, Score, episode_length, estimate_parameters, length_notes, load_logs,
                                        reference_hint, reference_scores, switched_note, write_parameters)

    _seconds("--ttc-score", [] if ttc_score is None else [ttc_score])
    _seconds("--hw-score", [] if hw_score is None else [hw_score])
    if method not in METHODS:
        raise ConfigError(f"--ci {method!r}: unknown interval method; use {' or '.join(METHODS)}")
    if not 0 < level < 1:
        raise ConfigError(f"--level {level}: the confidence level must lie in (0, 1), e.g. 0.95")
    if n is not None:  # named as the option, before the logs are read (the written file's check would name --out)
        check_n(n, "--n")
    from mopmc.design.build import check_output

    # as design build: a missing folder is an error, not created; an input is not overwritten
    check_output(out, "--out", inputs=(("--config", config), ("--reference", reference), *(("LOGS", g) for g in logs)))
    cfg = load_config(config) if config is not None else RuntimeConfig()
    loaded = load_logs(logs, cfg.controllers)  # a missing or malformed log is named before a missing option
    if reference is None and (ttc_score is None or hw_score is None):
        raise ConfigError("give --reference RUN (a run whose P10 TTC and P50 HW become the scores) or both "
                          "--ttc-score and --hw-score" + reference_hint(logs))
    ref_logs = load_logs([reference], cfg.controllers) if reference is not None else None
    ref = reference_scores(ref_logs, str(reference)) if ref_logs is not None else None
    notes = [switched_note(ref_logs, str(reference))] if ref_logs is not None and (ttc_score is None or hw_score is None) else []
    ttc = Score(ttc_score, "given", {"source": "--ttc-score"}) if ttc_score is not None else ref[0]  # type: ignore[index]
    hw = Score(hw_score, "given", {"source": "--hw-score"}) if hw_score is not None else ref[1]  # type: ignore[index]
    if n is not None:
        steps, n_from = n, "--n"
    else:
        recorded = episode_length(loaded)
        steps, n_from = recorded.steps, recorded.where
        check_n(steps, f"n (the episode length the logs record: {n_from}; give --n)")
        notes += length_notes(loaded, steps)
    for note in filter(None, notes):
        typer.echo(f"note: {note}", err=True)
    doc = estimate_parameters(loaded, cfg.switch.configurations, n=steps, k=cfg.switch.min_consecutive_calls,
                              ttc=ttc, hw=hw, method=method, level=level, n_from=n_from)
    write_parameters(doc, out)
    confs = ", ".join(c["name"] for c in doc["configurations"])
    typer.echo(f"{doc['provenance']['steps']} steps of {doc['provenance']['episodes']} episode(s) -> {out} ({confs}; "
               f"n {steps} from {n_from}; TTC score {ttc.value:.4g} s, HW score {hw.value:.4g} s)")


@app.command()
def train(
    config: Path = typer.Argument(..., help="Training config (YAML or JSON, docs/agents.md)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output folder (default: the config's output); an existing run there is resumed."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar with ETA on stderr."),
) -> None:
    """Train a DDPG agent on the undelayed env; rerun the same command to resume after an interruption."""
    from mopmc.cli.common import run_cli

    def body() -> None:
        from mopmc.runtime.train import load_train_config, train as run

        result = run(load_train_config(config), out, progress=progress)
        last = result.evaluations[-1] if result.evaluations else {}
        if result.already_complete:
            typer.echo(f"{result.final_model.parent}: already complete ({result.steps} steps); nothing to train "
                       "(raise total_steps to train on, or use another --out)", err=True)
        typer.echo(json.dumps({"steps": result.steps, "resumed_from": result.resumed_from,
                               "already_complete": result.already_complete,
                               "final_model": str(result.final_model),
                               "best_model": None if result.best_model is None else str(result.best_model),
                               "last_evaluation": last}, indent=2))

    run_cli(body)


experiment_app = typer.Typer(help="The paper's experiments (tables), built on resumable sweeps.", no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")


@experiment_app.command("table4")
def table4(
    out: Path = typer.Option(..., "--out", help="Output folder (episodes, table4.csv/.md/.json/.png); an existing run there is resumed."),
    episodes: int = typer.Option(20, "--episodes", "-n", help="Episodes per (method, delay)."),
    delays: str = typer.Option("0.10,0.15,0.20,0.25,0.30", "--delays", help="Average delays [s], comma-separated (exponential delays of that mean)."),
    scheduler: list[Path] = typer.Option([], "--scheduler", help="An exported scheduler file to compare too (repeatable)."),
    methods: str = typer.Option("C1,C2,C3,C4,uniform", "--methods", help="Built-in switches to compare with 'none'."),
    agent: str = typer.Option("shipped", "--agent", help="shipped (the trained DDPG agent), idm or [ALGO:]PATH of a Stable-Baselines3 model."),
    vehicles: Optional[int] = typer.Option(None, "--vehicles", help="Other vehicles (default: the config's, 50)."),
    seed: int = typer.Option(0, "--seed", help="Root seed (the same for every method: paired episodes)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Runtime config file (JSON or YAML)."),
    ttc_score: Optional[float] = typer.Option(None, "--ttc-score", help="PR TTC score [s] (default: the no-switch P10 TTC at each delay)."),
    hw_score: Optional[float] = typer.Option(None, "--hw-score", help="PR HW score [s] (default: the no-switch P50 HW at each delay)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Local processes (default: all CPUs; 0 = in this process)."),
    ray: Optional[str] = typer.Option(None, "--ray", callback=ray_option, help="Run on Ray: 'local' or a cluster ADDRESS (ray.init address)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples of the paired differences."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Also draw table4.png (needs matplotlib)."),
    fast: bool = typer.Option(False, "--fast", help="Use the accelerated road (same dynamics as stock highway-env, 10-15x faster at 50 vehicles)."),
) -> None:
    """Table 4: no switch vs C1-C4, uniform and scheduler files under average delays, as differences to no switch."""
    from mopmc.cli.common import run_cli

    def body() -> None:
        from mopmc.runtime.experiments.table4 import Table4Spec, run_table4

        _workers(workers)
        spec = Table4Spec.from_options(
            episodes=episodes, delays=delays, methods=methods, schedulers=[str(s) for s in scheduler], agent=agent,
            vehicles=vehicles, seed=seed, config=config, ttc_score=ttc_score, hw_score=hw_score, bootstrap=bootstrap,
            simulator="fast" if fast else "stock",
        )
        result = run_table4(out, spec, workers=workers, ray_address=ray, progress=True, plot=plot)
        typer.echo(result.markdown)
        typer.echo(f"-> {', '.join(str(p) for p in result.files)}", err=True)

    run_cli(body)


@experiment_app.command("table1")
def table1(
    out: Path = typer.Option(..., "--out", help="Output folder (episodes, table1.csv/.md/.json/.png); an existing run there is resumed."),
    episodes: int = typer.Option(30, "--episodes", "-n", help="Episodes per delay."),
    delays: str = typer.Option("0,0.1,0.2,0.3,0.4,0.5,exp:0.2", "--delays", help="Delay specs, comma-separated (fixed seconds or exp:MEAN, ...)."),
    agent: str = typer.Option("shipped", "--agent", help="shipped, idm or [ALGO:]PATH of a Stable-Baselines3 model."),
    vehicles: Optional[int] = typer.Option(None, "--vehicles", help="Other vehicles (default 10, as the shipped agent was trained)."),
    seed: int = typer.Option(0, "--seed", help="Root seed (the same traffic under every delay)."),
    config: Optional[Path] = typer.Option(None, "--config", help="Runtime config file (JSON or YAML)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Local processes (default: all CPUs; 0 = in this process)."),
    ray: Optional[str] = typer.Option(None, "--ray", callback=ray_option, help="Run on Ray: 'local' or a cluster ADDRESS (ray.init address)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples of the episodes."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Also draw table1.png (needs matplotlib)."),
    fast: bool = typer.Option(False, "--fast", help="Use the accelerated road (same dynamics as stock highway-env)."),
) -> None:
    """Table 1: the agent alone under fixed and random delays (P10 TTC, P50 HW, Prob LD with 95% CIs)."""
    from mopmc.cli.common import run_cli

    def body() -> None:
        from mopmc.runtime.experiments.table1 import Table1Spec, run_table1

        _workers(workers)
        spec = Table1Spec.from_options(delays=delays, episodes=episodes, agent=agent, vehicles=vehicles, seed=seed,
                                       config=config, bootstrap=bootstrap, simulator="fast" if fast else "stock")
        result = run_table1(out, spec, workers=workers, ray_address=ray, progress=True, plot=plot)
        typer.echo(result.markdown)
        typer.echo(f"-> {', '.join(str(p) for p in result.files)}", err=True)

    run_cli(body)
