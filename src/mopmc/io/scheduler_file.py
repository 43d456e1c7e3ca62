"""Write and read scheduler files (formats ``mopmc-scheduler`` and ``mopmc-pareto-schedulers``,
version 1, see docs/formats.md).

Entries are keyed by state valuation (``{"#": index}`` for models without valuations); choices are
named by action label plus successor valuation (deterministic choices) or, where that does not
tell a state's choices apart, by their ``support`` (successor valuations with probabilities).
:func:`read_scheduler` maps a file back onto a model as a :class:`~mopmc.engine.evaluate.Policy`
or :class:`~mopmc.engine.evaluate.Mixture`, for :func:`mopmc.engine.evaluate.evaluate`.

>>> write_scheduler("s.json", model, objectives, point, policy)  # doctest: +SKIP
>>> sched, meta = read_scheduler("s.json", model)               # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from mopmc.engine.evaluate import Mixture, Policy
from mopmc.engine.reductions.goal_memory import decision_set
from mopmc.errors import SchedulerError
from mopmc.model.sparse_mdp import SparseMDP

FORMAT = "mopmc-scheduler"
PARETO_FORMAT = "mopmc-pareto-schedulers"
VERSION = 1


def _valuation(model: SparseMDP, s: int) -> dict:
    if model.valuations is None:
        return {"#": int(s)}
    return {k: int(v) for k, v in model.valuations.of(int(s)).items()}


def _names(model: SparseMDP, s: int) -> list[dict]:
    """A name per choice of ``s``: action, successor (deterministic) and, if needed, support."""
    out = []
    for c in range(int(model.row_groups[s]), int(model.row_groups[s + 1])):
        lo, hi = int(model.indptr[c]), int(model.indptr[c + 1])
        name: dict[str, Any] = {"action": model.action_of(c),
                                "successor": _valuation(model, int(model.targets[lo])) if hi - lo == 1 else None}
        out.append((name, c, lo, hi))
    keys = [json.dumps(n, sort_keys=True) for n, *_ in out]
    named = []
    for (name, c, lo, hi), key in zip(out, keys):
        if keys.count(key) > 1:
            name = dict(name, support=[{"state": _valuation(model, int(t)), "probability": float(p)}
                                       for t, p in zip(model.targets[lo:hi], model.probs[lo:hi])])
        named.append(name)
    return named


def memory_formulas(model: SparseMDP, objectives: Sequence, decided: np.ndarray) -> list[str]:
    """The state formula behind each goal-memory bit (matched against the objectives' decision sets)."""
    out = []
    for j, mask in enumerate(decided):
        for o in objectives:
            d = decision_set(model, o)
            if d is not None and np.array_equal(d, mask):
                text = o.right_text if o.kind != "probability" or o.left_text is None else f"({o.right_text}) | !({o.left_text})"
                out.append(text)
                break
        else:
            raise SchedulerError(f"memory bit {j} matches no objective's decision set; export with the objectives it was computed for")
    return out


def _entries(model: SparseMDP, policy: Policy, keep) -> list[dict]:
    counts = np.diff(model.row_groups)
    entries = []
    for e in range(len(policy.state)):
        s = int(policy.state[e])
        if counts[s] < 2 or (keep is not None and not keep(s)):
            continue
        names = _names(model, s)
        base = int(model.row_groups[s])
        rows = range(int(policy.indptr[e]), int(policy.indptr[e + 1]))
        choices = [dict(names[int(policy.choice[r]) - base], probability=float(policy.prob[r])) for r in rows
                   if policy.prob[r] > 0]
        entry: dict[str, Any] = {"state": _valuation(model, s), "choices": choices}
        if policy.n_bits:
            entry["memory"] = int(policy.memory[e])
        entries.append(entry)
    return entries


def reachable_part(model: SparseMDP, policy: Policy) -> Policy:
    """``policy`` restricted to the product states ``(state, memory)`` it reaches from the initial
    state (the only entries an evaluation reads); the kernel's schedulers cover every state."""
    from mopmc.engine.evaluate import induced_chain

    keys = induced_chain(model, policy).keys  # memory * n + state, memory = the policy's own bits
    n = model.n_states
    mine = policy.memory * n + policy.state
    keep = np.isin(mine, keys)
    counts = np.diff(policy.indptr)
    rows = np.repeat(keep, counts)
    return Policy(policy.state[keep], policy.memory[keep], np.concatenate(([0], np.cumsum(counts[keep]))).astype(np.int64),
                  policy.choice[rows], policy.prob[rows], policy.decided)


def _model_fingerprint(model: SparseMDP) -> dict:
    return {"states": model.n_states, "choices": model.n_choices,
            "variables": list(model.valuations.names) if model.valuations is not None else []}


def scheduler_document(model: SparseMDP, objectives: Sequence, point: Sequence[float], scheduler,
                       *, binding: Mapping | None = None, runtime: bool = False, reachable: bool = False) -> dict:
    """The JSON document of a :class:`Policy` or :class:`Mixture`.

    States with a single choice get no entry. ``runtime``: only the switch's decision points that
    ``binding`` names (entries the runtime reads; other states are left out). ``reachable``: only
    the states each (component) policy reaches from the initial state (``mopmc check`` exports).
    """
    keep = _runtime_filter(model, binding) if runtime else None
    if reachable:
        if isinstance(scheduler, Mixture):
            scheduler = Mixture(scheduler.weights, tuple(reachable_part(model, p) for p in scheduler.policies))
        else:
            scheduler = reachable_part(model, scheduler)
    first = scheduler.policies[0] if isinstance(scheduler, Mixture) else scheduler
    doc: dict[str, Any] = {
        "format": FORMAT, "version": VERSION,
        "model": _model_fingerprint(model),
    }
    if isinstance(scheduler, Mixture):
        _same_memory(scheduler.policies)
        doc["kind"] = "mixture"
    else:
        doc["kind"] = "deterministic" if scheduler.deterministic else "randomised"
    doc["objectives"] = [o.text for o in objectives]
    doc["point"] = [float(x) for x in point]
    doc["binding"] = dict(binding) if binding is not None else None
    if first.n_bits:
        if runtime:
            raise SchedulerError("the switch runtime cannot execute schedulers with goal memory")
        doc["memory"] = memory_formulas(model, objectives, first.decided)
    if isinstance(scheduler, Mixture):
        doc["components"] = [{"weight": float(w), "entries": _entries(model, p, keep)}
                             for w, p in zip(scheduler.weights, scheduler.policies) if w > 0]
    else:
        doc["entries"] = _entries(model, scheduler, keep)
    if doc["binding"] is None:
        del doc["binding"]
    return doc


def write_scheduler(path: str | Path, model: SparseMDP, objectives: Sequence, point: Sequence[float], scheduler,
                    **kwargs) -> Path:
    """Write :func:`scheduler_document` to ``path`` (atomically: a temporary file, then rename)."""
    return write_document(path, scheduler_document(model, objectives, point, scheduler, **kwargs))


def write_export(path: str | Path, model: SparseMDP, objectives: Sequence, point: Sequence[float], scheduler,
                 binding: Mapping | None = None) -> Path:
    """A query's exported scheduler (``mopmc convex``, ``mopmc table3``): with a runtime ``binding``
    the switch's decision points (the runtime may meet states the estimated model does not reach),
    otherwise the states the scheduler reaches (as ``mopmc check``'s files)."""
    return write_scheduler(path, model, objectives, point, scheduler, binding=binding, runtime=binding is not None,
                           reachable=binding is None)


def _same_memory(policies: Sequence[Policy]) -> None:
    first = policies[0].decided
    if any(p.decided.shape != first.shape or not np.array_equal(p.decided, first) for p in policies[1:]):
        raise SchedulerError("the schedulers of one file must share their goal memory (the same decision sets)")


def pareto_document(model: SparseMDP, objectives: Sequence, schedulers: Sequence[tuple[Sequence[float], Policy]],
                    vertices: Sequence[tuple[Sequence[float], Sequence[tuple[float, int]]]], *,
                    status: str | None = None, reachable: bool = True) -> dict:
    """The ``mopmc-pareto-schedulers`` document of a Pareto front: ``schedulers`` are the
    deterministic vertex schedulers with their points, ``vertices`` the front's points, each a
    mixture ``[(weight, index into schedulers), ...]`` (one component of weight 1 when the point is
    a vertex itself). ``reachable``: entries only for the states each scheduler reaches."""
    pols = [reachable_part(model, p) if reachable else p for _, p in schedulers]
    if not pols:
        raise SchedulerError("a Pareto file needs at least one scheduler")
    _same_memory(pols)
    doc: dict[str, Any] = {"format": PARETO_FORMAT, "version": VERSION, "model": _model_fingerprint(model),
                           "objectives": [o.text for o in objectives]}
    if status is not None:
        doc["status"] = status
    if pols[0].n_bits:
        doc["memory"] = memory_formulas(model, objectives, pols[0].decided)
    doc["schedulers"] = [{"point": [float(x) for x in pt], "entries": _entries(model, p, None)}
                         for (pt, _), p in zip(schedulers, pols)]
    doc["vertices"] = []
    for pt, mix in vertices:
        total = sum(float(w) for w, _ in mix)
        doc["vertices"].append({"point": [float(x) for x in pt],
                                "components": [{"weight": float(w) / total, "scheduler": int(i)} for w, i in mix]})
    return doc


def write_document(path: str | Path, doc: dict) -> Path:
    """Write a JSON document compactly and atomically (a temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        tmp.replace(path)
    except OSError as exc:
        if tmp.is_file():
            tmp.unlink()
        raise SchedulerError(f"{path}: cannot write the scheduler file ({exc.strerror})") from None
    return path


def check_binding(model: SparseMDP, binding: Mapping, where: str = "--binding", *, in_file: bool = False,
                  steps: int | None = None) -> None:
    """Refuse a runtime binding that does not fit ``model`` (before a long query, not at its export).
    ``in_file``: ``where`` is a scheduler file holding the binding (messages then name the key ``binding``);
    ``steps``: the episode length ``n`` of the binding document of ``mopmc design build``, which
    the model's timestep must reach (a binding of another n would not fit the runtime's episodes)."""
    _runtime_filter(model, binding, where, in_file=in_file)
    if steps is not None and model.valuations is not None:
        names = list(model.valuations.names)
        ts = model.valuations.values[:, names.index(binding["timestep"])]
        reached = int(ts.max()) if ts.size else 0
        if reached != steps:
            raise SchedulerError(f"{where}: n: the binding is for episodes of {steps} steps, the model's "
                                 f"{binding['timestep']} reaches {reached}; is the binding for another model?")


def _runtime_filter(model: SparseMDP, binding: Mapping | None, where: str = "--binding", *, in_file: bool = False):
    """States at the binding's choose/exit_check locations whose choices are all switch choices."""
    if binding is None:
        raise SchedulerError("a runtime scheduler file needs a binding (the switch's variables and locations)")
    if model.valuations is None:
        raise SchedulerError("a runtime scheduler file needs state valuations; load the model with valuations")
    from mopmc.runtime.scheduler import read_binding

    rb = read_binding(binding, where)  # the checks the runtime makes when it loads the file
    names = list(model.valuations.names)
    used = {rb.timestep, rb.consecutive_calls, rb.configuration} | {v for val in rb.locations.values() for v in val}
    used |= {o.variable for o in rb.observations.values()}
    if not used <= set(names):
        key = "binding: " if in_file else ""
        raise SchedulerError(f"{where}: {key}variable(s) {', '.join(sorted(used - set(names)))} are not variables of the "
                             f"model ({', '.join(names)}); is the binding for another model?")
    actions = {model.action_of(c) for c in range(model.n_choices)}
    # a switch whose episodes end before the secondary may be left (n <= k: the timestep never
    # exceeds k) has no exit choice, and the runtime never asks for one (it asks when cc >= k)
    ts = model.valuations.values[:, names.index(rb.timestep)]
    no_exit = rb.min_consecutive_calls is not None and ts.size > 0 and int(ts.max()) <= rb.min_consecutive_calls
    for key, act in (("stay", rb.stay_action), ("exit", rb.exit_action)):
        if act not in actions and not (key == "exit" and no_exit):
            raise SchedulerError(f"{where}: binding.actions.{key}: the model has no action {act!r}")
    vals = model.valuations.values
    loc_var = binding.get("location")
    stay, leave = binding["actions"]["stay"], binding["actions"]["exit"]
    conf_actions = {c.get("action") for c in binding["configurations"]} - {None}

    def at(spec) -> np.ndarray:
        spec = {loc_var: spec} if not isinstance(spec, Mapping) else spec
        mask = np.ones(model.n_states, bool)
        for var, v in spec.items():
            mask &= vals[:, names.index(var)] == v
        return mask

    choose, exit_check = at(binding["locations"]["choose"]), at(binding["locations"]["exit_check"])
    conf_col = names.index(binding["configuration"])

    def keep(s: int) -> bool:
        cs = range(int(model.row_groups[s]), int(model.row_groups[s + 1]))
        if exit_check[s]:
            return all(model.action_of(c) in (stay, leave) for c in cs)
        if choose[s]:
            return all(model.action_of(c) in conf_actions or (
                model.indptr[c + 1] - model.indptr[c] == 1
                and vals[model.targets[model.indptr[c]], conf_col] != vals[s, conf_col]) for c in cs)
        return False

    return keep


def runtime_binding(design) -> dict:
    """The runtime binding (docs/formats.md) of a switch :class:`~mopmc.design.spec.Design`, or of
    the binding file ``mopmc design build`` writes beside a switch model (its JSON document)."""
    if isinstance(design, Mapping):
        b = design
        if b.get("format") != "mopmc-switch-binding/1":
            raise SchedulerError("not a mopmc-switch-binding/1 document")
        if "metrics" not in b:
            raise SchedulerError("the binding has no metric scores (written by an older mopmc); "
                                 "rebuild the model with mopmc design build")
        _check_binding_document(b)
        metrics = [(m["name"], m.get("score")) for m in b["metrics"]]
    else:
        b, params = design.binding, design.parameters
        if b is None or params is None:
            raise SchedulerError("this design has no switch binding; the runtime executes switch designs only")
        metrics = [(m.name, m.score) for m in params.metrics]
    locs = list(b["locations"])
    observations = {}
    meaning = {"hw": "low_headway", "ttc": "low_ttc", "ld": "lane_departure"}
    for metric, score in metrics:
        name = meaning.get(metric)
        if name is None:
            continue
        spec: dict[str, Any] = {"variable": b["recorders"][metric], "true": 2, "false": 3}  # MR: idle, observed, bad, good
        if name != "lane_departure":
            spec["threshold"] = float(score) if score is not None else 0.0
        observations[name] = spec
    return {
        "timestep": b["timestep"], "consecutive_calls": b["consecutive_calls"], "configuration": b["configuration"],
        "location": b["location"], "locations": {"choose": locs.index("s0"), "exit_check": locs.index("ss_exit")},
        "actions": {"stay": "re_s", "exit": "ex_s"},
        "configurations": [{"name": c["name"], "t": c["t"], "controller": c["controller"], "value": c["index"]}
                           for c in b["configurations"]],
        "min_consecutive_calls": b["k"],
        "observations": observations,
    }


#: the keys of a ``mopmc-switch-binding/1`` document (:func:`mopmc.design.switch.binding`)
BINDING_DOCUMENT_KEYS = {"format", "timestep", "consecutive_calls", "configuration", "location", "locations",
                         "primary_locations", "secondary_locations", "recorders", "metrics", "n", "k", "configurations"}


def _check_binding_document(b: Mapping) -> None:
    """The keys :func:`runtime_binding` reads from a ``mopmc-switch-binding/1`` document, checked by name."""
    def bad(key: str, expected: str) -> SchedulerError:
        return SchedulerError(f"{key}: expected {expected}, got {b.get(key.split('[')[0])!r}; "
                              "rebuild the binding with mopmc design build")

    unknown = sorted(set(b) - BINDING_DOCUMENT_KEYS, key=str)
    if unknown:
        raise SchedulerError(f"unknown key(s) {', '.join(map(str, unknown))}; allowed: "
                             f"{', '.join(sorted(BINDING_DOCUMENT_KEYS))}")
    for key in ("timestep", "consecutive_calls", "configuration", "location"):
        if not isinstance(b.get(key), str):
            raise bad(key, "a variable name")
    locs = b.get("locations")
    if not isinstance(locs, list) or not all(isinstance(x, str) for x in locs) or "s0" not in locs or "ss_exit" not in locs:
        raise bad("locations", "a list of location names with s0 and ss_exit")
    for key in ("primary_locations", "secondary_locations"):
        if key in b and (not isinstance(b[key], list) or not all(isinstance(x, str) and x in locs for x in b[key])):
            raise bad(key, "a list of names from locations")
    if not _is_int(b.get("n")) or b["n"] < 1:
        raise bad("n", "an integer >= 1 (the episode length)")
    if not _is_int(b.get("k")) or b["k"] < 0:
        raise bad("k", "an integer >= 0")
    if not isinstance(b.get("recorders"), dict):
        raise bad("recorders", "an object {metric: variable}")
    if not isinstance(b["metrics"], list) or not all(
            isinstance(m, dict) and isinstance(m.get("name"), str) and (m.get("score") is None or _is_number(m["score"]))
            for m in b["metrics"]):
        raise bad("metrics", "a list of {name, score}")
    for m in b["metrics"]:
        if m["name"] in ("hw", "ttc", "ld") and not isinstance(b["recorders"].get(m["name"]), str):
            raise SchedulerError(f"recorders.{m['name']}: expected the variable recording metric {m['name']!r}, "
                                 f"got {b['recorders'].get(m['name'])!r}")
    confs = b.get("configurations")
    if not isinstance(confs, list) or not confs:
        raise bad("configurations", "a non-empty list of {index, name, t, controller}")
    for i, c in enumerate(confs):
        if (not isinstance(c, dict) or not isinstance(c.get("name"), str) or not _is_int(c.get("index"))
                or not _is_number(c.get("t")) or "controller" not in c):
            raise SchedulerError(f"configurations[{i}]: expected an object {{index, name, t, controller}}, got {c!r}")
        extra = sorted(set(c) - {"index", "name", "t", "controller", "paper_label"}, key=str)
        if extra:
            raise SchedulerError(f"configurations[{i}]: unknown key(s) {', '.join(map(str, extra))}; "
                                 "allowed: controller, index, name, paper_label, t")
        if c["index"] != i + 1:  # the value of the configuration variable: design build numbers them from 1
            raise SchedulerError(f"configurations[{i}].index: expected {i + 1} (configurations are numbered from 1 "
                                 f"in order), got {c['index']!r}; rebuild the binding with mopmc design build")
        if not _is_int(c["controller"]):
            raise SchedulerError(f"configurations[{i}].controller: expected a controller number, got {c['controller']!r}")


# ---------------------------------------------------------------------------------------- reading
_TOP = {FORMAT: ({"format", "version", "model", "kind", "objectives", "point"},
                 {"binding", "memory", "entries", "components"}),
        PARETO_FORMAT: ({"format", "version", "model", "objectives", "schedulers", "vertices"}, {"status", "memory"})}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _keys(name: str, value: Any, where: str, required: set[str], optional: set[str], shape: str) -> dict:
    """``value`` as an object with only the named keys (unknown ones are errors, by name)."""
    if not isinstance(value, dict):
        raise SchedulerError(f"{name}: {where}: expected an object {shape}, got {_short(value)}")
    unknown = sorted(set(value) - required - optional, key=str)
    if unknown:
        raise SchedulerError(f"{name}: {where}: unknown key(s) {', '.join(map(str, unknown))}; "
                             f"allowed: {', '.join(sorted(required | optional))}")
    missing = sorted(required - set(value))
    if missing:
        raise SchedulerError(f"{name}: {where}: missing key {missing[0]!r}" + (f" (an object {shape})" if shape else ""))
    return value


#: how far ``mopmc evaluate``'s values may lie from a file's ``point`` (relative, at least absolute
#: 1e-6) before :func:`point_note` speaks: the exporters write the scheduler's evaluated value, and
#: evaluation gives it back to rounding (about 1e-15 on the shipped and reference models; a single
#: objective's point is the kernel's value, within its relative precision, 1e-6 by default, on
#: cyclic parts too large for exact solving), so a larger difference means an edited file, another
#: model with the same fingerprint, or a query run with a coarse --precision
POINT_TOLERANCE = 1e-5


def _formula_key(text: str) -> str:
    return "".join(text.split())


def point_note(path: str | Path, meta: Mapping, objectives: Sequence[str], values: Sequence[float]) -> str | None:
    """The ``note:`` text for ``mopmc evaluate`` when the evaluated ``objectives`` (formula texts) are
    the file's own (same formulas, same order; spaces ignored) and ``values`` differ from the file's
    ``point`` by more than ``POINT_TOLERANCE * max(1, |value|)``; ``None`` otherwise.

    ``meta`` is :func:`read_scheduler`'s metadata (``objectives`` and ``point``)."""
    own, point = meta.get("objectives"), meta.get("point")
    if not isinstance(own, list) or not isinstance(point, list) or len(own) != len(objectives) or len(point) != len(values):
        return None
    if [_formula_key(o) for o in own] != [_formula_key(o) for o in objectives]:
        return None
    far = []
    for i, (v, p) in enumerate(zip(values, point)):
        v, p = float(v), float(p)
        if v == p or (np.isnan(v) and np.isnan(p)):
            continue
        if not (abs(v - p) <= POINT_TOLERANCE * max(1.0, abs(v))):  # NaN or infinity on one side only: far
            far.append(f"{objectives[i]}: {v:.10g}, the file says {p:.10g}")
    if not far:
        return None
    where = f" (vertex {meta['vertex']})" if meta.get("vertex") is not None else ""
    return (f"{path}: the evaluated values differ from the file's point{where} by more than {POINT_TOLERANCE:g} "
            f"(relative): {'; '.join(far)}; was the file edited, computed on another model with the same "
            "fingerprint (other constants), or with a coarse --precision?")


def read_scheduler(path: str | Path, model: SparseMDP, *, vertex: int | None = None) -> tuple[Policy | Mixture, dict]:
    """Map a scheduler file onto ``model``; returns the scheduler and the document's metadata
    (``kind``, ``objectives``, ``point``; for a Pareto file also ``vertex`` and ``vertices``).

    A ``mopmc-pareto-schedulers`` file holds one scheduler per point of a Pareto front: ``vertex``
    (``mopmc evaluate --vertex I``) picks one; a ``mopmc-scheduler`` file takes no ``vertex``."""
    name = str(path)
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise SchedulerError(f"{name}: cannot read scheduler file ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise SchedulerError(f"{name}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError:
        raise SchedulerError(f"{name}: not a text file (not UTF-8); expected a {FORMAT} JSON file") from None
    version = doc.get("version") if isinstance(doc, dict) else None
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt not in _TOP or not _is_int(version) or version != VERSION:
        hint = ""
        if isinstance(doc, dict) and "property" in doc:
            hint = " (written by an older mopmc check --export-scheduler; export the scheduler again)"
        raise SchedulerError(f"{name}: not a {fmt if fmt in _TOP else FORMAT} version {VERSION} file{hint}")
    _keys(name, doc, "top level", *_TOP[fmt], "")
    fp = _keys(name, doc["model"], "model", {"states", "choices", "variables"}, set(), "{states, choices, variables}")
    for key in ("states", "choices"):
        if not _is_int(fp[key]) or fp[key] < 0:
            raise SchedulerError(f"{name}: model.{key}: expected an integer >= 0 (the number of {key}), "
                                 f"got {_short(fp[key])}")
    if not isinstance(fp["variables"], list) or not all(isinstance(v, str) for v in fp["variables"]):
        raise SchedulerError(f"{name}: model.variables: expected a list of variable names, got {_short(fp['variables'])}")
    if fp["states"] != model.n_states or fp["choices"] != model.n_choices:
        raise SchedulerError(f"{name}: model: computed on a model with {fp['states']} states and {fp['choices']} "
                             f"choices, this one has {model.n_states} and {model.n_choices}")
    have = list(model.valuations.names) if model.valuations is not None else []
    if fp["variables"] and fp["variables"] != have:
        raise SchedulerError(f"{name}: model.variables: {fp['variables']} differ from the model's {have}")
    objectives = doc["objectives"]
    if not isinstance(objectives, list) or not objectives or not all(isinstance(o, str) for o in objectives):
        raise SchedulerError(f"{name}: objectives: expected a non-empty list of formula strings, got {_short(objectives)}")
    if fmt == PARETO_FORMAT and "status" in doc and not isinstance(doc["status"], str):
        raise SchedulerError(f"{name}: status: expected the query's status as a string (optimal, iteration_limit), "
                             f"got {_short(doc['status'])}")
    if fmt == FORMAT and "binding" in doc:  # the checks of mopmc convex/table3 --binding and of the runtime's loader
        from mopmc.runtime.scheduler import read_binding

        read_binding(doc["binding"], name)
        if model.valuations is not None:  # (without, the variables and locations cannot be looked up)
            check_binding(model, doc["binding"], name, in_file=True)
    reader = _EntryReader(name, model, _read_memory(name, doc, model))
    if fmt == PARETO_FORMAT:
        if vertex is None:
            n = len(doc["vertices"]) if isinstance(doc["vertices"], list) else 0
            raise SchedulerError(f"{name}: a Pareto file with {n} vertices (one scheduler each); pick one with "
                                 f"--vertex I (0 to {n - 1})")
        return _read_pareto_vertex(name, doc, reader, vertex)
    if vertex is not None:
        raise SchedulerError(f"{name}: --vertex {vertex}: this file holds one scheduler ({FORMAT}), not a Pareto front "
                             f"({PARETO_FORMAT}); leave out --vertex")
    _check_point(name, doc["point"], "point", len(objectives))
    meta = {k: doc.get(k) for k in ("kind", "objectives", "point")}
    kind = doc.get("kind")
    if kind not in ("deterministic", "randomised", "mixture"):
        raise SchedulerError(f"{name}: kind: expected deterministic, randomised or mixture, got {kind!r}")
    if kind == "mixture":
        if "entries" in doc:
            raise SchedulerError(f"{name}: top level: a mixture has 'components' (a list of {{weight, entries}}) "
                                 "and no 'entries'")
        comps = doc.get("components")
        if not isinstance(comps, list) or not comps:
            raise SchedulerError(f"{name}: components: a mixture needs a non-empty list of {{weight, entries}}, "
                                 f"got {comps!r}")
        pols, weights = [], []
        for i, c in enumerate(comps):
            if not isinstance(c, dict) or "entries" not in c:
                raise SchedulerError(f"{name}: components[{i}]: expected an object {{weight, entries}}, "
                                     f"got {c if not isinstance(c, dict) else sorted(c)!r}")
            _keys(name, c, f"components[{i}]", {"weight", "entries"}, set(), "{weight, entries}")
            if not _is_number(c.get("weight")):
                raise SchedulerError(f"{name}: components[{i}].weight: expected a number, got {c.get('weight')!r}")
            pols.append(reader.policy(c["entries"], f"components[{i}].entries",
                                      deterministic="the components of a mixture are deterministic schedulers"))
            weights.append(float(c["weight"]))
        return Mixture(_weights(name, "components", weights), tuple(pols)), meta
    if "components" in doc:
        raise SchedulerError(f"{name}: top level: a {kind} scheduler has 'entries' and no 'components'")
    if "entries" not in doc:
        raise SchedulerError(f"{name}: missing key 'entries' (a list of {{state, choices}})")
    return reader.policy(doc["entries"], "entries", deterministic="kind is deterministic" if kind == "deterministic"
                         else None), meta


def _read_memory(name: str, doc: dict, model: SparseMDP) -> np.ndarray:
    """The decision sets of the goal-memory bits named by the top-level ``memory`` formulas."""
    if not doc.get("memory"):
        return np.zeros((0, model.n_states), bool)
    from mopmc.errors import MopmcError
    from mopmc.properties.states import state_mask

    if not isinstance(doc["memory"], list):
        raise SchedulerError(f"{name}: memory: expected a list of state formulas, got {doc['memory']!r}")
    masks = []
    for j, t in enumerate(doc["memory"]):
        if not isinstance(t, str):
            raise SchedulerError(f"{name}: memory[{j}]: expected a state formula string, got {t!r}")
        try:
            masks.append(state_mask(t, model.labels, model.n_states))
        except MopmcError as exc:
            raise SchedulerError(f"{name}: memory[{j}]: {exc.one_line()}") from None
    return np.array(masks, bool)


def _check_point(name: str, point: Any, where: str, length: int) -> None:
    """A point: a list of numbers, one per objective (docs/formats.md: same order and length as objectives)."""
    if not isinstance(point, list) or not all(_is_number(x) for x in point):
        raise SchedulerError(f"{name}: {where}: expected a list of numbers, got {_short(point)}")
    bad = [i for i, x in enumerate(point) if not np.isfinite(x)]
    if bad:  # as the runtime's loader: a point is the value the query reported, always finite
        raise SchedulerError(f"{name}: {where}[{bad[0]}]: expected a finite number, got {point[bad[0]]!r}")
    if len(point) != length:
        raise SchedulerError(f"{name}: {where}: {len(point)} value(s) for {length} objective(s); a point has one value "
                             "per entry of objectives, in the same order")


def _weights(name: str, where: str, weights: list[float]) -> np.ndarray:
    w = np.array(weights, float)
    if not np.all(np.isfinite(w)) or not np.all(w >= 0) or abs(w.sum() - 1.0) > 1e-6:
        raise SchedulerError(f"{name}: {where}: weights must be >= 0 and sum to 1, got {w.tolist()}")
    return w


def _read_pareto_vertex(name: str, doc: dict, reader: "_EntryReader", vertex: int) -> tuple[Policy | Mixture, dict]:
    """Vertex ``vertex`` of a ``mopmc-pareto-schedulers`` document (only its schedulers' entries are read)."""
    scheds, verts = doc["schedulers"], doc["vertices"]
    if not isinstance(scheds, list) or not scheds:
        raise SchedulerError(f"{name}: schedulers: expected a non-empty list of {{point, entries}}, got {_short(scheds)}")
    if not isinstance(verts, list) or not verts:
        raise SchedulerError(f"{name}: vertices: expected a non-empty list of {{point, components}}, got {_short(verts)}")
    for i, s in enumerate(scheds):
        _keys(name, s, f"schedulers[{i}]", {"point", "entries"}, set(), "{point, entries}")
        _check_point(name, s["point"], f"schedulers[{i}].point", len(doc["objectives"]))
    for i, v in enumerate(verts):
        where = f"vertices[{i}]"
        _keys(name, v, where, {"point", "components"}, set(), "{point, components}")
        _check_point(name, v["point"], f"{where}.point", len(doc["objectives"]))
        comps = v["components"]
        if not isinstance(comps, list) or not comps:
            raise SchedulerError(f"{name}: {where}.components: expected a non-empty list of {{weight, scheduler}}, "
                                 f"got {comps!r}")
        for j, c in enumerate(comps):
            cw = f"{where}.components[{j}]"
            _keys(name, c, cw, {"weight", "scheduler"}, set(), "{weight, scheduler}")
            if not _is_number(c["weight"]):
                raise SchedulerError(f"{name}: {cw}.weight: expected a number, got {c['weight']!r}")
            if not _is_int(c["scheduler"]) or not 0 <= c["scheduler"] < len(scheds):
                raise SchedulerError(f"{name}: {cw}.scheduler: expected an index into schedulers (0 to "
                                     f"{len(scheds) - 1}), got {c['scheduler']!r}")
        _weights(name, f"{where}.components", [c["weight"] for c in comps])
    if isinstance(vertex, bool) or not isinstance(vertex, int) or not 0 <= vertex < len(verts):
        raise SchedulerError(f"{name}: --vertex {vertex}: the file has {len(verts)} vertices (0 to {len(verts) - 1})")
    v = verts[vertex]
    comps = [c for c in v["components"] if c["weight"] > 0]
    pols = tuple(reader.policy(scheds[c["scheduler"]]["entries"], f"schedulers[{c['scheduler']}].entries",
                               deterministic="the schedulers of a Pareto file are deterministic") for c in comps)
    meta = {"kind": "deterministic" if len(pols) == 1 else "mixture", "objectives": doc["objectives"],
            "point": v["point"], "vertex": vertex, "vertices": len(verts)}
    if len(pols) == 1:
        return pols[0], meta
    return Mixture(_weights(name, f"vertices[{vertex}].components", [c["weight"] for c in comps]), pols), meta


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _EntryReader:
    def __init__(self, name: str, model: SparseMDP, decided: np.ndarray):
        self.name, self.model, self.decided = name, model, decided
        self.index = model.valuations.index() if model.valuations is not None else None
        self.vars = list(model.valuations.names) if model.valuations is not None else ["#"]

    def state(self, valuation: Any, where: str) -> int:
        if not isinstance(valuation, dict) or sorted(valuation) != sorted(self.vars):
            raise SchedulerError(f"{self.name}: {where}: expected a valuation of {', '.join(self.vars)}, got {valuation!r}")
        bad = [v for v in self.vars if not _is_int(valuation[v])]
        if bad:
            raise SchedulerError(f"{self.name}: {where}.{bad[0]}: expected an integer, got {valuation[bad[0]]!r}")
        if self.index is None:
            s = valuation["#"]
            if not 0 <= s < self.model.n_states:
                raise SchedulerError(f"{self.name}: {where}: no state {s!r}")
            return s
        s = self.index.get(tuple(int(valuation[v]) for v in self.vars))
        if s is None:
            raise SchedulerError(f"{self.name}: {where}: the model has no state {valuation}")
        return s

    def policy(self, entries: Any, where: str, deterministic: str | None = None) -> Policy:
        """The entries as a :class:`Policy`; ``deterministic``: why each entry must list one choice
        (the start of the message when one lists more), or ``None``."""
        if not isinstance(entries, list):
            raise SchedulerError(f"{self.name}: {where}: expected a list of {{state, choices}}, got {type(entries).__name__}")
        states, memory, indptr, choice, prob = [], [], [0], [], []
        seen: dict[tuple[int, int], int] = {}
        n_memory = 1 << self.decided.shape[0]
        for i, e in enumerate(entries):
            ew = f"{where}[{i}]"
            if not isinstance(e, dict):
                raise SchedulerError(f"{self.name}: {ew}: expected an object {{state, choices}}, got {e!r}")
            _keys(self.name, e, ew, {"state", "choices"}, {"memory"}, "{state, choices}")
            s = self.state(e.get("state"), f"{ew}.state")
            mem = e.get("memory", 0)
            if not _is_int(mem) or not 0 <= mem < n_memory:
                raise SchedulerError(f"{self.name}: {ew}.memory: expected an integer in [0, {n_memory}) "
                                     f"({self.decided.shape[0]} memory bit(s)), got {mem!r}")
            if (s, mem) in seen:
                raise SchedulerError(f"{self.name}: {ew}: a second entry for state {e['state']} (memory {mem}); "
                                     f"the first is {where}[{seen[(s, mem)]}]")
            seen[(s, mem)] = i
            cs = e.get("choices")
            if not isinstance(cs, list) or not cs:
                raise SchedulerError(f"{self.name}: {ew}.choices: expected a non-empty list of "
                                     f"{{action, successor, probability}}, got {cs!r}")
            names = [json.dumps(n, sort_keys=True) for n in _names(self.model, s)]
            picked: dict[str, int] = {}
            for j, c in enumerate(cs):
                if not isinstance(c, dict):
                    raise SchedulerError(f"{self.name}: {ew}.choices[{j}]: expected an object")
                _keys(self.name, c, f"{ew}.choices[{j}]", set(), {"action", "successor", "probability", "support"},
                      "{action, successor, probability}")
                named = {"action": c.get("action"), "successor": c.get("successor")}
                if "support" in c:
                    named["support"] = c["support"]
                key = json.dumps(named, sort_keys=True)
                if key not in names:
                    raise SchedulerError(f"{self.name}: {ew}.choices[{j}]: state {e['state']} has no choice "
                                         f"{key}; its choices are {', '.join(names)}")
                if key in picked:
                    raise SchedulerError(f"{self.name}: {ew}.choices[{j}]: the same choice as choices[{picked[key]}]; "
                                         "list each choice once")
                picked[key] = j
                p = c.get("probability")
                if not _is_number(p) or not 0.0 <= p <= 1.0:  # NaN fails the range test too
                    raise SchedulerError(f"{self.name}: {ew}.choices[{j}].probability: expected a number in [0, 1], "
                                         f"got {p!r}")
                choice.append(int(self.model.row_groups[s]) + names.index(key))
                prob.append(float(p))
            if deterministic and len(cs) != 1:
                fix = ", or set kind to randomised" if deterministic.startswith("kind") else ""
                raise SchedulerError(f"{self.name}: {ew}.choices: {deterministic}, but the entry lists {len(cs)} "
                                     f"choices; give one choice with probability 1{fix}")
            states.append(s)
            memory.append(mem)
            indptr.append(len(choice))
        pol = Policy(np.array(states, np.int64), np.array(memory, np.int64), np.array(indptr, np.int64),
                     np.array(choice, np.int64), np.array(prob, float), self.decided)
        try:
            pol.check(self.model)
        except SchedulerError as exc:
            raise SchedulerError(f"{self.name}: {where}: {exc}") from None
        return pol
