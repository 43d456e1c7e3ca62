from collections import Counter

import pytest

from mopmc.errors import SchedulerError
from mopmc.runtime.controllers import CONTROLLER_1, CONTROLLER_2
from mopmc.runtime.delay import parse_delay_spec
from mopmc.runtime.episode import episode_seeds, run_episode
from mopmc.runtime.policy import SchedulerPolicy, parse_switch
from mopmc.runtime.scheduler import load_scheduler
from mopmc.runtime.switch import DEFAULT_CONFIGURATIONS

from runtime_support import ConstantAgent, FakeWorld, choose_entry, exit_entry, scheduler_doc

CONTROLLERS = {"1": CONTROLLER_1, "2": CONTROLLER_2}


def run(world, switch, delay="0.15", k=4, seed=0, episode=0):
    policy = parse_switch(switch, DEFAULT_CONFIGURATIONS) if isinstance(switch, str) else switch
    return run_episode(
        world, ConstantAgent(), parse_delay_spec(delay), episode_seeds(seed, episode), episode=episode,
        policy=policy, controllers=CONTROLLERS, k=k,
    )


def test_no_switch_holds_the_delay():
    world = FakeWorld(3)
    result = run(world, "none", delay="0.3")
    assert [r.controller for r in result.records] == ["primary"] * 3
    assert world.applied == [(0.3, "primary"), (1.3, "primary"), (2.3, "primary")]


def test_delay_longer_than_the_period_stretches_the_step():
    world = FakeWorld(2)
    result = run(world, "none", delay="1.5")
    assert world.applied == [(1.5, "primary"), (3.0, "primary")]
    assert [r.time for r in result.records] == [1.5, 3.0]


def test_fixed_configuration_log_shows_lock_and_exit():
    world = FakeWorld(8)
    result = run(world, "C2", delay="0.15", k=2)  # t = 0.1 <= 0.15: secondary
    log = [(r.controller, r.cc, r.exit_allowed, r.exited, r.hold) for r in result.records]
    assert log[:4] == [
        ("1", 0, False, False, 0.1), ("1", 1, False, False, 0.0), ("1", 2, True, True, 0.0),
        ("1", 0, False, False, 0.1),
    ]
    assert world.applied[0] == (0.1, "secondary")


def test_exit_condition_false_keeps_secondary():
    world = FakeWorld(8, headways=[0.5] * 8)  # below the 1.2 s exit headway
    result = run(world, "C4", delay="0.15", k=1)
    assert all(r.controller == "2" for r in result.records)
    assert [r.cc for r in result.records] == [0, 1, 1, 1, 1, 1, 1, 1]
    assert not any(r.exit_allowed for r in result.records)


def test_scheduler_file_is_followed_exactly(write_json):
    # k = 1; fixed delay 0.15: C1/C3 (t = 0.2) -> primary, C2/C4 (t = 0.1) -> secondary.
    entries = [
        choose_entry(0, {1: 1.0}), choose_entry(1, {3: 1.0}), choose_entry(2, {2: 1.0}),
        exit_entry(4, 1, 2, 0.0),   # exit allowed at tc=4: scheduler says stay
        exit_entry(5, 1, 2, 1.0),   # then exit
        choose_entry(5, {4: 1.0}),
        exit_entry(7, 1, 4, 1.0),
        choose_entry(7, {1: 1.0}),
    ]
    policy = SchedulerPolicy(load_scheduler(write_json(scheduler_doc(entries, k=1))))
    world = FakeWorld(8)
    log = run(world, policy, delay="0.15", k=1).records
    got = [(r.step, r.configuration, r.controller, r.cc, r.exit_allowed, r.exited) for r in log]
    assert got == [
        (0, "C1", "primary", None, None, None),
        (1, "C3", "primary", None, None, None),
        (2, "C2", "1", 0, False, False),
        (3, "C2", "1", 1, True, False),
        (4, "C2", "1", 1, True, True),
        (5, "C4", "2", 0, False, False),
        (6, "C4", "2", 1, True, True),
        (7, "C1", "primary", None, None, None),
    ]
    assert [t for t, _ in world.applied] == [0.15, 1.15, 2.1, 3.0, 4.0, 5.1, 6.0, 7.15]


def test_randomised_scheduler_frequencies(write_json):
    entries = [choose_entry(t, {1: 0.25, 3: 0.75}) for t in range(4)]
    policy = SchedulerPolicy(load_scheduler(write_json(scheduler_doc(entries, kind="randomised"))))
    counts = Counter()
    for e in range(100):
        for r in run(FakeWorld(4), policy, delay="0.0", episode=e).records:
            counts[r.configuration] += 1
    assert set(counts) == {"C1", "C3"}
    assert counts["C1"] / 400 == pytest.approx(0.25, abs=0.06)


def test_missing_scheduler_entry_is_a_clear_error(write_json):
    policy = SchedulerPolicy(load_scheduler(write_json(scheduler_doc([choose_entry(0, {1: 1.0})]))))
    with pytest.raises(SchedulerError, match=r"tc=1, cc=0"):
        run(FakeWorld(3), policy, delay="0.0")


def test_same_seed_same_log_and_delay_stream_independent_of_switch():
    a = run(FakeWorld(10), "uniform", delay="exp:0.2", seed=4)
    b = run(FakeWorld(10), "uniform", delay="exp:0.2", seed=4)
    c = run(FakeWorld(10), "none", delay="exp:0.2", seed=4)
    assert a == b
    assert [r.delay for r in a.records] == [r.delay for r in c.records]
    assert len({r.configuration for r in run(FakeWorld(40), "uniform", delay="0.0").records}) == 4
