"""Table 1 (agent alone under delays): values match direct simulation, files, resume after a lost episode."""

import csv
import dataclasses
import json

import pytest

from mopmc.errors import ConfigError
from mopmc.runtime.experiments.table1 import Table1Spec, run_table1, setting_name
from mopmc.runtime.simulate import simulate
from mopmc.runtime.sweep import episode_path, small_config

pytest.importorskip("highway_env")

CONFIG = dataclasses.replace(small_config(vehicles=4, duration=5),
                             metrics=dataclasses.replace(small_config().metrics, bootstrap=40))
SPEC = Table1Spec(delays=("0", "0.4", "exp:0.2"), episodes=2, agent="idm", seed=5, config=CONFIG, bootstrap=40)


def test_table1_matches_simulate_and_resumes(tmp_path):
    result = run_table1(tmp_path, SPEC, workers=0, plot=True)
    assert [r.delay for r in result.rows] == ["0", "0.4", "exp:0.2"]
    for row in result.rows:
        direct = simulate(episodes=2, delay=row.delay, switch="none", agent="idm", seed=5, config=CONFIG).summary
        assert row.p10_ttc.value == direct.p10_ttc.value
        assert row.p50_hw.value == direct.p50_headway.value
        assert row.prob_ld.value == direct.prob_lane_departure.value
        assert row.collision_rate == direct.terminated_episodes / 2
        assert row.p10_ttc.low is not None and row.p10_ttc.low <= row.p10_ttc.value <= row.p10_ttc.high
    with (tmp_path / "table1.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert [t["delay"] for t in table] == ["0", "0.4", "exp:0.2"] and "prob_ld_high" in table[0]
    assert json.loads((tmp_path / "table1.json").read_text())["settings"]["episodes"] == 2
    assert (tmp_path / "table1.png").stat().st_size > 0
    assert "| 0.4 |" in (tmp_path / "table1.md").read_text()

    # lose one finished (delay, episode) as if killed before it was written: only it runs again
    lost = episode_path(tmp_path, setting_name("0.4"), 1)
    assert lost.is_file()
    lost.unlink()
    again = run_table1(tmp_path, SPEC, workers=0, plot=False)
    assert again.rows == result.rows
    assert lost.is_file()
    assert not (tmp_path / "table1.png").exists()  # the earlier run's plot is not left beside the new tables


@pytest.mark.parametrize(
    "changes, fragment",
    [({"delays": ()}, "at least one delay"), ({"delays": ("0", "0")}, "repeated delay"),
     ({"delays": ("gamma:1",)}, "unknown delay kind"), ({"episodes": 1}, "--episodes must be >= 2")],
)
def test_bad_table1_settings_are_rejected(changes, fragment):
    with pytest.raises(ConfigError, match=fragment):
        dataclasses.replace(SPEC, **changes).check()


def test_a_trained_agent_runs_at_its_own_policy_frequency(tmp_path):
    model = tmp_path / "agent.zip"
    model.write_bytes(b"")
    (tmp_path / "agent.json").write_text(json.dumps({"interface": {"policy_frequency": 5.0}}))
    spec = dataclasses.replace(SPEC, agent=str(model))
    assert all(s.config.env.policy_frequency == 5.0 for s in spec.settings())
    assert all(s.config.env.policy_frequency == CONFIG.env.policy_frequency for s in SPEC.settings())  # idm


def test_table1_on_ray_gives_the_same_rows(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'mopmc[cluster]')")
    spec = dataclasses.replace(SPEC, delays=("0.4",), episodes=2)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = run_table1(tmp_path / "ray", spec, ray_address="auto", plot=False)
    finally:
        ray.shutdown()
    assert on_ray.rows == run_table1(tmp_path / "local", spec, workers=0, plot=False).rows


@pytest.mark.parametrize("delays, fragment", [
    ("0.1,,0.2", "--delays '0.1,,0.2': an entry is empty"),  # the empty entry was dropped silently
    ("0.1,", "--delays '0.1,': an entry is empty"),
    ("", "--delays: give at least one delay spec"),
])
def test_an_empty_delay_entry_is_refused(delays, fragment):
    with pytest.raises(ConfigError, match=fragment):
        Table1Spec.from_options(delays=delays, episodes=2, agent="idm", vehicles=None, seed=0, config=None, bootstrap=10)
