"""Scheduler files (format ``mopmc-scheduler`` version 1, see docs/formats.md).

A scheduler file lists, per model state valuation, a distribution over the state's choices. The
``binding`` tells the runtime which model variables carry the switch's timestep, consecutive-call
count and configuration, which valuations are the two choice locations (``choose``: pick a
configuration; ``exit_check``: stay or exit), and which actions mean stay and exit. Loading checks
everything once, indexes the entries by the runtime's abstract state, and fails with a
:class:`~mopmc.errors.SchedulerError` that names the file, the entry and the fix.

>>> sched = load_scheduler("scheduler.json")  # doctest: +SKIP
>>> sched.configuration_distribution(component=0, timestep=0, consecutive_calls=0)  # doctest: +SKIP
((0, 0.5), (2, 0.5))
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mopmc.errors import SchedulerError
from mopmc.runtime.metrics import StepMetrics
from mopmc.runtime.switch import Configuration

FORMAT = "mopmc-scheduler"
VERSION = 1
KINDS = ("randomised", "deterministic", "mixture")
OBSERVATIONS = ("low_ttc", "low_headway", "lane_departure")
_PROB_TOL = 1e-6

Valuation = Mapping[str, int]


@dataclass(frozen=True)
class ObservationBinding:
    """A metric recorder variable: its value when the observation holds / does not hold."""

    variable: str
    true: int
    false: int
    threshold: float | None  # seconds; low_ttc / low_headway mean metric <= threshold


@dataclass(frozen=True)
class Binding:
    """How the runtime's abstract switch state maps to model variables."""

    timestep: str
    consecutive_calls: str
    configuration: str
    locations: Mapping[str, Valuation]  # "choose" and "exit_check"
    stay_action: str
    exit_action: str
    configurations: tuple[Configuration, ...]
    configuration_values: tuple[int, ...]
    configuration_actions: tuple[str | None, ...]
    observations: Mapping[str, ObservationBinding]
    min_consecutive_calls: int | None


@dataclass(frozen=True)
class SchedulerFile:
    """A loaded, validated scheduler indexed by abstract switch state.

    ``choose[c]`` maps ``(timestep, cc)`` to ``((configuration index, probability), ...)``;
    ``exit[c]`` maps ``(timestep, cc, configuration index, observation values...)`` to the
    probability of exiting, for mixture component ``c`` (one component unless ``kind == "mixture"``).
    """

    path: str
    kind: str
    objectives: tuple[str, ...]
    point: tuple[float, ...]
    binding: Binding
    weights: tuple[float, ...]
    choose: tuple[Mapping[tuple[int, ...], tuple[tuple[int, float], ...]], ...]
    exit: tuple[Mapping[tuple[int, ...], float], ...]

    def configuration_distribution(
        self, component: int, timestep: int, consecutive_calls: int
    ) -> tuple[tuple[int, float], ...]:
        key = (timestep, consecutive_calls)
        found = self.choose[component].get(key)
        if found is None:
            raise SchedulerError(self._missing("choose", key))
        return found

    def exit_probability(
        self, component: int, timestep: int, consecutive_calls: int, configuration: int,
        observations: Mapping[str, bool],
    ) -> float:
        obs = tuple(
            b.true if observations[name] else b.false
            for name, b in sorted(self.binding.observations.items())
        )
        key = (timestep, consecutive_calls, configuration, *obs)
        found = self.exit[component].get(key)
        if found is None:
            raise SchedulerError(self._missing("exit_check", key))
        return found

    @property
    def episode_steps(self) -> int | None:
        """The episode length (decision steps) the scheduler covers: ``n`` of the model it was computed on.

        A model of ``n`` steps chooses a configuration at ``tc = 0 .. n-1`` and checks exits after a
        secondary step at ``tc = 1 .. n``; the largest timestep of either kind of entry gives ``n``.
        ``None`` when the file has no entries at the switch's choice points.
        """
        last = [ts + 1 for table in self.choose for (ts, *_) in table]
        last += [ts for table in self.exit for (ts, *_) in table]
        return max(last) if last else None

    def observations(self, metrics: StepMetrics) -> dict[str, bool]:
        """The bound recorder observations of a step (low = at or below the threshold)."""
        values = {"low_ttc": metrics.ttc, "low_headway": metrics.headway}
        out: dict[str, bool] = {}
        for name, o in self.binding.observations.items():
            if name == "lane_departure":
                out[name] = metrics.lane_departure
            else:
                out[name] = values[name] <= (o.threshold if o.threshold is not None else 0.0)
        return out

    def _missing(self, location: str, key: tuple[int, ...]) -> str:
        b = self.binding
        names = [b.timestep, b.consecutive_calls]
        values: list[Any] = list(key)
        if location == "exit_check":
            names.append(b.configuration)
            values[2] = b.configuration_values[key[2]]
            names += [o.variable for _, o in sorted(b.observations.items())]
        valuation = dict(zip(names, values))
        valuation.update(b.locations[location])
        shown = ", ".join(f"{k}={v}" for k, v in valuation.items())
        return (
            f"{self.path}: no scheduler entry for the runtime state {{{shown}}} (location {location}); "
            "the scheduler must cover every state the runtime reaches (check MAX_TS and k against the run)"
        )


class _Reader:
    """Reads one JSON object with a path for messages and rejects unknown keys by name."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> SchedulerError:
        return SchedulerError(f"{self.path}: {where}: {message}")

    def obj(self, value: Any, where: str, required: set[str], optional: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {type(value).__name__}")
        unknown = sorted(set(value) - required - optional)
        if unknown:
            allowed = ", ".join(sorted(required | optional))
            raise self.fail(where, f"unknown key(s) {', '.join(unknown)}; allowed: {allowed}")
        missing = sorted(required - set(value))
        if missing:
            raise self.fail(where, f"missing key(s) {', '.join(missing)}")
        return value

    def integer(self, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(where, f"expected an integer, got {value!r}")
        return value

    def number(self, value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(where, f"expected a finite number, got {value!r}")
        return float(value)

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(where, f"expected a non-empty string, got {value!r}")
        return value

    def valuation(self, value: Any, where: str) -> dict[str, int]:
        if not isinstance(value, dict):
            raise self.fail(where, "expected an object {variable: integer value}")
        return {self.text(k, where): self.integer(v, f"{where}.{k}") for k, v in value.items()}


def _read_binding(r: _Reader, raw: Any) -> Binding:
    b = r.obj(
        raw, "binding",
        {"timestep", "consecutive_calls", "configuration", "locations", "actions", "configurations"},
        {"location", "observations", "min_consecutive_calls"},
    )
    location_var = r.text(b["location"], "binding.location") if "location" in b else None
    locs = r.obj(b["locations"], "binding.locations", {"choose", "exit_check"}, set())
    locations: dict[str, dict[str, int]] = {}
    for name, spec in locs.items():
        where = f"binding.locations.{name}"
        if isinstance(spec, int) and not isinstance(spec, bool):
            if location_var is None:
                raise r.fail(where, "an integer location needs binding.location (the location variable)")
            locations[name] = {location_var: spec}
        else:
            locations[name] = r.valuation(spec, where)
        if not locations[name]:
            raise r.fail(where, "empty valuation")
    acts = r.obj(b["actions"], "binding.actions", {"stay", "exit"}, set())
    if acts["stay"] == acts["exit"]:
        raise r.fail("binding.actions", f"stay and exit are the same action {acts['stay']!r}; give two different labels")
    confs_raw = b["configurations"]
    if not isinstance(confs_raw, list) or not confs_raw:
        raise r.fail("binding.configurations", "expected a non-empty list of {name, t, controller}")
    confs, values, actions = [], [], []
    for i, c in enumerate(confs_raw):
        where = f"binding.configurations[{i}]"
        c = r.obj(c, where, {"name", "t", "controller"}, {"value", "action"})
        t = r.number(c["t"], f"{where}.t")
        if t < 0:
            raise r.fail(f"{where}.t", f"threshold must be >= 0, got {t}")
        controller = c["controller"]
        if isinstance(controller, bool) or not isinstance(controller, (int, str)):
            raise r.fail(f"{where}.controller", f"expected a controller name or number, got {controller!r}")
        confs.append(Configuration(r.text(c["name"], f"{where}.name"), t, str(controller)))
        values.append(r.integer(c.get("value", i + 1), f"{where}.value"))
        action = c.get("action")
        actions.append(None if action is None else r.text(action, f"{where}.action"))
    if len(set(values)) != len(values):
        raise r.fail("binding.configurations", f"configuration values repeat: {values}")
    observations: dict[str, ObservationBinding] = {}
    for name, spec in r.obj(b.get("observations", {}), "binding.observations", set(), set(OBSERVATIONS)).items():
        where = f"binding.observations.{name}"
        needs_threshold = name != "lane_departure"
        o = r.obj(spec, where, {"variable", "true", "false"} | ({"threshold"} if needs_threshold else set()), set())
        observations[name] = ObservationBinding(
            r.text(o["variable"], f"{where}.variable"),
            r.integer(o["true"], f"{where}.true"),
            r.integer(o["false"], f"{where}.false"),
            r.number(o["threshold"], f"{where}.threshold") if needs_threshold else None,
        )
    k = b.get("min_consecutive_calls")
    if k is not None and r.integer(k, "binding.min_consecutive_calls") < 0:
        raise r.fail("binding.min_consecutive_calls", f"expected an integer >= 0, got {k!r}")
    return Binding(
        timestep=r.text(b["timestep"], "binding.timestep"),
        consecutive_calls=r.text(b["consecutive_calls"], "binding.consecutive_calls"),
        configuration=r.text(b["configuration"], "binding.configuration"),
        locations=locations,
        stay_action=r.text(acts["stay"], "binding.actions.stay"),
        exit_action=r.text(acts["exit"], "binding.actions.exit"),
        configurations=tuple(confs),
        configuration_values=tuple(values),
        configuration_actions=tuple(actions),
        observations=observations,
        min_consecutive_calls=None if k is None else r.integer(k, "binding.min_consecutive_calls"),
    )


def read_binding(raw: Any, where: str) -> Binding:
    """A runtime binding (the ``binding`` of a scheduler file) checked as :func:`load_scheduler`
    checks it; errors name ``where`` (a file, or an option such as ``--binding FILE``)."""
    return _read_binding(_Reader(where), raw)


def _location_of(state: Mapping[str, int], binding: Binding) -> str | None:
    hits = [
        name for name, val in binding.locations.items()
        if all(state.get(var) == v for var, v in val.items())
    ]
    return hits[0] if len(hits) == 1 else ("ambiguous" if hits else None)


def _configuration_of(r: _Reader, choice: Mapping[str, Any], binding: Binding, where: str) -> int:
    action = choice.get("action")
    if action is not None and action in binding.configuration_actions:
        return binding.configuration_actions.index(action)
    successor = choice.get("successor")
    if successor is not None and binding.configuration in successor:
        value = successor[binding.configuration]
        if value in binding.configuration_values:
            return binding.configuration_values.index(value)
        raise r.fail(
            f"{where}.successor.{binding.configuration}",
            f"value {value!r} is not a configuration value {list(binding.configuration_values)}",
        )
    raise r.fail(
        where,
        f"cannot tell which configuration this choice selects: action {action!r} is not a configuration "
        f"action and the successor does not set {binding.configuration!r}",
    )


def _require(r: _Reader, state: Mapping[str, int], var: str, meaning: str, where: str) -> int:
    if var not in state:
        raise r.fail(f"{where}.state", f"lacks variable {var!r} (bound as {meaning})")
    return state[var]


def _read_entries(
    r: _Reader, raw: Any, binding: Binding, deterministic: bool, where: str
) -> tuple[dict[tuple[int, ...], tuple[tuple[int, float], ...]], dict[tuple[int, ...], float]]:
    if not isinstance(raw, list):
        raise r.fail(where, "expected a list of {state, choices}")
    choose: dict[tuple[int, ...], tuple[tuple[int, float], ...]] = {}
    exits: dict[tuple[int, ...], float] = {}
    first_seen: dict[tuple[str, tuple[int, ...]], tuple[int, dict[str, int]]] = {}
    for i, entry in enumerate(raw):
        ew = f"{where}[{i}]"
        entry = r.obj(entry, ew, {"state", "choices"}, set())
        state = r.valuation(entry["state"], f"{ew}.state")
        choices = entry["choices"]
        if not isinstance(choices, list) or not choices:
            raise r.fail(f"{ew}.choices", "expected a non-empty list of {action, successor, probability}")
        probs = []
        for j, c in enumerate(choices):
            cw = f"{ew}.choices[{j}]"
            c = r.obj(c, cw, {"probability"}, {"action", "successor"})
            p = r.number(c["probability"], f"{cw}.probability")
            if not 0.0 <= p <= 1.0:
                raise r.fail(f"{cw}.probability", f"must lie in [0, 1], got {p}")
            if c.get("action") is not None:
                r.text(c["action"], f"{cw}.action")
            if c.get("successor") is not None:
                r.valuation(c["successor"], f"{cw}.successor")
            probs.append(p)
        if abs(sum(probs) - 1.0) > _PROB_TOL:
            raise r.fail(f"{ew}.choices", f"probabilities sum to {sum(probs):.9g}, not 1")
        if deterministic and max(probs) < 1.0 - _PROB_TOL:
            raise r.fail(f"{ew}.choices", "a deterministic scheduler needs one choice with probability 1")
        location = _location_of(state, binding)
        if location == "ambiguous":
            raise r.fail(f"{ew}.state", "matches both binding.locations.choose and .exit_check")
        if location is None:
            continue  # not a choice point of the switch
        ts = _require(r, state, binding.timestep, "timestep", ew)
        cc = _require(r, state, binding.consecutive_calls, "consecutive_calls", ew)
        if location == "choose":
            key: tuple[int, ...] = (ts, cc)
            dist: dict[int, float] = {}
            for j, (c, p) in enumerate(zip(choices, probs)):
                conf = _configuration_of(r, c, binding, f"{ew}.choices[{j}]")
                dist[conf] = dist.get(conf, 0.0) + p
            value: Any = tuple((k, p) for k, p in sorted(dist.items()) if p > 0)
            table: dict[tuple[int, ...], Any] = choose
        else:
            conf_value = _require(r, state, binding.configuration, "configuration", ew)
            if conf_value not in binding.configuration_values:
                raise r.fail(
                    f"{ew}.state.{binding.configuration}",
                    f"value {conf_value} is not a configuration value {list(binding.configuration_values)}",
                )
            obs = []
            for name, o in sorted(binding.observations.items()):
                v = _require(r, state, o.variable, name, ew)
                if v not in (o.true, o.false):
                    raise r.fail(f"{ew}.state.{o.variable}", f"value {v} is neither {o.true} nor {o.false}")
                obs.append(v)
            key = (ts, cc, binding.configuration_values.index(conf_value), *obs)
            p_exit = 0.0
            for j, (c, p) in enumerate(zip(choices, probs)):
                action = c.get("action")
                if action == binding.exit_action:
                    p_exit += p
                elif action != binding.stay_action:
                    raise r.fail(
                        f"{ew}.choices[{j}].action",
                        f"{action!r} is neither the stay action {binding.stay_action!r} "
                        f"nor the exit action {binding.exit_action!r}",
                    )
            value, table = p_exit, exits
        seen = first_seen.get((location, key))
        if seen is None:
            first_seen[(location, key)] = (i, state)
            table[key] = value
        elif not _same(table[key], value):
            j, other = seen
            differ = sorted(v for v in set(state) | set(other) if state.get(v) != other.get(v))
            raise r.fail(
                ew,
                f"same runtime state as {where}[{j}] but a different distribution; they differ only in "
                f"{', '.join(differ)}, which the binding does not map (bind them, e.g. as observations)",
            )
    return choose, exits


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float):
        return abs(a - b) <= _PROB_TOL
    return len(a) == len(b) and all(x[0] == y[0] and abs(x[1] - y[1]) <= _PROB_TOL for x, y in zip(a, b))


def load_scheduler(path: str | Path) -> SchedulerFile:
    """Load and validate a scheduler file; raises :class:`SchedulerError` on any defect."""
    name = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SchedulerError(f"{name}: cannot read scheduler file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise SchedulerError(f"{name}: not a text file (not UTF-8); expected a {FORMAT} JSON file") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchedulerError(f"{name}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    r = _Reader(name)
    top = r.obj(
        raw, "top level",
        {"format", "version", "model", "kind", "objectives", "point", "binding"},
        {"entries", "components"},
    )
    if top["format"] != FORMAT:
        raise r.fail("format", f"expected {FORMAT!r}, got {top['format']!r}")
    if isinstance(top["version"], bool) or top["version"] != VERSION:
        raise r.fail("version", f"this mopmc reads version {VERSION}, got {top['version']!r}")
    model = r.obj(top["model"], "model", {"states", "choices", "variables"}, set())
    r.integer(model["states"], "model.states")
    r.integer(model["choices"], "model.choices")
    if not isinstance(model["variables"], list):
        raise r.fail("model.variables", "expected a list of variable names")
    kind = top["kind"]
    if kind not in KINDS:
        raise r.fail("kind", f"expected one of {', '.join(KINDS)}, got {kind!r}")
    objectives = top["objectives"]
    if not isinstance(objectives, list) or not objectives or not all(isinstance(o, str) for o in objectives):
        raise r.fail("objectives", f"expected a non-empty list of formula strings, got {objectives!r}")
    point = top["point"]
    if not isinstance(point, list):
        raise r.fail("point", "expected a list of numbers")
    point_values = tuple(r.number(x, f"point[{i}]") for i, x in enumerate(point))
    if len(point_values) != len(objectives):
        raise r.fail("point", f"{len(point_values)} values for {len(objectives)} objectives")
    binding = _read_binding(r, top["binding"])
    variables = set(model["variables"])
    used = {binding.timestep, binding.consecutive_calls, binding.configuration}
    used |= {v for val in binding.locations.values() for v in val}
    used |= {o.variable for o in binding.observations.values()}
    if variables and not used <= variables:
        raise r.fail("binding", f"variable(s) {', '.join(sorted(used - variables))} not in model.variables")
    if kind == "mixture":
        if "components" not in top or "entries" in top:
            raise r.fail("top level", "a mixture has 'components' (a list of {weight, entries}) and no 'entries'")
        comps = top["components"]
        if not isinstance(comps, list) or not comps:
            raise r.fail("components", "expected a non-empty list of {weight, entries}")
        weights, chooses, exits = [], [], []
        for i, comp in enumerate(comps):
            comp = r.obj(comp, f"components[{i}]", {"weight", "entries"}, set())
            w = r.number(comp["weight"], f"components[{i}].weight")
            if w < 0:
                raise r.fail(f"components[{i}].weight", f"must be >= 0, got {w}")
            c, e = _read_entries(r, comp["entries"], binding, True, f"components[{i}].entries")
            weights.append(w)
            chooses.append(c)
            exits.append(e)
        if abs(sum(weights) - 1.0) > _PROB_TOL:
            raise r.fail("components", f"weights sum to {sum(weights):.9g}, not 1")
    else:
        if "entries" not in top or "components" in top:
            raise r.fail("top level", f"a {kind} scheduler has 'entries' and no 'components'")
        c, e = _read_entries(r, top["entries"], binding, kind == "deterministic", "entries")
        weights, chooses, exits = [1.0], [c], [e]
    return SchedulerFile(
        path=name, kind=kind, objectives=tuple(objectives), point=point_values, binding=binding,
        weights=tuple(weights), choose=tuple(chooses), exit=tuple(exits),
    )
