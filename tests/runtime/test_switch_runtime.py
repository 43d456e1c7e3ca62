import numpy as np
import pytest

from mopmc.runtime.switch import DEFAULT_CONFIGURATIONS, Location, SwitchMachine

C1, C2, C3, C4 = DEFAULT_CONFIGURATIONS


def enter_secondary(m: SwitchMachine) -> None:
    m.select(C1)
    assert m.dispatch(0.5) == ("secondary", 0.2)  # d >= t: time out at t
    m.complete_step()


def test_primary_path_returns_to_choose():
    m = SwitchMachine(k=4)
    m.select(C1)
    assert m.dispatch(0.19) == ("primary", 0.19)
    m.complete_step()
    assert m.state == (Location.CHOOSE, 1, 0, None)
    assert m.needs_configuration


def test_threshold_is_inclusive():
    m = SwitchMachine(k=4)
    m.select(C2)
    assert m.dispatch(0.1).controller == "secondary"


@pytest.mark.parametrize("k", [0, 1, 4])
def test_k_call_lock_holds_even_when_exit_condition_is_true(k):
    m = SwitchMachine(k=k)
    enter_secondary(m)
    calls = 1
    while not m.check_exit(True):
        assert m.state.consecutive_calls < k
        m.resolve(False)
        assert m.dispatch(0.0) == ("secondary", 0.0)
        m.complete_step()
        calls += 1
    assert calls == k + 1 and m.state.consecutive_calls == k
    m.resolve(True)
    assert m.state == (Location.CHOOSE, k + 1, 0, None)


def test_exit_only_when_allowed():
    m = SwitchMachine(k=0)
    enter_secondary(m)
    assert m.check_exit(False) is False
    with pytest.raises(RuntimeError, match="not allowed"):
        m.resolve(True)


def test_secondary_ignores_delay_and_keeps_configuration():
    m = SwitchMachine(k=2, secondary_delay=0.01)
    enter_secondary(m)
    m.check_exit(True)
    m.resolve(False)
    assert m.dispatch(0.0) == ("secondary", 0.01)
    assert m.state.configuration == C1
    with pytest.raises(RuntimeError):
        m.select(C2)


def test_random_runs_keep_the_invariants():
    rng = np.random.default_rng(5)
    k = 3
    m = SwitchMachine(k=k)
    run = 0
    for _ in range(2000):
        if m.needs_configuration:
            m.select(DEFAULT_CONFIGURATIONS[int(rng.integers(4))])
        was_secondary = m.state.location is Location.SECONDARY
        dispatch = m.dispatch(float(rng.exponential(0.2)))
        m.complete_step()
        if dispatch.controller == "primary":
            assert not was_secondary and run == 0
            continue
        run += 1
        cc = m.state.consecutive_calls
        phi = bool(rng.random() < 0.5)
        allowed = m.check_exit(phi)
        assert allowed == (phi and cc == k)
        assert cc == min(run - 1, k)
        choose_exit = allowed and bool(rng.random() < 0.5)
        m.resolve(choose_exit)
        if choose_exit:
            assert run >= k + 1
            run = 0
