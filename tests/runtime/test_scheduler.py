import pytest

from mopmc.errors import SchedulerError
from mopmc.runtime.metrics import StepMetrics
from mopmc.runtime.scheduler import load_scheduler

from runtime_support import PRISM_BINDING, choose_entry, exit_entry, scheduler_doc


def test_load_and_lookup(write_json):
    doc = scheduler_doc(
        [choose_entry(0, {1: 0.25, 3: 0.75}), exit_entry(5, 4, 2, 1.0), exit_entry(3, 2, 2, 0.0)],
        kind="randomised",
    )
    s = load_scheduler(write_json(doc))
    assert s.configuration_distribution(0, 0, 0) == ((0, 0.25), (2, 0.75))
    assert s.exit_probability(0, 5, 4, 1, {}) == 1.0
    assert s.exit_probability(0, 3, 2, 1, {}) == 0.0
    assert s.binding.configurations[1].threshold == 0.1


def test_missing_entry_names_the_valuation(write_json):
    s = load_scheduler(write_json(scheduler_doc([choose_entry(0, {1: 1.0})])))
    with pytest.raises(SchedulerError, match=r"tc=7, cc=0, sm=0.*location choose"):
        s.configuration_distribution(0, 7, 0)
    with pytest.raises(SchedulerError, match=r"tc=3, cc=4, conf=2, ss=5"):
        s.exit_probability(0, 3, 4, 1, {})


def test_integer_locations_and_observations(write_json):
    binding = {
        **{k: v for k, v in PRISM_BINDING.items() if k != "locations"},
        "location": "ss",
        "locations": {"choose": {"sm": 0}, "exit_check": 5},
        "observations": {"low_headway": {"variable": "shw", "true": 2, "false": 3, "threshold": 3.0}},
    }
    low = exit_entry(5, 4, 1, 1.0)
    low["state"]["shw"] = 2
    high = exit_entry(5, 4, 1, 0.0)
    high["state"]["shw"] = 3
    doc = scheduler_doc([low, high], kind="randomised", binding=binding)
    doc["model"]["variables"].append("shw")
    s = load_scheduler(write_json(doc))
    assert s.exit_probability(0, 5, 4, 0, s.observations(StepMetrics(9.0, 2.5, False))) == 1.0
    assert s.exit_probability(0, 5, 4, 0, s.observations(StepMetrics(9.0, 3.5, False))) == 0.0


def test_unbound_difference_is_ambiguous(write_json):
    a, b = exit_entry(5, 4, 1, 1.0), exit_entry(5, 4, 1, 0.0)
    a["state"]["shw"], b["state"]["shw"] = 2, 3
    with pytest.raises(SchedulerError, match=r"entries\[1\].*differ only in shw"):
        load_scheduler(write_json(scheduler_doc([a, b], kind="randomised")))


def test_mixture(write_json):
    doc = scheduler_doc([], kind="mixture")
    del doc["entries"]
    doc["components"] = [
        {"weight": 0.5, "entries": [choose_entry(0, {1: 1.0})]},
        {"weight": 0.5, "entries": [choose_entry(0, {4: 1.0})]},
    ]
    s = load_scheduler(write_json(doc))
    assert s.weights == (0.5, 0.5)
    assert s.configuration_distribution(1, 0, 0) == ((3, 1.0),)


def _break(doc, how):
    how(doc)
    return doc


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d.update(format="other"), "format: expected 'mopmc-scheduler'"),
        (lambda d: d.update(version=2), "reads version 1"),
        (lambda d: d.update(kind="optimal"), "kind: expected one of"),
        (lambda d: d.update(extra=1), "unknown key\\(s\\) extra"),
        (lambda d: d["binding"].update(timestep_var="x"), "binding: unknown key\\(s\\) timestep_var"),
        (lambda d: d["binding"].pop("actions"), "binding: missing key\\(s\\) actions"),
        (lambda d: d.update(point=[1.0, 2.0]), "2 values for 1 objectives"),
        (lambda d: d["entries"][0]["choices"][0].update(probability=0.9), "sum to 0.9"),
        (lambda d: d["entries"][0]["choices"][0].update(probability=-1), "must lie in \\[0, 1\\]"),
        (lambda d: d["entries"][0]["choices"][0]["successor"].update(conf=9), "value 9 is not a configuration"),
        (lambda d: d["entries"][0]["state"].pop("tc"), "lacks variable 'tc'"),
        (lambda d: d["binding"].update(timestep="ts"), "ts not in model.variables"),
        (lambda d: d["entries"][1]["choices"][0].update(action="go"), "'go' is neither the stay action"),
        # the checks mopmc evaluate makes too (one set of rules for both readers)
        (lambda d: d["binding"].update(min_consecutive_calls=-3),
         "binding.min_consecutive_calls: expected an integer >= 0, got -3"),
        (lambda d: d["binding"].update(actions={"stay": "re_s", "exit": "re_s"}),
         "binding.actions: stay and exit are the same action"),
        (lambda d: d.update(objectives=[], point=[]), "objectives: expected a non-empty list"),
    ],
)
def test_bad_files_give_one_clear_error(write_json, mutate, fragment):
    doc = scheduler_doc([choose_entry(0, {1: 1.0}), exit_entry(5, 4, 1, 1.0)], kind="randomised")
    with pytest.raises(SchedulerError, match=fragment) as err:
        load_scheduler(write_json(_break(doc, mutate)))
    assert "\n" not in err.value.one_line()


def test_deterministic_needs_probability_one(write_json):
    doc = scheduler_doc([choose_entry(0, {1: 0.5, 2: 0.5})], kind="deterministic")
    with pytest.raises(SchedulerError, match="deterministic scheduler needs one choice"):
        load_scheduler(write_json(doc))


def test_not_json_and_missing_file(write_json, tmp_path):
    with pytest.raises(SchedulerError, match=r"sched.json:1:2: not valid JSON"):
        load_scheduler(write_json("{oops"))
    with pytest.raises(SchedulerError, match="cannot read"):
        load_scheduler(tmp_path / "none.json")
