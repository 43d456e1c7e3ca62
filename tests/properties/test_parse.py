import numpy as np
import pytest

from mopmc.errors import PropertyError, UnknownNameError
from mopmc.examples import files
from mopmc.io.load import load
from mopmc.properties.states import state_mask


def parse(text, model=files.mini_switch):
    return load(model, properties=text).properties()


def test_total_reward_forms():
    (p,) = parse('R{"ctrl_cost"}min=? [C]')
    (o,) = p.objectives
    assert p.kind == "value" and not p.multi
    assert (o.kind, o.sense, o.reward_model, o.is_query) == ("total_reward", "min", "ctrl_cost", True)
    (o,) = parse('R{"ttc_cost"}max=? [C]')[0].objectives
    assert o.sense == "max"
    # a bound alone is asked of every scheduler (PRISM, Storm): <= checks the maximum, >= the minimum
    (o,) = parse('R{"ttc_cost"}<=0.5 [C]')[0].objectives
    assert (o.sense, o.comparison, o.threshold) == ("max", "<=", 0.5)
    (o,) = parse('R{"ttc_cost"}>=0.5 [C]')[0].objectives
    assert (o.sense, o.comparison, o.threshold) == ("min", ">=", 0.5)
    # inside multi(...) of some scheduler: <= is to be minimised, >= maximised
    (p,) = parse('multi(R{"ttc_cost"}<=0.5 [C], R{"ctrl_cost"}>=0.5 [C])')
    assert [(o.sense, o.comparison) for o in p.objectives] == [("min", "<="), ("max", ">=")]
    (o,) = parse('R{"ttc_cost"}max>=0.5 [C]')[0].objectives
    assert (o.sense, o.comparison) == ("max", ">=")
    (o,) = parse('R{"ttc_cost"}min<=0.5 [C]')[0].objectives
    assert (o.sense, o.comparison) == ("min", "<=")


def test_unnamed_reward():
    (o,) = parse("Rmin=? [C]", files.robot)[0].objectives
    assert o.reward_model == "steps"
    with pytest.raises(PropertyError, match="ambiguous.*3 reward models"):
        parse("Rmin=? [C]")


def test_probability_forms():
    m = load(files.robot, properties='Pmax=? [F "goal"]; Pmin=? [!"hazard" U "goal"]; P>=0.5 [G !"hazard"]; R{"steps"}min=? [F "goal"]')
    fev, until, glob, reach = m.properties()
    model = m.model
    goal, hazard = model.labels["goal"], model.labels["hazard"]
    assert fev.objectives[0].kind == "probability"
    np.testing.assert_array_equal(fev.objectives[0].target_mask(model), goal)
    np.testing.assert_array_equal(fev.objectives[0].hold_mask(model), np.ones(model.n_states, bool))
    np.testing.assert_array_equal(until.objectives[0].hold_mask(model), ~hazard)
    g = glob.objectives[0]
    assert g.negated and g.threshold == 0.5 and g.sense == "min"  # P>=0.5 alone: every scheduler, the minimum
    np.testing.assert_array_equal(g.target_mask(model), hazard)
    r = reach.objectives[0]
    assert (r.kind, r.reward_model) == ("reach_reward", "steps")


def test_threshold_expressions_are_exact():
    (o,) = parse('P>=1-0.0312 [F "finished"]')[0].objectives
    assert o.threshold == 1 - 0.0312 or abs(o.threshold - 0.9688) < 1e-15
    assert o.threshold == 0.9688


def test_expression_atoms_become_masks():
    loaded = load(files.robot, properties='Pmax=? [F x=3 & !"hazard"]')
    (o,) = loaded.properties()[0].objectives
    mask = o.target_mask(loaded.model)
    assert mask.sum() == 1


def test_multi_kinds_in_order():
    ps = parse(
        'multi(R{"ctrl_cost"}<=2 [C], R{"ttc_cost"}<=0.1 [C]);'
        'multi(R{"ctrl_cost"}min=? [C], R{"ttc_cost"}<=0.1 [C]);'
        'multi(R{"ctrl_cost"}min=? [C], R{"ttc_cost"}min=? [C], R{"headway_cost"}<=0.3 [C])'
    )
    assert [p.kind for p in ps] == ["achievability", "numerical", "pareto"]
    assert [o.reward_model for o in ps[2].objectives] == ["ctrl_cost", "ttc_cost", "headway_cost"]
    assert [o.index for o in ps[2].objectives] == [0, 1, 2]


def test_unknown_names():
    with pytest.raises(UnknownNameError, match="unknown reward model 'nope'.*ctrl_cost"):
        parse('R{"nope"}min=? [C]')
    with pytest.raises((UnknownNameError, PropertyError), match="nope"):
        parse('Pmax=? [F "nope"]')


def test_malformed():
    with pytest.raises(PropertyError):
        parse('multi(R{"ctrl_cost"}min=? [C]')
    with pytest.raises(PropertyError):
        parse("this is not a property")
    with pytest.raises(PropertyError, match="not a non-negative integer"):
        parse('Pmax=? [F<=5/2 "finished"]')


def test_state_mask_parser():
    labels = {"a": np.array([1, 1, 0, 0], bool), "b": np.array([0, 1, 1, 0], bool), "(x = 1)": np.array([0, 0, 0, 1], bool)}
    assert state_mask('("a" & !"b")', labels, 4).tolist() == [True, False, False, False]
    assert state_mask('"a" | (x = 1)', labels, 4).tolist() == [True, True, False, True]
    assert state_mask('!("a" | "b")', labels, 4).tolist() == [False, False, False, True]
    assert state_mask("true", labels, 4).all()
    with pytest.raises(UnknownNameError, match="unknown label 'c'"):
        state_mask('"c"', labels, 4)
