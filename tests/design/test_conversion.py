"""Validation of the paper's assumption, composition, both probability providers, rewards."""

import math
import re

import numpy as np
import pytest
from design_helpers import delay_switch

from mopmc.design import (DelayDistribution, Edge, Network, ProbabilityModel, ProbabilityTable, RewardItem,
                          TimedAutomaton, Variable, convert)
from mopmc.design.guards import Guard
from mopmc.errors import ConfigError, InvalidModelError
from mopmc.model import validate


def _choices(model, state):
    return [model.action_of(c) for c in range(model.row_groups[state], model.row_groups[state + 1])]


def test_branching_state_gets_one_tau_step_with_delay_probabilities():
    net, prov = delay_switch(0.2)
    m = validate(convert(net, prov).model)
    assert _choices(m, 0) == ["tau"]
    lo = m.indptr[0]
    probs = sorted(m.probs[m.indptr[0]:m.indptr[1]].tolist())
    assert probs == pytest.approx(sorted([1 - math.exp(-1), math.exp(-1)]), abs=1e-15)
    # the obs edge leads to a fresh state that takes obs; the tau edge goes straight to its target
    names = [m.valuations.of(int(t))["S_loc"] for t in m.targets[lo:m.indptr[1]]]
    locs = convert(net, prov).layout.locations["S_loc"]
    assert sorted(locs[i] for i in names) == ["sec", "wait~obs"]


def test_truncated_delay_distribution():
    d = DelayDistribution("z", scale=0.2, truncate=2.0)
    p = d.interval_probability(0.1, math.inf)
    assert p == pytest.approx((math.exp(-0.5) - math.exp(-10)) / (1 - math.exp(-10)), abs=1e-15)
    assert d.interval_probability(0.0, 2.0) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="scale"):
        DelayDistribution("z", scale=0)


def test_choice_state_keeps_its_actions_and_single_edges_are_deterministic():
    a = TimedAutomaton("A", ("s", "t", "u"), "s", edges=(Edge("s", "t", "left"), Edge("s", "u", "right"), Edge("t", "s", None)))
    m = convert(Network((a,))).model
    assert _choices(m, 0) == ["left", "right"]
    assert m.n_transitions == m.n_choices  # all deterministic; u has no move and gets a self-loop
    u = [s for s in range(m.n_states) if m.valuations.of(s)["A_loc"] == 2][0]
    assert list(m.targets[m.indptr[m.row_groups[u]]:m.indptr[m.row_groups[u] + 1]]) == [u]


def test_overlapping_guards_are_an_error_naming_state_and_guards():
    a = TimedAutomaton("A", ("s", "t"), "s", clocks=("z",),
                       edges=(Edge("s", "t", None, clocks=("z < 0.1",)), Edge("s", "t", None, clocks=("z < 0.2",))))
    with pytest.raises(InvalidModelError, match=r"state \(A_loc=s\).*z < 0.1.*z < 0.2.*neither exclusive nor equivalent"):
        convert(Network((a,)), DelayDistribution("z"))


def test_equivalent_and_exclusive_mixed_is_an_error():
    a = TimedAutomaton("A", ("s", "t"), "s", edges=(
        Edge("s", "t", "x", events=("ok",)), Edge("s", "t", "y", events=("ok",)), Edge("s", "t", "w", events=("!ok",))))
    with pytest.raises(InvalidModelError, match="mixed guards"):
        convert(Network((a,)), ProbabilityTable.from_rows([{"guard": "ok", "p": 0.5}]))


@pytest.mark.parametrize("edges, gap", [
    # a clock branching where one edge also needs an event: its complement swallowed the !exit_ok case
    ((Edge("s", "t", "go", clocks=("z < 0.1",)), Edge("s", "u", "go", clocks=("z >= 0.1",), events=("exit_ok",))),
     "z >= 0.1 & !exit_ok"),
    # a lone edge on an event was taken with probability 1, its table row unused
    ((Edge("s", "t", "go", events=("exit_ok",)),), "!exit_ok"),
    ((Edge("s", "t", "go", clocks=("z < 0.1",), events=("exit_ok",)),
      Edge("s", "u", "go", clocks=("z >= 0.1",), events=("exit_ok",))), "z < 0.1 & !exit_ok"),
])
def test_an_event_value_without_an_edge_is_an_error(edges, gap):
    """Found by a walkthrough: the build gave Pr(z >= 0.1 & exit_ok) = 1 - Pr(z < 0.1) = 0.61, not
    0.61 x 0.3, silently. The guards of a state must cover each value of their events."""
    a = TimedAutomaton("A", ("s", "t", "u"), "s", clocks=("z",), edges=edges)
    prov = ProbabilityModel((ProbabilityTable.from_rows([{"guard": "exit_ok", "p": 0.3}]), DelayDistribution("z")))
    with pytest.raises(InvalidModelError, match=rf"state \(A_loc=s\): A: no edge covers {re.escape(gap)} among"):
        convert(Network((a,)), prov)


def test_events_with_both_values_and_clock_gaps_are_fine():
    """Each value of the event has an edge; a clock region no edge waits for lets time pass."""
    a = TimedAutomaton("A", ("s", "t", "u", "v"), "s", clocks=("z",), edges=(
        Edge("s", "t", "go", clocks=("z < 0.1",)),
        Edge("s", "u", "go", clocks=("z >= 0.2",), events=("exit_ok",)),
        Edge("s", "v", "go", clocks=("z >= 0.2",), events=("!exit_ok",))))
    table = ProbabilityTable.from_rows([{"guard": "z >= 0.2 & exit_ok", "p": 0.3}, {"guard": "z >= 0.2 & !exit_ok", "p": 0.2}])
    m = validate(convert(Network((a,)), ProbabilityModel((table, DelayDistribution("z")))).model)
    assert sorted(m.probs[m.indptr[0]:m.indptr[1]].tolist()) == pytest.approx([0.2, 0.3, 0.5])


def test_errors_only_for_reachable_states():
    a = TimedAutomaton("A", ("s", "never"), "s", clocks=("z",),
                       edges=(Edge("never", "s", None, clocks=("z < 0.1",)), Edge("never", "s", None, clocks=("z < 0.2",))))
    assert convert(Network((a,))).model.n_states == 1


def test_table_probabilities_by_condition_and_complement():
    a = TimedAutomaton("A", ("s", "good", "bad"), "s", variables=(Variable("m", 1, 2, 1),), edges=(
        Edge("s", "good", None, events=("!fail",)), Edge("s", "bad", None, events=("fail",)),
        Edge("bad", "s", None, when="m = 1", updates={"m": "2"})))
    table = ProbabilityTable.from_rows([{"guard": "fail", "when": "m = 1", "p": 0.25}, {"guard": "fail", "when": "m = 2", "p": 0.5}])
    m = convert(Network((a,)), table).model
    first = sorted(m.probs[m.indptr[0]:m.indptr[1]].tolist())
    assert first == [0.25, 0.75]
    with pytest.raises(InvalidModelError, match="no probability"):
        convert(Network((a,)), ProbabilityTable.from_rows([{"guard": "fail", "when": "m = 1", "p": 0.25}]))


def test_probabilities_outside_range_or_not_summing_to_one():
    with pytest.raises(ConfigError, match=r"outside \[0, 1\]"):
        ProbabilityTable.from_rows([{"guard": "ok", "p": 1.5}])
    a = TimedAutomaton("A", ("s", "t"), "s", edges=(Edge("s", "t", None, events=("ok",)), Edge("s", "t", None, events=("!ok",))))
    table = ProbabilityTable.from_rows([{"guard": "ok", "p": 0.5}, {"guard": "!ok", "p": 0.6}])
    with pytest.raises(InvalidModelError, match="sum to 1.1"):
        convert(Network((a,)), table)
    with pytest.raises(ConfigError, match="unknown key"):
        ProbabilityTable.from_rows([{"guard": "ok", "prob": 0.5}])


def test_synchronisation_blocks_and_interleaves():
    # B has 'go' in its alphabet but only enables it when ready; its tau step interleaves with A's
    a = TimedAutomaton("A", ("a0", "a1"), "a0", edges=(Edge("a0", "a1", "go"),))
    b = TimedAutomaton("B", ("b0", "b1", "b2"), "b0", edges=(Edge("b0", "b1", None), Edge("b1", "b2", "go")))
    m = convert(Network((a, b))).model
    assert _choices(m, 0) == ["tau"]  # go is blocked until B is ready
    vals = {tuple(m.valuations.values[s]) for s in range(m.n_states)}
    assert vals == {(0, 0), (0, 1), (1, 2)}


def test_sync_takes_every_combination_of_enabled_edges():
    a = TimedAutomaton("A", ("a0", "a1", "a2"), "a0", edges=(Edge("a0", "a1", "go"), Edge("a0", "a2", "go")))
    b = TimedAutomaton("B", ("b0", "b1", "b2"), "b0", edges=(Edge("b0", "b1", "go"), Edge("b0", "b2", "go")))
    m = convert(Network((a, b))).model
    assert _choices(m, 0) == ["go"] * 4


def test_components_write_only_their_own_variables():
    a = TimedAutomaton("A", ("s",), "s", variables=(Variable("x", 0, 1, 0),))
    with pytest.raises(ConfigError, match="not its own variable"):
        TimedAutomaton("B", ("s",), "s", edges=(Edge("s", "s", "go", updates={"x": "1"}),))
    b = TimedAutomaton("B", ("s", "t"), "s", edges=(Edge("s", "t", None, when="x = 0"),))  # reading is fine
    assert convert(Network((a, b))).model.n_states == 2


def test_rewards_per_action_and_condition():
    net, prov = delay_switch(0.2)
    m = convert(net, prov).model
    r = m.rewards["cost"]
    acts = np.array([m.action_of(c) for c in range(m.n_choices)])
    assert set(r[acts == "act_p"]) == {1.0} and set(r[acts == "act_s"]) == {2.0}
    assert set(r[(acts != "act_p") & (acts != "act_s")]) == {0.0}
    with pytest.raises(ConfigError, match="unknown action 'nope'"):
        Network(net.components, {"bad": (RewardItem("nope", 1.0),)})


def test_out_of_range_update_is_reported():
    a = TimedAutomaton("A", ("s",), "s", variables=(Variable("x", 0, 2, 0),), edges=(Edge("s", "s", None, updates={"x": "x + 1"}),))
    with pytest.raises(InvalidModelError, match=r"sets x out of its range \[0, 2\]"):
        convert(Network((a,)))


def test_guard_parse_rejects_nonsense():
    with pytest.raises(ConfigError, match="clock constraint"):
        Guard.parse(["z << 1"])
    with pytest.raises(ConfigError, match="unbounded"):
        Variable("x", None, 3)
    assert ProbabilityModel(()).probability(Guard.parse(events=["a"]), {}, 1) is None
