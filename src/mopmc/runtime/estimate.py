"""Estimate the switch model's probabilities from runtime logs: the design layer's parameter file.

Per configuration (in the runtime configuration's order, so index ``i`` is ``conf = i`` of the
model) and per active controller, with the model's own semantics (``docs/parameter-file.md``):

- ``enter``: over the *rounds that start in CHOOSE* with this configuration (the first step of an
  episode, or a step after a primary step or after an exit), the fraction handed to the secondary
  (the model's branch ``z >= t`` at ``sc``);
- ``exit``: over the secondary steps with this configuration, the fraction whose exit condition
  phi held (the model's ``exit_ok`` at ``ss3``, checked after every secondary call whatever ``cc``);
- metric outcomes, separately for the primary's and the secondary's steps with this configuration:
  ``hw`` headway <= the HW score, ``ttc`` TTC <= the TTC score, ``ld`` lane departure.

Each proportion comes with a confidence interval (Clopper-Pearson by default, or Wilson); the
counts, intervals, method and the logs' sha256 go into ``provenance.estimates``. The scores are
given, or computed from a named reference run (P10 of TTC, P50 of headway, capped as in
:mod:`mopmc.runtime.aggregate`) and recorded with that run's provenance.

The intervals treat the steps as independent trials given (configuration, controller): exact for
data from the switch model itself, an approximation for the simulator, whose steps within an
episode are dependent.

Logs: CSV files of ``mopmc rt simulate --log``, sweep folders (``OUT`` or ``OUT/episodes/SETTING``
of :mod:`mopmc.runtime.sweep`), or single episode files.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mopmc.errors import ConfigError
from mopmc.runtime.episode import EpisodeResult, StepRecord
from mopmc.runtime.metrics import HEADWAY_CAP, TTC_CAP
from mopmc.runtime.switch import Configuration

PARAMETER_FORMAT = "mopmc-switch-parameters/1"
METHODS = ("clopper-pearson", "wilson")


class Proportion(NamedTuple):
    """successes / trials with a confidence interval [low, high]."""

    value: float
    low: float
    high: float
    successes: int
    trials: int


def wilson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson (exact binomial) interval; coverage at least ``level``."""
    from scipy.stats import beta

    alpha = 1 - level
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    return low, high


def proportion(successes: int, trials: int, method: str = "clopper-pearson", level: float = 0.95) -> Proportion:
    if method not in METHODS:
        raise ConfigError(f"unknown interval method {method!r}; use {' or '.join(METHODS)}")
    low, high = (clopper_pearson if method == "clopper-pearson" else wilson)(successes, trials, level)
    return Proportion(successes / trials, low, high, successes, trials)


# --- reading logs --------------------------------------------------------------------------------
class EpisodeLength(NamedTuple):
    """What a log records about its episodes' length (decision steps).

    ``exact``: the length the run was set up with (a sweep's manifest: ``env.duration x
    env.policy_frequency`` of the setting, the frequency being the agent's own), or the step count of an
    episode that ran to the end; otherwise the longest episode of a CSV log, which does not record
    whether its episodes ended early (a crash), so the run may have been longer.
    """

    steps: int
    exact: bool
    where: str


class LogSet(NamedTuple):
    """Episodes read from log files, with the files' provenance."""

    episodes: tuple[EpisodeResult, ...]
    sources: tuple[dict[str, Any], ...]
    lengths: tuple[EpisodeLength, ...] = ()


def _opt(text: str, cast: Any) -> Any:
    return None if text == "" else cast(text)


def _bool(text: str) -> bool:
    if text not in ("True", "False", "1", "0", "true", "false"):
        raise ValueError(f"not a boolean: {text!r}")
    return text in ("True", "1", "true")


def _check_record(rec: StepRecord, controllers: Collection[str] | None) -> str | None:
    """What is wrong with a step record the runtime cannot have written (``column: why``), or None."""
    for f in ("time", "delay", "hold", "ttc", "headway", "cc"):
        v = getattr(rec, f)
        if v is not None and not v >= 0:  # (NaN too)
            return f"{f}: expected a number >= 0, got {v!r}"
    if controllers is not None and rec.controller != "primary" and rec.controller not in controllers:
        return (f"controller: unknown controller {rec.controller!r} (known: primary, "
                f"{', '.join(sorted(controllers))}; the runtime config's)")
    expected = 1 if rec.controller == "primary" else 2  # the model's ctrl_cost: 1 primary, 2 secondary
    if rec.cost != expected:
        return f"cost: expected {expected} for a {'primary' if expected == 1 else 'secondary'} step, got {rec.cost}"
    return None


def _read_csv(path: Path, controllers: Collection[str] | None = None) -> list[EpisodeResult]:
    casts = (int, int, float, float, float, str, str, int, _bool, _bool, _bool, float, float, _bool, int)
    optional = {"configuration", "cc", "exit_condition", "exit_allowed", "exited"}
    by_episode: dict[int, list[StepRecord]] = {}
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not a text file"
        raise ConfigError(f"{path}: cannot read the step log ({why})") from None
    with io.StringIO(text, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(header) != StepRecord._fields:
            raise ConfigError(f"{path}:1: not a runtime step log (expected the header {','.join(StepRecord._fields)})")
        for line, row in enumerate(reader, start=2):
            try:
                values = [_opt(v, c) if f in optional else c(v) for f, v, c in zip(StepRecord._fields, row, casts, strict=True)]
            except ValueError as exc:
                raise ConfigError(f"{path}:{line}: bad step record ({exc})") from None
            rec = StepRecord(*values)
            bad = [f for f in ("time", "delay", "hold", "ttc", "headway") if math.isnan(getattr(rec, f))]
            if bad:
                raise ConfigError(f"{path}:{line}: bad step record ({bad[0]} is nan)")
            why = _check_record(rec, controllers)
            if why is not None:
                raise ConfigError(f"{path}:{line}: bad step record ({why})")
            by_episode.setdefault(rec.episode, []).append(rec)
    return [EpisodeResult(e, tuple(sorted(r, key=lambda x: x.step)), False) for e, r in sorted(by_episode.items())]


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "episodes").is_dir():
        path = path / "episodes"
    files = sorted(path.glob("*.json")) + sorted(path.glob("*/*.json"))
    manifests = [f for f in files if f.name == "sweep.json"]  # a sweep's manifest, not one of its episodes
    files = [f for f in files if f.name != "sweep.json"]
    if not files:
        also = f" ({manifests[0]} is a sweep manifest; the episodes are in its episodes/ folder)" if manifests else ""
        raise ConfigError(f"{path}: no step logs (CSV) or sweep episode files (*.json) there{also}")
    return files


def _manifest_settings(manifest: Path, cache: dict[Path, dict[str, Any] | None]) -> dict[str, Any] | None:
    """``{setting name: description}`` of a sweep manifest, or None when there is none (or unreadable)."""
    if manifest not in cache:
        try:
            doc = json.loads(manifest.read_text())
            cache[manifest] = {d["name"]: d for d in doc["settings"]}
        except (OSError, ValueError, KeyError, TypeError):
            cache[manifest] = None
    return cache[manifest]


def _recorded_length(setting: dict[str, Any] | None) -> tuple[int, float, float] | None:
    """(steps, duration, frequency) a sweep setting ran with, from its manifest description."""
    try:
        env = setting["config"]["env"]  # type: ignore[index]
        duration, frequency = float(env["duration"]), float(env["policy_frequency"])
    except (KeyError, TypeError, ValueError):
        return None
    return int(round(duration * frequency)), duration, frequency


def _episode_file_length(f: Path, episode: EpisodeResult, cache: dict[Path, Any]) -> EpisodeLength | None:
    # OUT/episodes/<setting>/<episode>.json: the setting's description is in OUT/sweep.json
    settings = _manifest_settings(f.parent.parent.parent / "sweep.json", cache) if f.parent.parent.name == "episodes" else None
    recorded = _recorded_length(settings.get(f.parent.name)) if settings else None
    if recorded is not None:
        steps, duration, frequency = recorded
        return EpisodeLength(steps, True, f"{f.parent} ({duration:g} s at {frequency:g} Hz)")
    if not episode.terminated:
        return EpisodeLength(len(episode.records), True, f"{f} (an episode that ran to the end)")
    return EpisodeLength(len(episode.records), False, f"{f} (ended early)")


def load_logs(paths: Iterable[str | Path], controllers: Collection[str] | None = None) -> LogSet:
    """Read CSV step logs and sweep episode files (folders are searched for ``*.json`` episodes);
    ``controllers``: the secondary controllers' names a CSV log may use (None: any)."""
    from mopmc.runtime.sweep import read_episode

    episodes: list[EpisodeResult] = []
    sources = []
    lengths: dict[tuple[int, bool, str], EpisodeLength] = {}
    cache: dict[Path, Any] = {}
    seen: dict[Path, Path] = {}  # each file once: its resolved path -> the argument that brought it
    contents: dict[str, Path] = {}  # and each content once (a copied sweep would count its episodes twice)
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ConfigError(f"{path}: log not found")
        digest = hashlib.sha256()
        found = []
        for f in _files(path):
            where = f.resolve()
            if where in seen:
                given = "given twice" if seen[where].resolve() == path.resolve() else f"also in {seen[where]}"
                raise ConfigError(f"{f}: this log is {given}; give each log once (its episodes would count twice)")
            seen[where] = path
            data = f.read_bytes()
            digest.update(data)
            same = contents.setdefault(hashlib.sha256(data).hexdigest(), f)
            if same != f:
                raise ConfigError(f"{f}: the same content as {same}, a copy of the same episodes; give each log once "
                                  "(its episodes would count twice)")
            if f.suffix == ".csv":
                read = _read_csv(f, controllers)
                if read:
                    longest = max(len(e.records) for e in read)
                    lengths.setdefault((longest, False, str(f)), EpisodeLength(longest, False, f"{f} (its longest episode)"))
            else:
                read = [read_episode(f)]
                length = _episode_file_length(f, read[0], cache)
                if length is not None:
                    lengths.setdefault(tuple(length), length)  # type: ignore[arg-type]
            found += read
        episodes += found
        sources.append({"path": str(path), "sha256": digest.hexdigest(), "episodes": len(found),
                        "steps": sum(len(e.records) for e in found)})
    return LogSet(tuple(episodes), tuple(sources), tuple(lengths.values()))


def episode_length(logs: LogSet) -> EpisodeLength:
    """The decision steps per episode the logs were recorded with: the model's ``n``.

    Sweeps record it (their settings' duration x the policy frequency they ran at, a trained agent's
    own), episode files of episodes that ran to the end have it, and a CSV log's longest episode is at
    most it. Logs of different lengths, or no exact record that a longer CSV episode contradicts, are
    refused in one line (give ``--n``).
    """
    exact = sorted({e.steps for e in logs.lengths if e.exact})
    if len(exact) > 1:
        by = {s: next(e.where for e in logs.lengths if e.exact and e.steps == s) for s in exact}
        shown = "; ".join(f"{s} steps: {w}" for s, w in by.items())
        raise ConfigError(f"the logs record episodes of different lengths ({shown}); estimate from runs of one "
                          "episode length, or give --n")
    bound = [e for e in logs.lengths if not e.exact]
    if exact:
        longer = [e for e in bound if e.steps > exact[0]]
        if longer:
            raise ConfigError(f"{longer[0].where} has {longer[0].steps} steps, more than the {exact[0]} the other "
                              "logs record; estimate from runs of one episode length, or give --n")
        return next(e for e in logs.lengths if e.exact)
    if not bound:
        raise ConfigError("the logs have no episodes to tell the episode length n from; give --n")
    return max(bound, key=lambda e: e.steps)


def length_notes(logs: LogSet, n: int) -> list[str]:
    """Notes on CSV logs whose longest episode is shorter than ``n``: a CSV does not record its
    episode length, and one recorded with a shorter episode does not fit the model (unless every
    episode of it crashed early, which a note cannot tell)."""
    return [f"{e.where.removesuffix(' (its longest episode)')}: its longest episode has {e.steps} steps, fewer than "
            f"n = {n}; if it was recorded with shorter episodes, leave it out (episodes that crash end early)"
            for e in logs.lengths if not e.exact and e.steps < n]


def switched_note(reference: LogSet, name: str) -> str | None:
    """A note when the reference run switched to fallback controllers: the scores are meant to be
    the agent's own at that delay (a no-switch run, such as a sweep's ``none@d...`` setting)."""
    steps = [r for e in reference.episodes for r in e.records]
    switched = [r for r in steps if r.configuration is not None]
    if not switched:
        return None
    confs = ", ".join(sorted({str(r.configuration) for r in switched}))
    return (f"reference run {name} switches ({confs} at {len(switched)} of {len(steps)} steps); the scores are "
            "meant to come from the agent alone (a no-switch run such as a sweep's none@d... setting)")


def reference_hint(paths: Iterable[str | Path], limit: int = 6) -> str:
    """``; runs in t4: t4/episodes/none@d0.100, ...``: the sweep settings under ``paths`` that can be a
    reference run, the no-switch ones first (empty when the logs hold no sweep settings)."""
    folders: list[Path] = []
    for raw in paths:
        path = Path(raw)
        root = path / "episodes" if (path / "episodes").is_dir() else path
        if root.is_dir():
            folders += sorted(d for d in root.iterdir() if d.is_dir() and any(d.glob("*.json")))
    if not folders:
        return ""
    baseline = [d for d in folders if d.name.startswith("none@")]
    shown = baseline if baseline else folders[:limit]
    text = ", ".join(str(d) for d in shown[:limit])
    rest = len(folders) - min(len(shown), limit)
    what = "the no-switch runs" if baseline else "runs"
    return f"; {what} in the logs: {text}" + (f" (and {rest} other setting(s))" if rest else "")


# --- scores --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Score:
    """A metric score with where it came from."""

    value: float
    statistic: str
    provenance: dict[str, Any]


def reference_scores(reference: LogSet, name: str) -> tuple[Score, Score]:
    """P10 TTC and P50 HW (capped, linear percentiles over all steps) of a reference run."""
    records = [r for e in reference.episodes for r in e.records]
    if not records:
        raise ConfigError(f"reference run {name}: no steps")
    ttc = np.minimum([r.ttc for r in records], TTC_CAP)
    hw = np.minimum([r.headway for r in records], HEADWAY_CAP)
    prov = {"run": name, "logs": list(reference.sources), "episodes": len(reference.episodes), "steps": len(records)}
    return (Score(float(np.percentile(ttc, 10, method="linear")), "P10", prov),
            Score(float(np.percentile(hw, 50, method="linear")), "P50", prov))


# --- estimation ----------------------------------------------------------------------------------
class Counts(NamedTuple):
    rounds: int
    entered: int
    secondary_checks: int
    exit_ok: int
    metrics: dict[tuple[str, str], tuple[int, int]]  # (metric, role) -> (bad, steps)


def count(episodes: Sequence[EpisodeResult], configuration: str, ttc_score: float, hw_score: float) -> Counts:
    """Counts of the model's events for one configuration (see the module docstring)."""
    rounds = entered = checks = ok = 0
    metrics = {(m, r): [0, 0] for m in ("hw", "ttc", "ld") for r in ("primary", "secondary")}
    for ep in episodes:
        previous: StepRecord | None = None
        for rec in ep.records:
            if rec.configuration == configuration:
                starts_round = previous is None or previous.controller == "primary" or bool(previous.exited)
                secondary = rec.controller != "primary"
                if starts_round:
                    rounds += 1
                    entered += secondary
                if secondary:
                    if rec.exit_condition is None:
                        raise ConfigError(f"episode {ep.episode} step {rec.step}: secondary step without an exit check")
                    checks += 1
                    ok += bool(rec.exit_condition)
                role = "secondary" if secondary else "primary"
                for m, bad in (("hw", rec.headway <= hw_score), ("ttc", rec.ttc <= ttc_score), ("ld", bool(rec.lane_departure))):
                    metrics[(m, role)][0] += bool(bad)
                    metrics[(m, role)][1] += 1
            previous = rec
    return Counts(rounds, entered, checks, ok, {k: (v[0], v[1]) for k, v in metrics.items()})


def _describe(p: Proportion) -> dict[str, Any]:
    return {"value": p.value, "ci": [p.low, p.high], "successes": p.successes, "trials": p.trials}


def estimate_parameters(
    logs: LogSet,
    configurations: Sequence[Configuration],
    *,
    n: int,
    k: int,
    ttc: Score,
    hw: Score,
    method: str = "clopper-pearson",
    level: float = 0.95,
    n_from: str | None = None,
) -> dict[str, Any]:
    """The parameter file (as a dict ready for YAML) estimated from ``logs``.

    ``n_from`` (where ``n`` came from, e.g. :func:`episode_length`'s ``where``) is recorded as
    ``provenance.n``.

    ``configurations`` fixes names, thresholds, controllers and order; those absent from the logs
    are left out. Raises :class:`ConfigError` when a configuration has no round, secondary step or
    step of a controller to estimate from, or the logs use a configuration not listed.
    """
    if not 0 < level < 1:
        raise ConfigError(f"confidence level must lie in (0, 1), got {level}")
    known = {c.name for c in configurations}
    used = {r.configuration for e in logs.episodes for r in e.records if r.configuration is not None}
    unknown = sorted(used - known)
    if unknown:
        raise ConfigError(f"logs use configuration(s) {', '.join(unknown)} not in the runtime config ({', '.join(sorted(known))})")
    if not used:
        raise ConfigError("the logs have no switch steps (only --switch none runs); estimate from runs with a switch")
    confs, estimates = [], {}
    for c in (c for c in configurations if c.name in used):
        counts = count(logs.episodes, c.name, ttc.value, hw.value)
        if counts.secondary_checks == 0:
            raise ConfigError(f"configuration {c.name}: no secondary steps in the logs; run more episodes or longer delays")
        try:
            controller = int(c.controller)
        except ValueError:
            raise ConfigError(f"configuration {c.name}: controller {c.controller!r} is not a number (the model numbers controllers)") from None
        name = f"t{c.threshold:g}-ctrl{controller}"
        enter = proportion(counts.entered, counts.rounds, method, level)
        exit_ = proportion(counts.exit_ok, counts.secondary_checks, method, level)
        metric_values, metric_estimates = {}, {}
        for m in ("hw", "ttc", "ld"):
            per_role = {}
            for role in ("primary", "secondary"):
                bad, steps = counts.metrics[(m, role)]
                if steps == 0:
                    raise ConfigError(f"configuration {c.name}: no {role} steps in the logs to estimate {m} from")
                per_role[role] = proportion(bad, steps, method, level)
            metric_values[m] = {role: p.value for role, p in per_role.items()}
            metric_estimates[m] = {role: _describe(p) for role, p in per_role.items()}
        confs.append({"name": name, "t": c.threshold, "controller": controller, "paper_label": f"runtime {c.name}",
                      "enter": enter.value, "exit": exit_.value, "metrics": metric_values})
        estimates[name] = {"runtime_name": c.name, "enter": _describe(enter), "exit": _describe(exit_), "metrics": metric_estimates}
    steps = sum(len(e.records) for e in logs.episodes)
    return {
        "format": PARAMETER_FORMAT,
        "n": int(n),
        "k": int(k),
        "costs": {"primary": 1, "secondary": 2},
        "metrics": {
            "hw": {"reward": "headway_cost", "meaning": "headway <= the score (PR_HW of the score)",
                   "statistic": hw.statistic, "score": hw.value, "unit": "s", "provenance": hw.provenance},
            "ttc": {"reward": "ttc_cost", "meaning": "time to collision <= the score (PR_TTC of the score)",
                    "statistic": ttc.statistic, "score": ttc.value, "unit": "s", "provenance": ttc.provenance},
            "ld": {"reward": "lane_dep_cost", "meaning": "lane departure (Prob_LD)"},
        },
        "configurations": confs,
        "provenance": {"source": "mopmc rt estimate", "logs": list(logs.sources),
                       **({"n": {"value": int(n), "from": n_from}} if n_from is not None else {}),
                       "episodes": len(logs.episodes), "steps": steps, "interval": {"method": method, "level": level},
                       "estimates": estimates},
    }


def write_parameters(doc: dict[str, Any], out: str | Path) -> Path:
    """Write the parameter file as YAML, atomically; the design layer's loader checks it."""
    import yaml

    from mopmc.design.params import parse_parameters
    from mopmc.runtime.sweep import write_atomic

    clean = json.loads(json.dumps(doc, allow_nan=False))  # plain types only; no NaN reaches the file
    parse_parameters(clean, str(out))
    path = Path(out)
    try:
        write_atomic(path, "# Estimated by mopmc rt estimate; see docs/parameter-file.md\n" + yaml.safe_dump(clean, sort_keys=False))
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot write the parameter file ({exc.strerror})") from None
    return path
