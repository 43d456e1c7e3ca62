import pytest

from runtime_support import choose_entry, exit_entry, scheduler_doc

pytest.importorskip("highway_env")

from mopmc.runtime.config import parse_config  # noqa: E402
from mopmc.runtime.simulate import result_to_dict, simulate  # noqa: E402

CONFIG = parse_config({"env": {"duration": 6, "max_substep": 0.0667}, "metrics": {"bootstrap": 0}})


def test_scheduler_file_runs_in_highway_env(write_json):
    # Round 0 picks C3 (controller 2, t = 0.2); the 0.3 s delay sends it to the secondary, which may
    # exit at the first allowed check (k = 1); later rounds pick C2.
    entries = [choose_entry(0, {3: 1.0})] + [choose_entry(t, {2: 1.0}) for t in range(1, 6)]
    entries += [exit_entry(t, cc, conf, 1.0 if cc == 1 else 0.0) for t in range(1, 7) for cc in (0, 1) for conf in range(1, 5)]
    path = write_json(scheduler_doc(entries, k=1))
    result = simulate(episodes=1, delay="0.3", switch=str(path), agent="idm", vehicles=2, seed=1, config=CONFIG)
    log = result.episodes[0].records
    assert (log[0].configuration, log[0].controller, log[0].hold) == ("C3", "2", 0.2)
    for prev, rec in zip(log, log[1:]):
        if prev.exited or prev.controller == "primary":
            assert rec.configuration == "C2" and rec.controller == "1"  # re-chosen: C2 -> controller 1
        else:
            assert rec.configuration == prev.configuration
        if rec.exit_allowed:
            assert rec.exited == (rec.cc == 1)
    assert result_to_dict(result)["settings"]["min_consecutive_calls"] == 1


def test_no_switch_is_primary_only():
    result = simulate(episodes=1, delay="0.05", switch="none", agent="idm", vehicles=2, seed=0, config=CONFIG)
    doc = result_to_dict(result)
    assert doc["controller_cost"] == 1.0 and doc["secondary_share"] == 0.0
