"""Table 1: the primary agent alone (no switch) under fixed and random observation-to-action delays.

For every delay spec (fixed ``0 .. 0.5`` s and random ``exp:0.2``, the paper's exponential with scale
0.2 s) ``episodes`` seeded episodes run on a resumable sweep (:mod:`mopmc.runtime.sweep`: one atomic
file per finished (delay, episode); an interrupted run resumes where it stopped). Every delay uses
the same root seed, so episode ``e`` has the same traffic under every delay. Per delay:
P10 TTC, P50 HW and Prob LD (lane departure per step) with 95% percentile-bootstrap intervals over
whole episodes (:func:`mopmc.runtime.aggregate.summarise`, seeded from the root seed), and the
collision rate (episodes ended early by a crash).

Files: ``table1.csv``, ``table1.md``, ``table1.json`` and ``table1.png`` (metrics against delay),
each written atomically.
"""

from __future__ import annotations

import dataclasses
import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mopmc.errors import ConfigError
from mopmc.runtime.agents import check_agent_file, env_for_agent, shipped_agent_path
from mopmc.runtime.aggregate import Estimate, summarise
from mopmc.runtime.config import SIMULATORS, RuntimeConfig, load_config
from mopmc.runtime.delay import FixedDelay, check_delay_scale, parse_delay_spec
from mopmc.runtime.episode import EpisodeResult
from mopmc.runtime.sweep import Setting, run_sweep, write_atomic

DEFAULT_DELAYS = ("0", "0.1", "0.2", "0.3", "0.4", "0.5", "exp:0.2")
METRICS = ("p10_ttc", "p50_hw", "prob_ld")
LABELS = {"p10_ttc": "P10 TTC [s]", "p50_hw": "P50 HW [s]", "prob_ld": "Prob LD"}


@dataclass(frozen=True)
class Table1Spec:
    """Delays (specs), episodes per delay, agent, scene and root seed."""

    delays: tuple[str, ...] = DEFAULT_DELAYS
    episodes: int = 30
    agent: str = "shipped"
    seed: int = 0
    config: RuntimeConfig = dataclasses.field(default_factory=lambda: RuntimeConfig(
        env=dataclasses.replace(RuntimeConfig().env, vehicles=10)))
    bootstrap: int = 1000
    simulator: str = "stock"

    @classmethod
    def from_options(cls, *, delays: str, episodes: int, agent: str, vehicles: int | None, seed: int,
                     config: Path | None, bootstrap: int, simulator: str = "stock") -> "Table1Spec":
        cfg = load_config(config) if config is not None else cls().config
        if vehicles is not None:
            if vehicles < 0:
                raise ConfigError(f"--vehicles must be >= 0, got {vehicles}")
            cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, vehicles=vehicles))
        from mopmc.cli.common import comma_list  # (the options' one list parser)

        specs = comma_list(delays, "--delays", "delay spec", "0,0.2,0.4,exp:0.2")
        spec = cls(specs, episodes, agent, seed, cfg, bootstrap, simulator)
        spec.check()
        return spec

    def check(self) -> None:
        if not self.delays:
            raise ConfigError("--delays: give at least one delay spec, e.g. 0,0.2,0.4,exp:0.2")
        for d in self.delays:
            check_delay_scale(parse_delay_spec(d), self.config.env.duration, "--delays")
        if len(set(self.delays)) != len(self.delays):
            raise ConfigError(f"--delays: repeated delay in {','.join(self.delays)}")
        if self.episodes < 2:
            raise ConfigError(f"--episodes must be >= 2 (confidence intervals resample episodes), got {self.episodes}")
        if self.seed < 0:
            raise ConfigError(f"--seed must be >= 0, got {self.seed}")
        if self.bootstrap < 0:
            raise ConfigError(f"--bootstrap must be >= 0, got {self.bootstrap}")
        if self.simulator not in SIMULATORS:
            raise ConfigError(f"simulator must be 'stock' or 'fast', got {self.simulator!r}")
        check_agent_file(self.agent)

    def policy_frequency(self) -> float:
        """Decisions per second of the agent (a trained agent's own; :class:`Setting` applies it)."""
        return env_for_agent(self.config.env, self.agent).policy_frequency

    def settings(self) -> list[Setting]:
        # The shipped agent by path, so that the sweep's manifest records its sha256 and a resume
        # with another agent file is refused.
        agent = str(shipped_agent_path()) if self.agent == "shipped" else self.agent
        return [Setting(setting_name(d), delay=d, switch="none", agent=agent, seed=self.seed, config=self.config,
                        simulator=self.simulator)
                for d in self.delays]


def setting_name(delay: str) -> str:
    """Folder name of a delay spec: ``0.2`` -> ``delay-0.2``, ``exp:0.2`` -> ``delay-exp-0.2``."""
    return "delay-" + delay.replace(":", "-").replace("/", "_")


class Row(NamedTuple):
    delay: str
    mean_delay: float | None
    episodes: int
    collision_rate: float
    p10_ttc: Estimate
    p50_hw: Estimate
    prob_ld: Estimate


def _mean_delay(spec: str) -> float | None:
    d = parse_delay_spec(spec)
    if hasattr(d, "seconds"):
        return float(d.seconds)
    if hasattr(d, "mean") and getattr(d, "trunc", None) is None:
        return float(d.mean)
    return None


def table_rows(spec: Table1Spec, episodes: dict[str, Sequence[EpisodeResult]]) -> list[Row]:
    rows = []
    for i, d in enumerate(spec.delays):
        eps = episodes[setting_name(d)]
        rng = np.random.default_rng(np.random.SeedSequence(entropy=spec.seed, spawn_key=(2**32 + 7, i)))
        s = summarise(eps, rng=rng, resamples=spec.bootstrap)
        rows.append(Row(d, _mean_delay(d), s.episodes, s.terminated_episodes / s.episodes,
                        s.p10_ttc, s.p50_headway, s.prob_lane_departure))
    return rows


def _fmt(e: Estimate, digits: int = 3) -> str:
    if e.value is None:
        return "n/a"
    ci = "" if e.low is None else f" [{e.low:.{digits}f}, {e.high:.{digits}f}]"
    return f"{e.value:.{digits}f}{ci}"


def render_markdown(rows: Sequence[Row], spec: Table1Spec) -> str:
    lines = [
        f"Agent `{spec.agent}` alone at {spec.policy_frequency():g} Hz, {spec.config.env.vehicles} vehicles, "
        f"{spec.episodes} episodes per delay, "
        f"seed {spec.seed}, {spec.simulator} simulator; 95% episode-bootstrap CIs ({spec.bootstrap} resamples).",
        "",
        "| delay | P10 TTC [s] | P50 HW [s] | Prob LD | collision rate |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r.delay} | {_fmt(r.p10_ttc)} | {_fmt(r.p50_hw)} | {_fmt(r.prob_ld, 4)} | {r.collision_rate:.3f} |")
    return "\n".join(lines) + "\n"


def render_csv(rows: Sequence[Row]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = ["delay", "mean_delay", "episodes", "collision_rate"]
    for m in METRICS:
        header += [m, f"{m}_low", f"{m}_high"]
    w.writerow(header)
    for r in rows:
        line: list[Any] = [r.delay, "" if r.mean_delay is None else r.mean_delay, r.episodes, r.collision_rate]
        for m in METRICS:
            e = getattr(r, m)
            line += ["" if v is None else repr(float(v)) for v in e]
        w.writerow(line)
    return buf.getvalue()


def rows_to_json(rows: Sequence[Row], spec: Table1Spec) -> dict[str, Any]:
    def est(e: Estimate) -> dict[str, Any]:
        return {"value": e.value, "ci": None if e.low is None else [e.low, e.high]}

    return {
        "settings": {"delays": list(spec.delays), "episodes": spec.episodes, "agent": spec.agent, "seed": spec.seed, "simulator": spec.simulator,
                     "vehicles": spec.config.env.vehicles, "max_substep": spec.config.env.max_substep,
                     "policy_frequency": spec.policy_frequency(),
                     "bootstrap": spec.bootstrap},
        "rows": [{"delay": r.delay, "mean_delay": r.mean_delay, "episodes": r.episodes,
                  "collision_rate": r.collision_rate, **{m: est(getattr(r, m)) for m in METRICS}} for r in rows],
    }


def plot_table1(rows: Sequence[Row], path: Path) -> Path:
    """P10 TTC, P50 HW and Prob LD against the mean delay, with CI bars (matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError('plots need matplotlib: pip install "mopmc[plot]" (or pass --no-plot)') from None
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 3.2))
    for ax, m in zip(axes, METRICS):
        for fixed, marker, label in ((True, "o-", "fixed delay"), (False, "s", "random delay")):
            pts = [(r.mean_delay, getattr(r, m)) for r in rows
                   if r.mean_delay is not None and isinstance(parse_delay_spec(r.delay), FixedDelay) == fixed
                   and getattr(r, m).value is not None]
            if not pts:
                continue
            x = [p[0] for p in pts]
            y = [p[1].value for p in pts]
            err = [[max(p[1].value - (p[1].low if p[1].low is not None else p[1].value), 0.0) for p in pts],
                   [max((p[1].high if p[1].high is not None else p[1].value) - p[1].value, 0.0) for p in pts]]
            ax.errorbar(x, y, yerr=err, fmt=marker, capsize=3, label=label)
        ax.set_xlabel("mean delay [s]")
        ax.set_title(LABELS[m])
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path


class Table1Result(NamedTuple):
    rows: tuple[Row, ...]
    markdown: str
    files: tuple[Path, ...]


def run_table1(out: str | Path, spec: Table1Spec, *, workers: int | None = None, ray_address: str | None = None,
               progress: bool = False, plot: bool = True) -> Table1Result:
    """Run (or resume) the sweep in ``out`` (local processes, or Ray at ``ray_address``) and write the table files there."""
    spec.check()
    out = Path(out)
    sweep = run_sweep(out, spec.settings(), spec.episodes, workers=workers, ray_address=ray_address, progress=progress)
    rows = table_rows(spec, sweep.episodes)
    markdown = render_markdown(rows, spec)
    files = [out / "table1.csv", out / "table1.md", out / "table1.json"]
    write_atomic(files[0], render_csv(rows))
    write_atomic(files[1], markdown)
    write_atomic(files[2], json.dumps(rows_to_json(rows, spec), indent=2, allow_nan=False) + "\n")
    if plot:
        files.append(plot_table1(rows, out / "table1.png"))
    else:  # a plot of an earlier run would sit beside these tables as if it showed them
        (out / "table1.png").unlink(missing_ok=True)
    return Table1Result(tuple(rows), markdown, tuple(files))
