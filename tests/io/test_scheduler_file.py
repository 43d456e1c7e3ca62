"""Malformed scheduler files and bindings: one SchedulerError naming the file and the key, never a
traceback and never a silently wrong scheduler (a NaN or negative probability, a float state value)."""

from __future__ import annotations

import copy
import json

import pytest

from support import assert_one_line_error, assert_scheduler_refused, run_mopmc
from mopmc.errors import SchedulerError
from mopmc.examples import files
from mopmc.io.load import load
from mopmc.io.scheduler_file import read_scheduler, runtime_binding

PROP = 'multi(R{"time"}<=4 [C], R{"energy"}<=4 [C])'
CHOICES = [{"action": "fast", "successor": None, "probability": 0.5},
           {"action": "slow", "successor": None, "probability": 0.5}]
RANDOMISED = {"format": "mopmc-scheduler", "version": 1, "model": {"states": 4, "choices": 5, "variables": ["s"]},
              "kind": "randomised", "objectives": ['R{"time"}<=4 [C]', 'R{"energy"}<=4 [C]'], "point": [3.0, 4.0],
              "entries": [{"state": {"s": 0}, "choices": CHOICES}]}
MIXTURE = {**{k: v for k, v in RANDOMISED.items() if k != "entries"}, "kind": "mixture",
           "components": [{"weight": 0.5, "entries": [{"state": {"s": 0}, "choices": [dict(CHOICES[0], probability=1.0)]}]},
                          {"weight": 0.5, "entries": [{"state": {"s": 0}, "choices": [dict(CHOICES[1], probability=1.0)]}]}]}


@pytest.fixture(scope="module")
def tradeoff():
    return load(files.tradeoff, valuations=True).model


def _entry(d):
    return d["entries"][0]


BAD = [  # (name, base document, mutation, words of the message)
    ("nan probability", RANDOMISED, lambda d: _entry(d)["choices"][0].update(probability=float("nan")),
     ["entries[0].choices[0].probability", "nan"]),
    ("negative probability summing to 1", RANDOMISED,
     lambda d: (_entry(d)["choices"][0].update(probability=-0.5), _entry(d)["choices"][1].update(probability=1.5)),
     ["choices[0].probability", "-0.5"]),
    ("probability as a string", RANDOMISED, lambda d: _entry(d)["choices"][0].update(probability="0.5"),
     ["choices[0].probability", "'0.5'"]),
    ("missing probability", RANDOMISED, lambda d: _entry(d)["choices"][0].pop("probability"),
     ["choices[0].probability", "None"]),
    ("empty choices", RANDOMISED, lambda d: _entry(d).update(choices=[]), ["entries[0].choices", "non-empty list"]),
    ("choices not a list", RANDOMISED, lambda d: _entry(d).update(choices=5), ["entries[0].choices", "got 5"]),
    ("the same choice twice", RANDOMISED, lambda d: _entry(d)["choices"].__setitem__(1, dict(CHOICES[0])),
     ["choices[1]", "same choice as choices[0]"]),
    ("two entries for a state", RANDOMISED, lambda d: d["entries"].append(copy.deepcopy(_entry(d))),
     ["entries[1]", "second entry", "entries[0]"]),
    ("float state value", RANDOMISED, lambda d: _entry(d).update(state={"s": 0.5}), ["entries[0].state.s", "integer"]),
    ("bool state value", RANDOMISED, lambda d: _entry(d).update(state={"s": True}), ["entries[0].state.s", "True"]),
    ("memory without memory bits", RANDOMISED, lambda d: _entry(d).update(memory=3), ["entries[0].memory", "got 3"]),
    ("memory formula with an unknown label", RANDOMISED, lambda d: d.update(memory=['"nolabel"']),
     ["memory[0]", "nolabel"]),
    ("entries not a list", RANDOMISED, lambda d: d.update(entries="x"), ["entries: expected a list"]),
    ("an entry not an object", RANDOMISED, lambda d: d.update(entries=[3]), ["entries[0]: expected an object"]),
    ("entries missing", RANDOMISED, lambda d: d.pop("entries"), ["missing key 'entries'"]),
    ("model not an object", RANDOMISED, lambda d: d.update(model=[4, 5]), ["model: expected an object"]),
    ("version true", RANDOMISED, lambda d: d.update(version=True), ["not a mopmc-scheduler version 1 file"]),
    ("point not numbers", RANDOMISED, lambda d: d.update(point="x"), ["point: expected a list of numbers"]),
    ("point with NaN", RANDOMISED, lambda d: d.update(point=[float("nan"), 4.0]),
     ["point[0]: expected a finite number", "nan"]),
    ("deterministic with two choices", RANDOMISED, lambda d: d.update(kind="deterministic"),
     ["entries[0].choices", "deterministic", "2 choices"]),
    ("mixture weight as a string", MIXTURE, lambda d: d["components"][0].update(weight="0.5"),
     ["components[0].weight", "'0.5'"]),
    ("mixture weight true", MIXTURE, lambda d: d["components"][0].update(weight=True), ["components[0].weight", "True"]),
    ("mixture weights negative", MIXTURE,
     lambda d: (d["components"][0].update(weight=-0.5), d["components"][1].update(weight=1.5)),
     ["components: weights must be >= 0"]),
    ("mixture components not a list", MIXTURE, lambda d: d.update(components={"a": 1}), ["components:", "non-empty list"]),
    ("mixture component not an object", MIXTURE, lambda d: d.update(components=[1]), ["components[0]: expected an object"]),
    ("mixture component entries not a list", MIXTURE, lambda d: d["components"][0].update(entries="x"),
     ["components[0].entries: expected a list"]),
    # unknown keys are errors, by name (docs/formats.md), as in the runtime's reader
    ("unknown top-level key", RANDOMISED, lambda d: d.update(colour="red"),
     ["top level: unknown key(s) colour; allowed:", "entries"]),
    ("unknown model key", RANDOMISED, lambda d: d["model"].update(colour="red"), ["model: unknown key(s) colour"]),
    ("unknown entry key", RANDOMISED, lambda d: _entry(d).update(colour="red"), ["entries[0]: unknown key(s) colour"]),
    ("unknown choice key", RANDOMISED, lambda d: _entry(d)["choices"][1].update(colour="red"),
     ["entries[0].choices[1]: unknown key(s) colour"]),
    ("unknown component key", MIXTURE, lambda d: d["components"][1].update(colour="red"),
     ["components[1]: unknown key(s) colour"]),
    ("mixture with entries", MIXTURE, lambda d: d.update(entries=[]), ["a mixture has 'components'", "no 'entries'"]),
    ("randomised with components", RANDOMISED, lambda d: d.update(components=[]), ["'entries' and no 'components'"]),
    ("another format", RANDOMISED, lambda d: d.update(format="mopmc-deterministic-scheduler"),
     ["not a mopmc-scheduler version 1 file"]),
    ("a Pareto file without a vertex", RANDOMISED,
     lambda d: (d.clear(), d.update(copy.deepcopy(PARETO))),
     ["Pareto file with 2 vertices", "--vertex I (0 to 1)"]),
]

PARETO = {"format": "mopmc-pareto-schedulers", "version": 1, "model": RANDOMISED["model"],
          "objectives": RANDOMISED["objectives"], "status": "optimal",
          "schedulers": [{"point": [1.0, 5.0], "entries": MIXTURE["components"][0]["entries"]},
                         {"point": [5.0, 3.0], "entries": MIXTURE["components"][1]["entries"]}],
          "vertices": [{"point": [1.0, 5.0], "components": [{"weight": 1.0, "scheduler": 0}]},
                       {"point": [3.0, 4.0], "components": [{"weight": 0.5, "scheduler": 0},
                                                            {"weight": 0.5, "scheduler": 1}]}]}
BAD_PARETO = [  # read with vertex=1
    ("vertex out of range", lambda d: d["vertices"].pop(), ["--vertex 1", "1 vertices (0 to 0)"]),
    ("scheduler index out of range", lambda d: d["vertices"][0]["components"][0].update(scheduler=2),
     ["vertices[0].components[0].scheduler", "0 to 1", "got 2"]),
    ("scheduler index a float", lambda d: d["vertices"][1]["components"][0].update(scheduler=0.0),
     ["vertices[1].components[0].scheduler", "got 0.0"]),
    ("weights not summing to 1", lambda d: d["vertices"][1]["components"][0].update(weight=0.2),
     ["vertices[1].components: weights must be >= 0 and sum to 1"]),
    ("unknown vertex key", lambda d: d["vertices"][1].update(colour="red"), ["vertices[1]: unknown key(s) colour"]),
    ("unknown top-level key", lambda d: d.update(kind="mixture"), ["top level: unknown key(s) kind"]),
    ("a vertex without components", lambda d: d["vertices"][0].pop("components"),
     ["vertices[0]: missing key 'components'"]),
    ("a scheduler point not numbers", lambda d: d["schedulers"][1].update(point="x"),
     ["schedulers[1].point: expected a list of numbers"]),
    ("two choices in a vertex scheduler", lambda d: d["schedulers"][1].update(entries=RANDOMISED["entries"]),
     ["schedulers[1].entries[0].choices", "deterministic"]),
    ("no vertices", lambda d: d.update(vertices=[]), ["vertices: expected a non-empty list"]),
]


def test_the_base_documents_read(tmp_path, tradeoff):
    for name, doc in (("r.json", RANDOMISED), ("m.json", MIXTURE)):
        (tmp_path / name).write_text(json.dumps(doc))
        read_scheduler(tmp_path / name, tradeoff)


@pytest.mark.parametrize("name, base, mutate, words", BAD, ids=[b[0] for b in BAD])
def test_malformed_scheduler_files_name_the_key(tmp_path, tradeoff, name, base, mutate, words):
    doc = copy.deepcopy(base)
    mutate(doc)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    assert_scheduler_refused(path, tradeoff, words)


def test_a_pareto_file_reads_each_vertex(tmp_path, tradeoff):
    from mopmc.engine.evaluate import Mixture, Policy

    path = tmp_path / "p.json"
    path.write_text(json.dumps(PARETO))
    first, meta = read_scheduler(path, tradeoff, vertex=0)
    assert isinstance(first, Policy) and meta == {"kind": "deterministic", "objectives": PARETO["objectives"],
                                                  "point": [1.0, 5.0], "vertex": 0, "vertices": 2}
    mix, meta = read_scheduler(path, tradeoff, vertex=1)
    assert isinstance(mix, Mixture) and mix.weights.tolist() == [0.5, 0.5] and meta["kind"] == "mixture"
    assert [int(p.choice[0]) for p in mix.policies] == [int(tradeoff.row_groups[0]), int(tradeoff.row_groups[0]) + 1]
    with pytest.raises(SchedulerError, match="one scheduler .*leave out --vertex"):
        (tmp_path / "r.json").write_text(json.dumps(RANDOMISED))
        read_scheduler(tmp_path / "r.json", tradeoff, vertex=0)


@pytest.mark.parametrize("name, mutate, words", BAD_PARETO, ids=[b[0] for b in BAD_PARETO])
def test_malformed_pareto_files_name_the_key(tmp_path, tradeoff, name, mutate, words):
    doc = copy.deepcopy(PARETO)
    mutate(doc)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert_scheduler_refused(path, tradeoff, words, vertex=1)


def test_a_binary_file_is_one_error(tmp_path, tradeoff):
    path = tmp_path / "s.json"
    path.write_bytes(bytes(range(128, 256)))
    with pytest.raises(SchedulerError, match="not a text file"):
        read_scheduler(path, tradeoff)


def test_evaluate_refuses_a_nan_probability(tmp_path):
    path = tmp_path / "s.json"
    doc = copy.deepcopy(RANDOMISED)
    doc["entries"][0]["choices"][0]["probability"] = float("nan")  # json writes NaN, Python's reader takes it
    path.write_text(json.dumps(doc))
    r = run_mopmc("evaluate", files.tradeoff, "--scheduler", path, "--prop", PROP, "--json")
    assert_one_line_error(r, "s.json", "probability", "nan")


def test_export_into_a_folder_or_with_a_bad_binding_is_one_error(tmp_path):
    (tmp_path / "dir").mkdir()
    r = run_mopmc("convex", files.tradeoff, "--prop", PROP, "--export-scheduler", tmp_path / "dir")
    assert_one_line_error(r, "--export-scheduler", "dir", "is a directory")  # checked before the model is built
    assert not list(tmp_path.glob("*.tmp"))
    r = run_mopmc("convex", files.tradeoff, "--prop", PROP, "--export-scheduler", tmp_path / "s.json",
                  "--binding", "paper-switch")
    assert_one_line_error(r, "--binding", "not variables of the model")
    binding = tmp_path / "b.json"
    binding.write_text(json.dumps({"timestep": "s"}))
    r = run_mopmc("convex", files.tradeoff, "--prop", PROP, "--export-scheduler", tmp_path / "s.json",
                  "--binding", binding)
    assert_one_line_error(r, "--binding", "missing key(s)", "actions")


def test_a_broken_design_binding_document_names_the_key():
    from mopmc.design.spec import load_design

    doc = {"format": "mopmc-switch-binding/1", "metrics": [], "timestep": "tc", "consecutive_calls": "cc",
           "configuration": "conf", "location": "SW0_loc", "locations": ["s0", "ss_exit"], "n": 8, "k": 4, "recorders": {},
           "configurations": [{"index": 1}]}
    with pytest.raises(SchedulerError, match=r"configurations\[0\]: expected an object \{index, name, t, controller\}"):
        runtime_binding(doc)
    with pytest.raises(SchedulerError, match="locations: expected a list of location names"):
        runtime_binding({**doc, "locations": ["a"]})
    assert runtime_binding(load_design("paper-switch"))["min_consecutive_calls"] == 4


def test_evaluate_checks_the_binding_as_the_runtime_does(tmp_path):
    """A negative k or one action for stay and exit: refused by mopmc evaluate as by rt simulate."""
    binding = {"timestep": "tc", "consecutive_calls": "cc", "configuration": "conf",
               "locations": {"choose": {"sm": 0}, "exit_check": {"ss": 5}}, "actions": {"stay": "re_s", "exit": "ex_s"},
               "configurations": [{"name": "C1", "t": 0.2, "controller": 1}]}
    for change, words in (({"min_consecutive_calls": -3}, ["binding.min_consecutive_calls", "integer >= 0", "-3"]),
                          ({"actions": {"stay": "re_s", "exit": "re_s"}}, ["binding.actions", "the same action"])):
        path = tmp_path / "s.json"
        path.write_text(json.dumps({**RANDOMISED, "binding": {**binding, **change}}))
        r = run_mopmc("evaluate", files.tradeoff, "--scheduler", path, "--prop", PROP, "--missing", "first")
        assert_one_line_error(r, "s.json", *words)
