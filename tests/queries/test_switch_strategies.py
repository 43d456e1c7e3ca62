"""The fixed switch strategies of Table 3 on models that are not switch models, or switch models
without any exit choice (an episode shorter than the lock, n <= k)."""

import numpy as np
import pytest

from support import assert_one_line_error, run_mopmc

from mopmc.engine.evaluate import evaluate
from mopmc.errors import UnknownNameError
from mopmc.model.sparse_mdp import SparseMDP, StateValuations
from mopmc.properties.objectives import Objective
from mopmc.queries.switch_strategies import configurations, switch_strategy


def _choose(action_names=("", "conf"), conf_action=1, valuations=True, name="conf"):
    """State 0 picks conf=1 (state 1, cost 1) or conf=2 (state 2, cost 3); both then stop (self-loop)."""
    vals = StateValuations((name,), ("int",), np.array([[0], [1], [2]], np.int64)) if valuations else None
    return SparseMDP.from_arrays([0, 2, 3, 4], [0, 1, 2, 3, 4], [1, 2, 1, 2], [1.0] * 4,
                                 rewards={"cost": [1.0, 3.0, 0.0, 0.0]}, action_names=action_names,
                                 actions=[conf_action, conf_action, 0, 0], valuations=vals, source="choose.nm")


def test_configurations_and_strategies_of_a_switch_without_exit_choices():
    model = _choose()  # no 'ex_s' action at all: Storm's build of a switch with n <= k
    assert configurations(model) == [1, 2]
    obj = (Objective(0, 'R{"cost"}min=? [C]', "total_reward", "min", "cost"),)
    assert evaluate(model, switch_strategy(model, 1), obj).values[0] == pytest.approx(1.0)
    assert evaluate(model, switch_strategy(model, 2), obj).values[0] == pytest.approx(3.0)
    assert evaluate(model, switch_strategy(model, "uniform"), obj).values[0] == pytest.approx(2.0)


@pytest.mark.parametrize("model, words", [
    (_choose(valuations=False), "configuration variable 'conf'"),
    (_choose(name="mode"), "configuration variable 'conf'"),
    (_choose(action_names=("", "pick")), "choices labelled 'conf'; the model's actions are pick"),
    (_choose(action_names=("", "conf"), conf_action=0), "no choice is labelled 'conf'"),
])
def test_not_a_switch_model_is_a_named_error(model, words):
    for call in (lambda: configurations(model), lambda: switch_strategy(model, 1)):
        with pytest.raises(UnknownNameError, match="not a switch model") as info:
            call()
        assert "choose.nm" in str(info.value) and words in str(info.value)


REWARDS = "\n".join(f'rewards "{r}"\n  [pick] true : 1;\nendrewards'
                    for r in ("ctrl_cost", "headway_cost", "lane_dep_cost", "ttc_cost"))


def test_table3_on_a_model_without_conf_choices_is_one_line(tmp_path):
    """The switch's rewards and configuration variable, but its configuration choices are called 'pick'."""
    path = tmp_path / "pick.prism"
    path.write_text("mdp\nmodule m\n  conf : [0..2] init 0;\n  [pick] conf=0 -> (conf'=1);\n"
                    "  [pick] conf=0 -> (conf'=2);\n  [] conf>0 -> true;\nendmodule\n" + REWARDS + "\n")
    res = run_mopmc("table3", str(path), "--no-storm", "--export-scheduler", "")
    assert_one_line_error(res, "pick.prism", "not a switch model", "'conf'")


def test_table3_on_a_non_switch_model_is_one_line():
    assert_one_line_error(run_mopmc("table3", "example:dice", "--no-storm", "--export-scheduler", ""),
                          "example:dice", "not a switch model")
