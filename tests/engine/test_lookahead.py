"""Policy iteration's look-ahead (``mopmc.engine.policy_iteration.LOOKAHEAD``): each round tries the
greedy policy of a few Bellman sweeps, kept only where it is proper.

On the shared-coin consensus protocol the strict rule alone took about 190 rounds per block (the
values of many states tie, and ties keep the start policy); with the look-ahead a handful. The
answers stay those of the strict rule, of the exact LP engine and of Storm's exact engine."""

from fractions import Fraction

import numpy as np
import pytest

import mopmc.engine.policy_iteration as pi
from mopmc.engine.kernel import Engine
from mopmc.engine.lp import lp_value
from mopmc.examples.scalable import coin
from mopmc.io.load import load
from mopmc.model.sparse_mdp import SparseMDP
from mopmc.properties.objectives import Objective
from mopmc.queries.single import check

PROPS = ['Pmax=? [F "goal"]', 'Pmin=? [F "goal"]', 'R{"r"}min=? [F "finished"]']


@pytest.fixture(scope="module")
def small_coin(tmp_path_factory):
    path = tmp_path_factory.mktemp("coin") / "coin.prism"
    path.write_text(coin(2, processes=3))
    return path


def _rounds(monkeypatch) -> list[int]:
    """Record every block's rounds (as :meth:`CyclicBlock.solve` returns them)."""
    seen: list[int] = []
    solve = pi.CyclicBlock.solve

    def counting(self, *args, **kwargs):
        chosen, rounds = solve(self, *args, **kwargs)
        seen.append(rounds)
        return chosen, rounds

    monkeypatch.setattr(pi.CyclicBlock, "solve", counting)
    return seen


@pytest.mark.parametrize("prop", PROPS)
def test_coin_values_equal_the_strict_rule_and_the_lp(small_coin, prop, monkeypatch):
    loaded = load(small_coin, properties=prop)
    p = loaded.properties()[0]
    rounds = _rounds(monkeypatch)
    fast = check(loaded.model, p).value
    with_lookahead = list(rounds)
    monkeypatch.setattr(pi, "LOOKAHEAD", 0)
    rounds.clear()
    strict = check(loaded.model, p).value
    assert fast == pytest.approx(strict, rel=1e-12, abs=1e-13)
    assert fast == pytest.approx(lp_value(loaded.model, p.objectives[0]), rel=1e-6, abs=1e-9)
    assert sum(with_lookahead) <= sum(rounds)  # (Pmin = 0 here: decided before any block)


def test_coin_pmax_takes_few_rounds(small_coin, monkeypatch):
    loaded = load(small_coin, properties=PROPS[0])
    p = loaded.properties()[0]
    rounds = _rounds(monkeypatch)
    check(loaded.model, p)
    fast = list(rounds)
    monkeypatch.setattr(pi, "LOOKAHEAD", 0)
    rounds.clear()
    check(loaded.model, p)
    assert max(fast) <= 6 < max(rounds)  # (the strict rule: one round per step the ties take)


def test_coin_pmax_is_storms_exact_value(small_coin):
    import stormpy

    prog = stormpy.parse_prism_program(str(small_coin))
    props = stormpy.parse_properties(PROPS[0], prog)
    model = stormpy.build_model[stormpy.Rational](prog, props)
    res = stormpy.model_checking(model, props[0], only_initial_states=True, environment=stormpy.environments.exact())
    exact = float(Fraction(str(res.get_value(model.initial_states[0]))))
    loaded = load(small_coin, properties=PROPS[0])
    assert check(loaded.model, loaded.properties()[0]).value == pytest.approx(exact, rel=1e-12)


# A cycle of weighted reward 0 that the greedy policy closes on ties: state 0 goes to 1 (c0) or
# leaves with "a" 1 (c1); state 1 goes back to 0 (d0) or leaves with "a" 0.5 (d1); "b" costs 1 on
# the cycle. With weight (1, 0) the optimum is 1 at both states, reached by c1 at 0 and by either
# choice at 1; the first maxima (c0, d0) close the cycle and would make "b" infinite.
TIES = SparseMDP.from_arrays(
    np.array([0, 2, 4, 5], np.int64), np.array([0, 1, 2, 3, 4, 5], np.int64),
    np.array([1, 2, 0, 2, 2], np.int64), np.ones(5),
    rewards={"a": np.array([0.0, 1.0, 0.0, 0.5, 0.0]), "b": np.array([1.0, 0.0, 1.0, 0.0, 0.0])},
)
TIES_OBJECTIVES = (
    Objective(0, 'R{"a"}max=? [C]', "total_reward", "max", "a"),
    Objective(1, 'R{"b"}min=? [C]', "total_reward", "min", "b"),
)


def _record_proper(monkeypatch, block_class) -> list[bool]:
    """Record every answer of ``block_class._proper`` (the greedy tries' properness checks)."""
    taken: list[bool] = []
    proper = block_class._proper

    def recording(self, pol):
        ok = proper(self, pol)
        taken.append(ok)
        return ok

    monkeypatch.setattr(block_class, "_proper", recording)
    return taken


def test_an_improper_greedy_policy_is_not_taken(monkeypatch):
    taken = _record_proper(monkeypatch, pi.CyclicBlock)
    eng = Engine(TIES, TIES_OBJECTIVES)
    res = eng.optimise(np.array([1.0, 0.0]) * eng.orientation.direction)
    assert np.isfinite(res.values).all()
    assert res.values[0] == pytest.approx(1.0, abs=1e-12)
    assert res.values[1] == pytest.approx(0.0, abs=1e-12)  # c1 at once: no cost
    assert taken and not taken[0]  # the greedy try (c0, d0) was refused


def test_torch_blocks_look_ahead_as_the_cpu_engine(small_coin, monkeypatch):
    torch = pytest.importorskip("torch")  # noqa: F841
    import mopmc.engine.torch_cyclic as tc
    from mopmc.engine.torch_engine import TorchEngine

    taken = _record_proper(monkeypatch, tc.DeviceBlock)
    eng = TorchEngine(TIES, TIES_OBJECTIVES, "cpu")
    res = eng.optimise(np.array([1.0, 0.0]) * eng.orientation.direction)
    assert res.values == pytest.approx([1.0, 0.0], abs=1e-12)
    assert taken and not taken[0]
    for prop in PROPS:
        loaded = load(small_coin, properties=prop)
        p = loaded.properties()[0]
        cpu = check(loaded.model, p).value
        assert check(loaded.model, p, engine="torch", device="cpu").value == pytest.approx(cpu, rel=1e-9, abs=1e-9)
