"""Table 4: "no switch" against C1-C4, uniform and exported schedulers under average delays.

For every average delay ``d`` (exponential delays of mean ``d``) and every method, ``episodes``
seeded episodes run on a resumable sweep (:mod:`mopmc.runtime.sweep`). All methods use the same
root seed, so episode ``e`` has the same traffic and the same primary delays under every method
(paired episodes). Each method is reported as its difference to "no switch" at the same delay,
with a 95% paired percentile bootstrap interval: the same resampled episode indices for the method
and for "no switch" (1000 resamples, seeded from the root seed). "no switch" itself is reported in
absolute values.

Metrics (steps pooled, as :mod:`mopmc.runtime.aggregate`): P10 TTC, PR TTC (fraction of steps with
TTC <= the TTC score), P50 HW, PR HW (headway <= the HW score), Prob LD (lane departure per step),
CTL (mean controller cost per step) and the crash rate (episodes ended early). The scores are the
no-switch P10 TTC and P50 HW at the same delay (the paper takes them from Table 1), or given.

Files in the output folder: ``table4.csv``, ``table4.md``, ``table4.json`` (with the settings and
scores) and ``table4.png``; every file is written atomically.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mopmc.errors import ConfigError
from mopmc.runtime.agents import check_agent_file, shipped_agent_path
from mopmc.runtime.config import RuntimeConfig, load_config
from mopmc.runtime.episode import EpisodeResult
from mopmc.runtime.metrics import HEADWAY_CAP, TTC_CAP
from mopmc.runtime.sweep import Setting, run_sweep, write_atomic

BASELINE = "none"
DEFAULT_DELAYS = (0.10, 0.15, 0.20, 0.25, 0.30)
METRICS = ("p10_ttc", "pr_ttc", "p50_hw", "pr_hw", "prob_ld", "ctl", "crash_rate")
LABELS = {"p10_ttc": "P10 TTC", "pr_ttc": "PR TTC", "p50_hw": "P50 HW", "pr_hw": "PR HW", "prob_ld": "Prob LD",
          "ctl": "CTL", "crash_rate": "crash rate"}


@dataclass(frozen=True)
class Table4Spec:
    """What to compare: methods (switch names), scheduler files, delays, episodes, scene, seed."""

    episodes: int = 20
    delays: tuple[float, ...] = DEFAULT_DELAYS
    methods: tuple[str, ...] = ("C1", "C2", "C3", "C4", "uniform")
    schedulers: tuple[str, ...] = ()
    agent: str = "shipped"
    seed: int = 0
    config: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
    ttc_score: float | None = None
    hw_score: float | None = None
    bootstrap: int = 1000
    simulator: str = "stock"

    @classmethod
    def from_options(cls, *, episodes: int, delays: str, methods: str, schedulers: Sequence[str], agent: str,
                     vehicles: int | None, seed: int, config: str | Path | None, ttc_score: float | None,
                     hw_score: float | None, bootstrap: int, simulator: str = "stock") -> "Table4Spec":
        """Parse the CLI's options (comma lists) and check them."""
        cfg = load_config(config) if config is not None else RuntimeConfig()
        if vehicles is not None:
            if vehicles < 0:
                raise ConfigError(f"--vehicles must be >= 0, got {vehicles}")
            cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, vehicles=vehicles))
        from mopmc.cli.common import comma_list  # (the options' one list parser)

        try:
            ds = tuple(float(x) for x in comma_list(delays, "--delays", "delay", "0.10,0.20"))
        except ValueError:
            raise ConfigError(f"--delays {delays!r}: expected comma-separated seconds, e.g. 0.10,0.20") from None
        ms = comma_list(methods, "--methods", "method", "C1,uniform", allow_none=bool(schedulers))
        spec = cls(episodes, ds, ms, tuple(schedulers), agent, seed, cfg, ttc_score, hw_score, bootstrap, simulator)
        spec.check()
        return spec

    def check(self) -> None:
        if self.episodes < 2:
            raise ConfigError(f"--episodes must be >= 2 (bootstrap intervals), got {self.episodes}")
        if not self.delays or any(not (0 < d < math.inf) for d in self.delays):
            raise ConfigError(f"--delays: need positive average delays, got {list(self.delays)}")
        from mopmc.runtime.delay import ExponentialDelay, check_delay_scale

        for d in self.delays:
            check_delay_scale(ExponentialDelay(d, None, f"exp:{d!r}"), self.config.env.duration, "--delays")
        for option, score in (("--ttc-score", self.ttc_score), ("--hw-score", self.hw_score)):
            if score is not None and not 0 <= score < math.inf:
                raise ConfigError(f"{option} {score}: expected a finite number of seconds >= 0")
        if self.bootstrap < 0:
            raise ConfigError(f"--bootstrap must be >= 0, got {self.bootstrap}")
        check_agent_file(self.agent)
        known = {c.name for c in self.config.switch.configurations} | {"uniform"}
        for m in self.methods:
            if m not in known:
                raise ConfigError(f"--methods: unknown switch {m!r}; known: {', '.join(sorted(known))}")
        from mopmc.runtime.agents import env_for_agent
        from mopmc.runtime.policy import check_episode_length, parse_switch

        env = env_for_agent(self.config.env, self.agent)
        for path in self.schedulers:
            if not Path(path).is_file():
                raise ConfigError(f"--scheduler {path}: file not found")
            policy = parse_switch(path, self.config.switch.configurations)  # validates the file now, not mid-sweep
            check_episode_length(policy, env, self.agent, self.config.env.policy_frequency)
        if self.seed < 0:
            raise ConfigError(f"--seed must be >= 0, got {self.seed}")

    def method_switches(self) -> list[tuple[str, str]]:
        """(label, switch argument) in table order, "none" first."""
        out = [(BASELINE, "none")] + [(m, m) for m in self.methods]
        for path in self.schedulers:
            out.append(("sched-" + re.sub(r"[^A-Za-z0-9._-]", "_", Path(path).stem), path))
        labels = [label for label, _ in out]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"method labels clash: {labels}; rename the scheduler files")
        return out

    def settings(self) -> list[Setting]:
        # The shipped agent by path, so that the sweep's manifest records its sha256.
        agent = str(shipped_agent_path()) if self.agent == "shipped" else self.agent
        return [Setting(f"{label}@d{d:.3f}", delay=f"exp:{d!r}", switch=switch, agent=agent, seed=self.seed,
                        config=self.config, simulator=self.simulator)
                for d in self.delays for label, switch in self.method_switches()]


class Cell(NamedTuple):
    value: float
    low: float | None
    high: float | None


class Row(NamedTuple):
    method: str
    delay: float
    kind: str  # "absolute" (no switch) or "difference" (to no switch)
    cells: dict[str, Cell]
    ttc_score: float
    hw_score: float


class Table4Result(NamedTuple):
    rows: tuple[Row, ...]
    markdown: str
    files: tuple[Path, ...]


class _Episodes(NamedTuple):
    ttc: list[np.ndarray]
    hw: list[np.ndarray]
    ld: list[np.ndarray]
    cost: list[np.ndarray]
    crashed: np.ndarray


def _columns(episodes: Sequence[EpisodeResult]) -> _Episodes:
    return _Episodes(
        [np.minimum([r.ttc for r in e.records], TTC_CAP) for e in episodes],
        [np.minimum([r.headway for r in e.records], HEADWAY_CAP) for e in episodes],
        [np.array([r.lane_departure for r in e.records], dtype=float) for e in episodes],
        [np.array([r.cost for r in e.records], dtype=float) for e in episodes],
        np.array([e.terminated for e in episodes], dtype=float),
    )


def _stats(ep: _Episodes, idx: np.ndarray, ttc_score: float, hw_score: float) -> np.ndarray:
    ttc = np.concatenate([ep.ttc[i] for i in idx])
    hw = np.concatenate([ep.hw[i] for i in idx])
    ld = np.concatenate([ep.ld[i] for i in idx])
    cost = np.concatenate([ep.cost[i] for i in idx])
    return np.array([np.percentile(ttc, 10), np.mean(ttc <= ttc_score), np.percentile(hw, 50), np.mean(hw <= hw_score),
                     np.mean(ld), np.mean(cost), np.mean(ep.crashed[idx])])


def compare(by_method: dict[str, Sequence[EpisodeResult]], delay: float, *, rng: np.random.Generator,
            resamples: int = 1000, ttc_score: float | None = None, hw_score: float | None = None) -> list[Row]:
    """Rows of one delay: "no switch" absolute, every other method as paired differences to it."""
    cols = {m: _columns(eps) for m, eps in by_method.items()}
    base = cols[BASELINE]
    n = len(base.ttc)
    if any(len(c.ttc) != n for c in cols.values()):
        raise ConfigError("every method needs the same episodes for paired differences")
    everything = np.arange(n)
    ttc_s = float(np.percentile(np.concatenate(base.ttc), 10)) if ttc_score is None else float(ttc_score)
    hw_s = float(np.percentile(np.concatenate(base.hw), 50)) if hw_score is None else float(hw_score)
    draws = rng.integers(n, size=(resamples, n))
    base_point = _stats(base, everything, ttc_s, hw_s)
    base_boot = np.array([_stats(base, d, ttc_s, hw_s) for d in draws]).reshape(resamples, len(METRICS))
    rows = []
    for method, c in cols.items():
        if method == BASELINE:
            point, boot, kind = base_point, base_boot, "absolute"
        else:
            point = _stats(c, everything, ttc_s, hw_s) - base_point
            boot = np.array([_stats(c, d, ttc_s, hw_s) for d in draws]).reshape(resamples, len(METRICS)) - base_boot
            kind = "difference"
        lo, hi = (np.quantile(boot, [0.025, 0.975], axis=0) if resamples > 0 else (None, None))
        cells = {m: Cell(float(point[i]), None if lo is None else float(lo[i]), None if hi is None else float(hi[i]))
                 for i, m in enumerate(METRICS)}
        rows.append(Row(method, delay, kind, cells, ttc_s, hw_s))
    return rows


def _fmt(c: Cell, signed: bool) -> str:
    v = f"{c.value:+.4f}" if signed else f"{c.value:.4f}"
    return v if c.low is None else f"{v} [{c.low:.4f}, {c.high:.4f}]"


def render_markdown(rows: Sequence[Row], spec: Table4Spec) -> str:
    head = ["Config.", "Avg delay", "P10 TTC", "PR TTC (score)", "P50 HW", "PR HW (score)", "Prob LD", "CTL", "crash rate"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        signed = r.kind == "difference"
        cells = [_fmt(r.cells[m], signed) for m in METRICS]
        cells[1] += f" ({r.ttc_score:.4f})"
        cells[3] += f" ({r.hw_score:.4f})"
        lines.append(f"| {r.method} | {r.delay:.2f} | " + " | ".join(cells) + " |")
    note = (f"\n\n{spec.episodes} paired episodes per cell (seed {spec.seed}, agent {spec.agent}, "
            f"{spec.config.env.vehicles} vehicles); methods as differences to \"none\" with 95% paired bootstrap "
            f"intervals ({spec.bootstrap} resamples); \"none\" in absolute values.")
    return "\n".join(lines) + note + "\n"


def render_csv(rows: Sequence[Row]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["method", "avg_delay", "kind", "ttc_score", "hw_score"] + [f"{m}{s}" for m in METRICS for s in ("", "_low", "_high")])
    for r in rows:
        w.writerow([r.method, f"{r.delay:g}", r.kind, repr(r.ttc_score), repr(r.hw_score)]
                   + ["" if v is None else repr(v) for m in METRICS for v in r.cells[m]])
    return buf.getvalue()


def plot_table4(rows: Sequence[Row], path: Path) -> Path:
    """Differences to "no switch" against the average delay, one panel per metric (matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError('plots need matplotlib: pip install "mopmc[plot]" (or pass --no-plot)') from None
    fig, axes = plt.subplots(1, len(METRICS), figsize=(3.2 * len(METRICS), 3.2), constrained_layout=True)
    methods = [m for m in dict.fromkeys(r.method for r in rows) if m != BASELINE]
    for ax, metric in zip(axes, METRICS):
        for method in methods:
            rs = [r for r in rows if r.method == method]
            x = [r.delay for r in rs]
            y = np.array([r.cells[metric].value for r in rs])
            lo = np.array([r.cells[metric].low if r.cells[metric].low is not None else r.cells[metric].value for r in rs])
            hi = np.array([r.cells[metric].high if r.cells[metric].high is not None else r.cells[metric].value for r in rs])
            ax.errorbar(x, y, yerr=[y - lo, hi - y], marker="o", capsize=2, label=method)
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_title(f"{LABELS[metric]} - none")
        ax.set_xlabel("average delay [s]")
    axes[0].legend(fontsize="small")
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


def run_table4(out: str | Path, spec: Table4Spec, *, workers: int | None = None, ray_address: str | None = None,
               progress: bool = False, plot: bool = True) -> Table4Result:
    """Run (or resume) the sweep of ``spec`` in ``out`` and write the table files."""
    spec.check()
    out = Path(out)
    settings = spec.settings()
    sweep = run_sweep(out, settings, spec.episodes, workers=workers, ray_address=ray_address, progress=progress)
    labels = [label for label, _ in spec.method_switches()]
    rows: list[Row] = []
    for i, d in enumerate(spec.delays):
        by_method = {label: sweep.episodes[f"{label}@d{d:.3f}"] for label in labels}
        rng = np.random.default_rng(np.random.SeedSequence(entropy=spec.seed, spawn_key=(2**32 + 4, i)))
        rows += compare(by_method, d, rng=rng, resamples=spec.bootstrap, ttc_score=spec.ttc_score, hw_score=spec.hw_score)
    markdown = render_markdown(rows, spec)
    files = [out / "table4.csv", out / "table4.md", out / "table4.json"]
    write_atomic(files[0], render_csv(rows))
    write_atomic(files[1], markdown)
    doc = {"format": "mopmc-table4/1", "settings": [s.describe() for s in settings], "episodes": spec.episodes,
           "rows": [{"method": r.method, "avg_delay": r.delay, "kind": r.kind, "ttc_score": r.ttc_score, "hw_score": r.hw_score,
                     **{m: list(r.cells[m]) for m in METRICS}} for r in rows]}
    write_atomic(files[2], json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n")
    if plot:
        files.append(plot_table4(rows, out / "table4.png"))
    else:  # a plot of an earlier run would sit beside these tables as if it showed them
        (out / "table4.png").unlink(missing_ok=True)
    return Table4Result(tuple(rows), markdown, tuple(files))
