"""``Pmin = 0``, ``Pmin = 1`` and ``Pmax = 1`` decided by graph analysis before the kernel
(``single._qualitative_first``): the value equals the kernel's own answer, and the graph's
scheduler is exported, evaluated and keeps the probability at 0 (reaches the target surely), also
through ``mopmc check --export-scheduler`` and ``mopmc evaluate``."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[1] / "engine"))
from mdp_reference import random_mdp  # noqa: E402
from support import run_mopmc  # noqa: E402

from mopmc.engine.evaluate import evaluate
from mopmc.examples.scalable import coin, walk
from mopmc.properties.objectives import Objective, Property
from mopmc.queries import single


def _prop(text: str, sense: str = "min", **kw) -> Property:
    return Property(0, text, None, (Objective(0, text, "probability", sense, right_text='"t"', **kw),), False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 60), frac=st.sampled_from([0.05, 0.3]),
       sense=st.sampled_from(["min", "max"]))
def test_the_graphs_answer_equals_the_kernels(seed, n, frac, sense, monkeypatch):
    rng = np.random.default_rng(seed)
    model = random_mdp(rng, n, 1, absorbing_frac=0.2)
    model = replace(model, labels={**model.labels, "t": rng.random(n) < frac})
    prop = _prop(f'P{sense}=? [F "t"]', sense)
    monkeypatch.setattr(single, "QUALITATIVE_ROUNDS", 10**6)  # (a random model: a few rounds)
    early = single._qualitative_first(model, prop.objectives[0])
    res = single.check(model, prop)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(single, "_qualitative_first", lambda *a: None)
        kernel = single.check(model, prop)
    assert res.value == kernel.value
    decided = (0.0, 1.0) if sense == "min" else (1.0,)
    assert (early is not None) == (kernel.value in decided)
    if early is not None:
        sched = res.scheduler
        assert sched.memoryless and model.initial in set(sched.state.tolist())
        assert evaluate(model, sched, prop.objectives).values[0] == pytest.approx(kernel.value, abs=1e-12)


def test_a_deep_fixpoint_is_left_to_the_kernel(tmp_path, monkeypatch):
    """``Pmax = 1`` is tried for ``QUALITATIVE_ROUNDS`` rounds only: past them, the kernel answers."""
    from mopmc.io.load import load

    path = tmp_path / "coin.prism"
    path.write_text(coin(2, processes=3))
    loaded = load(path, properties='Pmax=? [F "goal"]')
    o = loaded.properties()[0].objectives[0]
    monkeypatch.setattr(single, "QUALITATIVE_ROUNDS", 1)
    assert single._qualitative_first(loaded.model, o) is None
    monkeypatch.setattr(single, "QUALITATIVE_ROUNDS", 10**6)
    assert single._qualitative_first(loaded.model, o) is None  # (its optimum is below 1)


def test_other_formulas_go_to_the_kernel():
    model = random_mdp(np.random.default_rng(3), 10, 1)
    model = replace(model, labels={**model.labels, "t": np.zeros(10, bool)})
    for prop in (_prop('Pmin=? [G !"t"]', negated=True),
                 _prop('Pmin=? [F<=3 "t"]', steps=(0, 3)), _prop('Pmin=? ["u" U "t"]', left_text='"u"')):
        assert single._qualitative_first(model, prop.objectives[0]) is None, prop.text


@pytest.mark.parametrize("text, prop, label, value", [
    (coin(1, processes=3), 'Pmin=? [F "goal"]', "goal", 0.0),
    (coin(1, processes=3), 'Pmax=? [F "finished"]', "finished", 1.0),
    (walk(30), 'Pmin=? [F "goal"]', "goal", 1.0),  # every scheduler reaches it: the first choices
])
def test_cli_exports_the_graphs_scheduler(tmp_path, text, prop, label, value):
    path = tmp_path / "m.prism"
    path.write_text(text)
    out = tmp_path / "s.json"
    r = run_mopmc("check", str(path), "--prop", prop, "--json", "--export-scheduler", str(out))
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)[0]["value"] == value
    r = run_mopmc("evaluate", str(path), "--scheduler", str(out), "--prop", f'P=? [F "{label}"]', "--json")
    assert r.code == 0, r.stderr
    assert json.loads(r.stdout)["values"] == [pytest.approx(value, abs=1e-12)]
