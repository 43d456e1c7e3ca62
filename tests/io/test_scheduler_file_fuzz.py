"""Scheduler files that the fuzzing report (item 11) found accepted: refused in one line naming the
file and the JSON path; and the note when a file's point is not what its scheduler achieves."""

from __future__ import annotations

import copy
import json

import pytest

from support import assert_one_line_error, assert_scheduler_refused, run_mopmc
from mopmc.examples import files
from mopmc.io.load import load
from mopmc.io.scheduler_file import POINT_TOLERANCE, point_note, read_scheduler

PROP = 'multi(R{"time"}<=4 [C], R{"energy"}<=5 [C])'
OBJECTIVES = ['R{"time"}<=4 [C]', 'R{"energy"}<=5 [C]']
CHOICE = {"action": "fast", "successor": None, "probability": 1.0}
RANDOMISED = {"format": "mopmc-scheduler", "version": 1, "model": {"states": 4, "choices": 5, "variables": ["s"]},
              "kind": "randomised", "objectives": OBJECTIVES, "point": [3.0, 4.0],
              "entries": [{"state": {"s": 0}, "choices": [dict(CHOICE, probability=0.5),
                                                          dict(CHOICE, action="slow", probability=0.5)]}]}
MIXTURE = {**{k: v for k, v in RANDOMISED.items() if k != "entries"}, "kind": "mixture",
           "components": [{"weight": 0.5, "entries": [{"state": {"s": 0}, "choices": [CHOICE]}]},
                          {"weight": 0.5, "entries": [{"state": {"s": 0}, "choices": [dict(CHOICE, action="slow")]}]}]}
PARETO = {"format": "mopmc-pareto-schedulers", "version": 1, "model": RANDOMISED["model"],
          "objectives": ['R{"time"}min=? [C]', 'R{"energy"}min=? [C]'], "status": "optimal",
          "schedulers": [{"point": [1.0, 5.0], "entries": MIXTURE["components"][0]["entries"]},
                         {"point": [5.0, 3.0], "entries": MIXTURE["components"][1]["entries"]}],
          "vertices": [{"point": [1.0, 5.0], "components": [{"weight": 1.0, "scheduler": 0}]},
                       {"point": [3.0, 4.0], "components": [{"weight": 0.5, "scheduler": 0},
                                                            {"weight": 0.5, "scheduler": 1}]}]}
#: a binding that table3/convex --binding refuse (the report's binding_bad.json)
BOGUS_BINDING = {"timestep": "nope"}


@pytest.fixture(scope="module")
def tradeoff():
    return load(files.tradeoff, valuations=True).model


BAD = [  # (name, base document, mutation, words of the message)
    ("point shorter than objectives", RANDOMISED, lambda d: d.update(point=[3.0]),
     ["point: 1 value(s) for 2 objective(s)"]),
    ("objectives shorter than point", RANDOMISED, lambda d: d.update(objectives=OBJECTIVES[:1]),
     ["point: 2 value(s) for 1 objective(s)"]),
    ("point missing", RANDOMISED, lambda d: d.pop("point"), ["top level: missing key 'point'"]),
    ("objectives missing", RANDOMISED, lambda d: d.pop("objectives"), ["top level: missing key 'objectives'"]),
    ("objectives empty", RANDOMISED, lambda d: (d.update(objectives=[]), d.update(point=[])),
     ["objectives: expected a non-empty list of formula strings"]),
    ("point null", RANDOMISED, lambda d: d.update(point=None), ["point: expected a list of numbers, got None"]),
    ("a mixture's point too long", MIXTURE, lambda d: d.update(point=[1.0, 2.0, 3.0]),
     ["point: 3 value(s) for 2 objective(s)"]),
    ("a bogus binding", RANDOMISED, lambda d: d.update(binding=BOGUS_BINDING),
     ["binding: missing key(s) actions", "configurations"]),
    ("a binding null", RANDOMISED, lambda d: d.update(binding=None), ["binding: expected an object"]),
    ("a binding for another model", RANDOMISED, lambda d: d.update(binding=_switch_binding()),
     ["binding: variable(s)", "are not variables of the model"]),
    ("a mixture component with two choices", MIXTURE,
     lambda d: d["components"][0]["entries"][0].update(choices=copy.deepcopy(RANDOMISED["entries"][0]["choices"])),
     ["components[0].entries[0].choices", "the components of a mixture are deterministic", "2 choices"]),
    ("a mixture component with a zero-probability second choice", MIXTURE,
     lambda d: d["components"][1]["entries"][0]["choices"].append(dict(CHOICE, probability=0.0)),
     ["components[1].entries[0].choices", "deterministic", "2 choices"]),
    ("model states as a string", RANDOMISED, lambda d: d["model"].update(states="4"),
     ["model.states: expected an integer", "got '4'"]),
    ("model choices as a float", RANDOMISED, lambda d: d["model"].update(choices=5.0),
     ["model.choices: expected an integer", "got 5.0"]),
    ("model states true", RANDOMISED, lambda d: d["model"].update(states=True), ["model.states: expected an integer"]),
    ("model variables a string", RANDOMISED, lambda d: d["model"].update(variables="s"),
     ["model.variables: expected a list of variable names", "got 's'"]),
    ("model without variables", RANDOMISED, lambda d: d["model"].pop("variables"), ["model: missing key 'variables'"]),
]

BAD_PARETO = [  # read with vertex=1
    ("status an integer", lambda d: d.update(status=3), ["status: expected the query's status as a string", "got 3"]),
    ("status null", lambda d: d.update(status=None), ["status: expected", "got None"]),
    ("a scheduler's point too short", lambda d: d["schedulers"][1].update(point=[5.0]),
     ["schedulers[1].point: 1 value(s) for 2 objective(s)"]),
    ("a vertex's point too long", lambda d: d["vertices"][0].update(point=[1.0, 5.0, 0.0]),
     ["vertices[0].point: 3 value(s) for 2 objective(s)"]),
    ("model states as a string", lambda d: d["model"].update(states="4"), ["model.states: expected an integer"]),
]


def _switch_binding():
    from mopmc.design.spec import load_design
    from mopmc.io.scheduler_file import runtime_binding

    return runtime_binding(load_design("paper-switch"))


def _write(tmp_path, doc, name="s.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_the_base_documents_read(tmp_path, tradeoff):
    for name, doc in (("r.json", RANDOMISED), ("m.json", MIXTURE)):
        read_scheduler(_write(tmp_path, doc, name), tradeoff)
    for vertex in (0, 1):
        read_scheduler(_write(tmp_path, PARETO, "p.json"), tradeoff, vertex=vertex)


@pytest.mark.parametrize("name, base, mutate, words", BAD, ids=[b[0] for b in BAD])
def test_malformed_scheduler_files_are_refused(tmp_path, tradeoff, name, base, mutate, words):
    doc = copy.deepcopy(base)
    mutate(doc)
    path = _write(tmp_path, doc)
    assert_scheduler_refused(path, tradeoff, words)


@pytest.mark.parametrize("name, mutate, words", BAD_PARETO, ids=[b[0] for b in BAD_PARETO])
def test_malformed_pareto_files_are_refused(tmp_path, tradeoff, name, mutate, words):
    doc = copy.deepcopy(PARETO)
    mutate(doc)
    path = _write(tmp_path, doc, "p.json")
    assert_scheduler_refused(path, tradeoff, words, vertex=1)


def test_a_fingerprint_of_the_wrong_type_is_not_called_another_model(tmp_path):
    """The report: '"states": "47"' gave 'computed on a model with 47 states ..., this one has 47'."""
    doc = copy.deepcopy(RANDOMISED)
    doc["model"]["states"] = "4"
    r = run_mopmc("evaluate", files.tradeoff, "--scheduler", _write(tmp_path, doc), "--prop", PROP)
    assert_one_line_error(r, "s.json", "model.states: expected an integer", "'4'")
    assert "this one has" not in r.stderr


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d.update(point=[3.0]), ["s.json", "point: 1 value(s) for 2 objective(s)"]),
    (lambda d: d.update(binding=BOGUS_BINDING), ["s.json", "binding: missing key(s) actions"]),
])
def test_evaluate_refuses_them_in_one_line(tmp_path, mutate, words):
    doc = copy.deepcopy(RANDOMISED)
    mutate(doc)
    r = run_mopmc("evaluate", files.tradeoff, "--scheduler", _write(tmp_path, doc), "--prop", PROP)
    assert_one_line_error(r, *words)


def test_the_same_binding_is_refused_by_the_binding_option_and_evaluate(tmp_path):
    """evaluate checks a file's binding as --binding of convex and table3 does (both name the missing keys)."""
    binding = tmp_path / "b.json"
    binding.write_text(json.dumps(BOGUS_BINDING))
    opt = run_mopmc("convex", files.tradeoff, "--prop", PROP, "--export-scheduler", tmp_path / "x.json",
                   "--binding", binding)
    assert_one_line_error(opt, "--binding", "missing key(s) actions, configuration, configurations")
    doc = dict(copy.deepcopy(RANDOMISED), binding=BOGUS_BINDING)
    ev = run_mopmc("evaluate", files.tradeoff, "--scheduler", _write(tmp_path, doc), "--prop", PROP)
    assert_one_line_error(ev, "binding: missing key(s) actions, configuration, configurations")


# ------------------------------------------------------------------------- the point note
META = {"kind": "randomised", "objectives": OBJECTIVES, "point": [3.0, 4.0]}


@pytest.mark.parametrize("objectives, values, fires", [
    (OBJECTIVES, [3.0, 4.0], False),
    (OBJECTIVES, [3.0 + 0.5 * POINT_TOLERANCE, 4.0], False),  # within the tolerance (absolute below 1)
    (OBJECTIVES, [3.0 + 4 * POINT_TOLERANCE, 4.0], True),
    (OBJECTIVES, [0.0, 0.0], True),
    (['R{"time"} <= 4 [ C ]', 'R{"energy"}<=5[C]'], [0.0, 0.0], True),  # the same formulas, spaced otherwise
    (OBJECTIVES[::-1], [0.0, 0.0], False),  # another order: not the file's objectives
    (OBJECTIVES[:1], [0.0], False),
    (['R{"time"}min=? [C]', 'R{"energy"}min=? [C]'], [0.0, 0.0], False),
])
def test_point_note(objectives, values, fires):
    note = point_note("s.json", META, objectives, values)
    assert (note is not None) == fires, note
    if fires:
        assert note.startswith("s.json: ") and "differ from the file's point" in note and "\n" not in note


def test_point_note_is_relative_for_large_values_and_names_the_vertex():
    meta = {"objectives": ["a"], "point": [1e6], "vertex": 2}
    assert point_note("p.json", meta, ["a"], [1e6 * (1 + 0.5 * POINT_TOLERANCE)]) is None
    note = point_note("p.json", meta, ["a"], [1e6 * (1 + 2 * POINT_TOLERANCE)])
    assert note is not None and "(vertex 2)" in note
    inf = {"objectives": ["a"], "point": [float("inf")]}
    assert point_note("p.json", inf, ["a"], [float("inf")]) is None
    assert point_note("p.json", inf, ["a"], [5.0]) is not None


@pytest.mark.parametrize("command, prop, extra", [
    ("check", 'R{"time"}min=? [C]', []),
    ("check", PROP, []),
    ("check", 'multi(R{"time"}min=? [C], R{"energy"}min=? [C])', []),
    ("convex", PROP, []),
    ("convex", PROP, ["--scheduler-kind", "mixture"]),
    ("convex", 'multi(R{"ctrl_cost"}<=1.5 [C], R{"headway_cost"}<=0.2 [C])', ["--loss", "mse", "--target", "1,0.1"]),
])
def test_real_exports_give_back_their_point_without_a_note(tmp_path, command, prop, extra):
    from mopmc.engine.evaluate import evaluate

    model_file = files.mini_switch if "ctrl_cost" in prop else files.tradeoff
    out = tmp_path / "s.json"
    r = run_mopmc(command, model_file, "--prop", prop, "--export-scheduler", out, *extra)
    assert r.code == 0, r.stderr
    loaded = load(model_file, valuations=True, properties=prop)
    objectives = [o for p in loaded.properties(directionless_ok=True) for o in p.objectives]
    doc = json.loads(out.read_text())
    vertices = [None] if doc["format"] == "mopmc-scheduler" else range(len(doc["vertices"]))
    for vertex in vertices:
        sched, meta = read_scheduler(out, loaded.model, vertex=vertex)
        values = evaluate(loaded.model, sched, objectives).values
        assert point_note(out, meta, [o.text for o in objectives], values) is None, (values, meta["point"])
        lie = dict(meta, point=[0.0] * len(values))  # the report's point_lie.json
        assert point_note(out, lie, [o.text for o in objectives], values) is not None


def test_evaluate_notes_a_point_the_scheduler_does_not_give(tmp_path):
    out = tmp_path / "s.json"
    prop = 'R{"time"}min=? [C]'
    assert run_mopmc("check", files.tradeoff, "--prop", prop, "--export-scheduler", out).code == 0
    good = run_mopmc("evaluate", files.tradeoff, "--scheduler", out, "--prop", prop, "--json")
    assert good.code == 0 and good.stderr == "", good.stderr
    doc = json.loads(out.read_text())
    doc["point"] = [0.0]
    out.write_text(json.dumps(doc))
    lie = run_mopmc("evaluate", files.tradeoff, "--scheduler", out, "--prop", prop, "--json")
    assert lie.code == 0 and lie.json()["values"] == good.json()["values"]
    assert lie.stderr_lines == [lie.stderr_lines[0]] and lie.stderr_lines[0].startswith("note: ")
    assert "differ from the file's point" in lie.stderr
