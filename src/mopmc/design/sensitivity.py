"""Sensitivity of a query to the switch's estimated probabilities (paper Sec. 6.3.5, Figure 9).

Every probability of the parameter file (per configuration: ``enter``, ``exit`` and each metric's
probability, one per controller where the two differ) is a *knob*. At each perturbation level
``d`` (default 0.015, 0.03, ..., 0.15: +-1.5% ... +-15%) each knob in turn is multiplied by
``1 + d`` and by ``1 - d`` (clipped to [0, 1]; its complement is the other outcome), the switch is
built again and the convex query re-run: ``2 x knobs`` results per level, summarised per objective
(the box plots of Figure 9, with the unperturbed baseline beside).

Long runs never lose work: each result is written atomically to ``OUT/runs/<id>.json`` as it
finishes, and a restarted run does only what is missing. ``OUT/spec.json`` records what was asked;
asking something else in the same folder is an error naming the keys.

>>> knob_names(load_parameters("table3"))[:3]  # doctest: +SKIP
['t0.2-ctrl1.enter', 't0.2-ctrl1.exit', 't0.2-ctrl1.hw']
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from mopmc.design.params import MetricProbability, SwitchParameters
from mopmc.errors import ConfigError

LEVELS = tuple(round(0.015 * i, 3) for i in range(1, 11))


@dataclass(frozen=True)
class Knob:
    """One probability of the parameter file: configuration index, ``field`` (``enter``, ``exit``
    or a metric name), ``controller`` (``None``: both), and its value."""

    conf: int
    name: str
    field: str
    controller: str | None
    value: float

    @property
    def id(self) -> str:
        return f"{self.name}.{self.field}" + (f".{self.controller}" if self.controller else "")


def _enter(params: SwitchParameters, c) -> float:
    if c.enter is not None:
        return c.enter
    from mopmc.design.probability import DelayDistribution

    d = params.delay
    return 1.0 - DelayDistribution("z", d.scale, d.truncate, d.distribution).cdf(c.t)


def knobs(params: SwitchParameters) -> list[Knob]:
    """Every probability of ``params``, in file order (an ``enter`` from the delay distribution too)."""
    out = []
    for i, c in enumerate(params.configurations):
        out.append(Knob(i, c.name, "enter", None, _enter(params, c)))
        out.append(Knob(i, c.name, "exit", None, c.exit))
        for m in params.metrics:
            p = c.metrics[m.name]
            if p.primary == p.secondary:
                out.append(Knob(i, c.name, m.name, None, p.primary))
            else:
                out.extend(Knob(i, c.name, m.name, who, getattr(p, who)) for who in ("primary", "secondary"))
    return out


def knob_names(params: SwitchParameters) -> list[str]:
    return [k.id for k in knobs(params)]


def perturb(params: SwitchParameters, knob: Knob, factor: float) -> tuple[SwitchParameters, float]:
    """``params`` with ``knob`` multiplied by ``factor`` and clipped to [0, 1]; and the new value."""
    new = min(1.0, max(0.0, knob.value * factor))
    confs = list(params.configurations)
    c = confs[knob.conf]
    if knob.field == "enter":
        c = replace(c, enter=new)
    elif knob.field == "exit":
        c = replace(c, exit=new)
    else:
        p = c.metrics[knob.field]
        p = MetricProbability(new, new) if knob.controller is None else replace(p, **{knob.controller: new})
        c = replace(c, metrics={**c.metrics, knob.field: p})
    confs[knob.conf] = c
    return replace(params, configurations=tuple(confs)), new


@dataclass(frozen=True)
class Query:
    """The query re-run on every perturbed model: a ``multi(...)`` property and the convex loss."""

    prop: str
    loss: str = "mse"
    soft: bool = True
    eps_rel: float = 1e-7
    engine: str = "kernel"
    device: str | None = None


def objectives_of(params: SwitchParameters, query: Query):
    """The query's objectives on the switch of ``params`` (a small build: n = 1)."""
    from mopmc.design.build import convert_design
    from mopmc.design.spec import switch_design

    return _objectives(convert_design(switch_design(params.with_n(1))).model, query)


def _objectives(model, query: Query):
    from mopmc.io import storm
    from mopmc.properties.parse import parse_properties

    props = parse_properties(storm.parse_formulas(query.prop, None, "--prop"), model.rewards, model.labels, "--prop")
    if len(props) != 1 or not props[0].multi:
        raise ConfigError(f"--prop {query.prop!r}: give exactly one multi(...) property")
    return props[0].objectives


def solve(params: SwitchParameters, query: Query) -> dict:
    """Build the switch of ``params`` and run the convex query: a JSON-ready result."""
    from mopmc.design.build import convert_design
    from mopmc.design.spec import switch_design
    from mopmc.queries.convex import convex_query

    t0 = time.perf_counter()
    model = convert_design(switch_design(params)).model
    res = convex_query(model, _objectives(model, query), query.loss, soft=query.soft, eps_rel=query.eps_rel,
                       engine=query.engine, device=query.device)
    point = None if res.point is None else [float(v) for v in res.point]
    return {"states": model.n_states, "status": res.status, "loss": _num(res.loss), "lower_bound": _num(res.lower_bound),
            "point": point, "iterations": res.iterations, "seconds": time.perf_counter() - t0}


def _num(v) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


@dataclass(frozen=True)
class Task:
    id: str
    knob: str | None
    sign: int
    level: float


def tasks(params: SwitchParameters, levels: Sequence[float]) -> list[Task]:
    """The baseline, then per level every knob up and down."""
    out = [Task("baseline", None, 0, 0.0)]
    for d in levels:
        for k in knobs(params):
            for sign in (1, -1):
                out.append(Task(f"{k.id}{'+' if sign > 0 else '-'}{d:g}", k.id, sign, float(d)))
    return out


def run_task(params: SwitchParameters, query: Query, task: Task) -> dict:
    """One perturbed (or the baseline) query, with what was perturbed."""
    row = {"id": task.id, "knob": task.knob, "sign": task.sign, "level": task.level}
    if task.knob is not None:
        knob = next(k for k in knobs(params) if k.id == task.knob)
        params, new = perturb(params, knob, 1.0 + task.sign * task.level)
        row.update(value=knob.value, perturbed=new, clipped=new != knob.value * (1.0 + task.sign * task.level))
    return {**row, **solve(params, query)}


def _run_file(out: Path, task_id: str) -> Path:
    return out / "runs" / f"{task_id}.json"


def _params_digest(params: SwitchParameters) -> str:
    """What of the parameters makes the model (not where they came from)."""
    from dataclasses import asdict

    doc = {k: v for k, v in asdict(params).items() if k not in ("source", "provenance")}
    doc["metrics"] = [{k: v for k, v in m.items() if k != "provenance"} for m in doc["metrics"]]
    doc["knobs"] = [(k.id, k.value) for k in knobs(params)]  # an enter from the delay distribution too
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _spec(params: SwitchParameters, query: Query, levels: Sequence[float]) -> dict:
    return {"format": "mopmc-sensitivity/1", "parameters": params.source, "parameters_sha": _params_digest(params),
            "n": params.n, "k": params.k, "levels": [float(d) for d in levels], "prop": query.prop, "loss": query.loss,
            "soft": query.soft, "eps_rel": query.eps_rel}


def _check_spec(out: Path, spec: dict) -> None:
    path = out / "spec.json"
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            old = None
        if not isinstance(old, dict):
            raise ConfigError(f"{path}: not a sensitivity run's spec (JSON object); remove the folder or choose another --out")
        differ = sorted(k for k in set(old) | set(spec) if k != "parameters" and old.get(k) != spec.get(k))
        if differ:
            raise ConfigError(f"{out}: holds a sensitivity run with other {', '.join(differ)}; choose another --out")
    else:
        _write(path, json.dumps(spec, indent=1) + "\n")


_RUN_KEYS = ("id", "knob", "sign", "level", "status", "loss", "lower_bound", "point", "iterations", "seconds")


def _read_run(path: Path, task_id: str, n_objectives: int) -> dict | None:
    """A finished run's result, or ``None`` where the file is not one (damaged, foreign, another task's)."""
    try:
        row = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(row, dict) or any(k not in row for k in _RUN_KEYS) or row["id"] != task_id:
        return None
    point = row["point"]
    if point is not None and not (isinstance(point, list) and len(point) == n_objectives
                                  and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in point)):
        return None
    if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in (row["loss"], row["lower_bound"])):
        return None
    if not isinstance(row["level"], (int, float)) or not isinstance(row["seconds"], (int, float)):
        return None
    return row


def run(params: SwitchParameters, query: Query, out: str | Path, *, levels: Sequence[float] = LEVELS, workers: int = 1,
        ray_address: str | None = None, progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Every task (resuming in ``out``); returns all results, baseline first.

    ``workers`` > 1 runs the tasks in that many processes; ``ray_address`` on Ray instead (``local``
    starts a local instance with ``workers`` CPUs, else ``ray.init(address)``, as the runtime's
    sweeps). ``progress(done, total)`` after each."""
    from mopmc.runtime.sweep import run_local

    if not levels or any(not (0.0 < d < 1.0) for d in levels):
        raise ConfigError(f"--levels {','.join(map(str, levels)) or '(none)'}: give levels in (0, 1), e.g. 0.015,0.03")
    if workers < 1:
        raise ConfigError(f"--workers {workers}: must be >= 1")
    from mopmc.queries.tolerances import check_eps_rel

    check_eps_rel(query.eps_rel)  # (before anything is written)
    levels = sorted({float(d) for d in levels})
    objectives = objectives_of(params, query)  # a bad property fails here, before anything is written
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "runs").mkdir(exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot make the folder ({e.strerror}; is a part of it a file?)") from None
    _check_spec(out, _spec(params, query, levels))
    todo = tasks(params, levels)
    results: dict[str, dict] = {}
    for t in todo:
        f = _run_file(out, t.id)
        if f.is_dir():
            raise ConfigError(f"{f}: is a directory, not a run's result; remove it")
        if f.exists():
            row = _read_run(f, t.id, len(objectives))
            if row is None:  # (written atomically: only a foreign or damaged file is broken) run it again
                f.unlink()
            else:
                results[t.id] = row
    missing = [t for t in todo if t.id not in results]
    done = len(results)
    if progress:
        progress(done, len(todo))

    def finish(row: dict) -> None:
        nonlocal done
        _write(_run_file(out, row["id"]), json.dumps(row) + "\n")
        results[row["id"]] = row
        done += 1
        if progress:
            progress(done, len(todo))

    jobs = [(params, query, t) for t in missing]
    if ray_address is not None and jobs:
        from mopmc.runtime import ray_adapter

        rows = ray_adapter.run_jobs(ray_address, run_task, jobs, num_cpus=workers if workers > 1 else None)
    else:
        rows = run_local(run_task, jobs, workers if len(jobs) > 1 else 1)
    for row in rows:
        finish(row)
    return [results[t.id] for t in todo]


def summarise(results: list[dict], objectives: Sequence[str]) -> dict:
    """Per level and objective (and the loss): the spread of the perturbed results and the baseline."""
    base = results[0]
    names = [*objectives, "loss"]
    base_vals = [*(base["point"] or [math.nan] * len(objectives)), base["loss"]]
    levels = sorted({r["level"] for r in results[1:]})
    rows = []
    for d in levels:
        rs = [r for r in results[1:] if r["level"] == d]
        for j, name in enumerate(names):
            vals = np.array([(r["point"][j] if j < len(objectives) else r["loss"]) if r["point"] is not None else math.nan
                             for r in rs], float)
            b = base_vals[j]
            ok = vals[np.isfinite(vals)]
            q = np.percentile(ok, [0, 25, 50, 75, 100]) if len(ok) else [math.nan] * 5
            dev = float(np.max(np.abs(ok - b))) if len(ok) and b is not None else math.nan
            rows.append({"level": d, "objective": name, "baseline": b, "n": int(len(ok)), "failed": int(len(vals) - len(ok)),
                         "min": float(q[0]), "q1": float(q[1]), "median": float(q[2]), "q3": float(q[3]), "max": float(q[4]),
                         "max_abs_change": dev, "max_rel_change": dev / abs(b) if b else math.nan})
    return {"baseline": base, "objectives": list(names), "levels": levels, "rows": rows}


def write_summary(out: str | Path, summary: dict, results: list[dict], objectives: Sequence[str]) -> dict[str, Path]:
    """``results.csv`` (every run), ``summary.csv``/``summary.md`` (per level and objective), atomically."""
    import csv
    import io

    out = Path(out)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["id", "knob", "sign", "level", "value", "perturbed", "status", "loss", "lower_bound", *objectives, "iterations", "seconds"])
    for r in results:
        w.writerow([r["id"], r["knob"] or "", r["sign"], r["level"], r.get("value", ""), r.get("perturbed", ""), r["status"],
                    r["loss"], r["lower_bound"], *(r["point"] or [""] * len(objectives)), r["iterations"], f"{r['seconds']:.3f}"])
    _write(out / "results.csv", buf.getvalue())
    buf = io.StringIO()
    keys = ["level", "objective", "baseline", "n", "failed", "min", "q1", "median", "q3", "max", "max_abs_change", "max_rel_change"]
    w = csv.DictWriter(buf, keys)
    w.writeheader()
    w.writerows(summary["rows"])
    _write(out / "summary.csv", buf.getvalue())
    _write(out / "summary.md", markdown(summary))
    return {"results": out / "results.csv", "summary": out / "summary.csv", "markdown": out / "summary.md"}


def _write(path: Path, text: str) -> None:
    """Atomically; an OS error (a folder in the way, permissions) is a :class:`ConfigError` naming the file."""
    from mopmc.runtime.sweep import write_atomic

    try:
        write_atomic(path, text)
    except OSError as e:
        raise ConfigError(f"{path}: cannot write ({e.strerror})") from None


def markdown(summary: dict) -> str:
    names = summary["objectives"]
    lines = ["Sensitivity of the convex query to the parameter file's probabilities: each knob times 1 +- level "
             "(clipped to [0, 1]), the switch rebuilt and the query re-run. Per level and objective: median "
             "[min, max] over the runs, and the largest change from the unperturbed baseline (relative).", "",
             "| level | " + " | ".join(names) + " |", "|---|" + "---|" * len(names),
             "| baseline | " + " | ".join(f"{r['baseline']:.6g}" for r in summary["rows"][: len(names)]) + " |"]
    for d in summary["levels"]:
        rs = [r for r in summary["rows"] if r["level"] == d]
        cells = [f"{r['median']:.6g} [{r['min']:.6g}, {r['max']:.6g}] ({100 * r['max_rel_change']:.2f}%)" for r in rs]
        lines.append(f"| +-{100 * d:g}% | " + " | ".join(cells) + " |")
    failed = sum(r["failed"] for r in summary["rows"] if r["objective"] == "loss")
    if failed:
        lines += ["", f"{failed} perturbed queries found no point (infeasible or failed): left out above."]
    return "\n".join(lines) + "\n"


def plot(summary: dict, results: list[dict], path: str | Path, labels: dict[str, str] | None = None) -> Path:
    """Figure 9: one box plot per objective (and the loss), a box per level, the baseline dashed red."""
    from mopmc.queries.plot import _pyplot

    plt = _pyplot()
    names = summary["objectives"]
    levels = summary["levels"]
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.4), squeeze=False)
    for j, (ax, name) in enumerate(zip(axes[0], names)):
        data = []
        for d in levels:
            vals = [(r["point"][j] if j < len(names) - 1 else r["loss"]) for r in results[1:]
                    if r["level"] == d and r["point"] is not None]
            data.append(vals)
        ax.boxplot(data, widths=0.6, flierprops={"markersize": 3})
        ax.set_xticks(range(1, len(levels) + 1), [f"{100 * d:g}" for d in levels])
        base = summary["rows"][j]["baseline"]
        if base is not None and math.isfinite(base):
            ax.axhline(base, color="red", linestyle="--", linewidth=1, label="baseline")
        ax.set_title((labels or {}).get(name, name), fontsize=9)
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.set_xlabel("perturbation (+-%)", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    try:
        fig.savefig(path, dpi=120)
    except OSError as e:
        raise ConfigError(f"{path}: cannot write ({e.strerror})") from None
    finally:
        plt.close(fig)
    return path
