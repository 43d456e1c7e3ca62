"""Parameter estimation on logs sampled from a known switch MDP (the design layer's paper-switch)."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mopmc.cli.design import app as design_app
from mopmc.cli.rt import app
from mopmc.design.build import build_design, convert_design
from mopmc.design.params import MetricProbability, load_parameters
from mopmc.design.spec import switch_design
from mopmc.design.switch import SW0_LOCATIONS
from mopmc.errors import ConfigError
from mopmc.runtime.episode import EpisodeResult, StepRecord
from mopmc.runtime.estimate import (
    Score, clopper_pearson, estimate_parameters, load_logs, proportion, reference_scores, wilson,
)
from mopmc.runtime.simulate import write_log
from mopmc.runtime.switch import DEFAULT_CONFIGURATIONS

N, K = 10, 4
TTC_SCORE, HW_SCORE = 14.4638, 3.971
BAD, GOOD = 2, 3  # recorder locations idle, observed, bad, good


def _truth():
    """Table 3 with distinct primary/secondary metric probabilities, so per-controller estimation matters."""
    p = load_parameters("table3").with_n(N)
    confs = []
    for i, c in enumerate(p.configurations):
        m = dict(c.metrics)
        m["ttc"] = MetricProbability(m["ttc"].primary, 0.25 + 0.05 * i)
        m["hw"] = MetricProbability(m["hw"].primary, 0.05 + 0.1 * i)
        confs.append(dataclasses.replace(c, metrics=m))
    return dataclasses.replace(p, configurations=tuple(confs))


def sample_switch_logs(params, episodes: int, rng: np.random.Generator) -> list[EpisodeResult]:
    """Runs of the switch MDP's Markov chain under "uniform configuration, exit when allowed",
    written as runtime step records (metric values on the bad/good side of the scores)."""
    model = convert_design(switch_design(params)).model
    names = model.valuations.names
    loc = {x: i for i, x in enumerate(SW0_LOCATIONS)}
    scale = params.delay.scale
    out = []
    for e in range(episodes):
        s, records, time = model.initial, [], 0.0
        while len(records) < params.n:
            v = dict(zip(names, model.valuations.values[s]))
            choices = list(range(model.row_groups[s], model.row_groups[s + 1]))
            actions = [model.action_of(c) for c in choices]
            if v["SW0_loc"] == loc["s0"]:
                choice = choices[int(rng.integers(len(choices)))]
            elif "ex_s" in actions:
                choice = choices[actions.index("ex_s")]
            else:
                choice = choices[0]
            action = model.action_of(choice)
            if action in ("ex_p", "ex_s", "re_s"):
                conf = params.configurations[v["conf"] - 1]
                secondary = action != "ex_p"
                previous = records[-1] if records else None
                entered = secondary and (previous is None or previous.controller == "primary" or bool(previous.exited))
                # a delay consistent with the branch: exponential, conditioned on d >= t or d < t
                if not secondary:
                    d = -scale * math.log(1 - rng.random() * (1 - math.exp(-conf.t / scale)))
                else:
                    d = (conf.t if entered else 0.0) + rng.exponential(scale)
                cond = v["SW0_loc"] == loc["ss_exit"] if secondary else None
                time += 1.0
                records.append(StepRecord(
                    e, len(records), time, d, conf.t if entered else (d if not secondary else 0.0),
                    f"C{v['conf']}", str(conf.controller) if secondary else "primary",
                    int(v["cc"]) if secondary else None, cond,
                    (cond and v["cc"] == params.k) if secondary else None, (action == "ex_s") if secondary else None,
                    TTC_SCORE / 2 if v["TTC_loc"] == BAD else (math.inf if v["TTC_loc"] == GOOD and rng.random() < 0.5 else 2 * TTC_SCORE),
                    HW_SCORE * 0.9 if v["HW_loc"] == BAD else HW_SCORE * 1.1,
                    bool(v["LD_loc"] == BAD), 2 if secondary else 1,
                ))
            lo, hi = model.indptr[choice], model.indptr[choice + 1]
            s = int(rng.choice(model.targets[lo:hi], p=model.probs[lo:hi]))
        out.append(EpisodeResult(e, tuple(records), False))
    return out


@pytest.fixture(scope="module")
def estimated(tmp_path_factory):
    truth = _truth()
    episodes = sample_switch_logs(truth, 2500, np.random.default_rng(2026))
    log = tmp_path_factory.mktemp("logs") / "switch.csv"
    write_log(log, episodes)
    logs = load_logs([log])
    docs = {level: estimate_parameters(logs, DEFAULT_CONFIGURATIONS, n=N, k=K,
                                       ttc=Score(TTC_SCORE, "P10", {"run": "given"}),
                                       hw=Score(HW_SCORE, "P50", {"run": "given"}), level=level)
            for level in (0.95, 0.999)}
    return truth, log, docs


def _pairs(truth, doc):
    """(name, true value, estimate entry) for every estimated probability."""
    est = doc["provenance"]["estimates"]
    for c in truth.configurations:
        e = est[c.name]
        yield f"{c.name}.enter", c.enter, e["enter"]
        yield f"{c.name}.exit", c.exit, e["exit"]
        for m, p in c.metrics.items():
            yield f"{c.name}.{m}.primary", p.primary, e["metrics"][m]["primary"]
            yield f"{c.name}.{m}.secondary", p.secondary, e["metrics"][m]["secondary"]


def test_confidence_intervals_contain_the_true_probabilities(estimated) -> None:
    truth, _, docs = estimated
    pairs = list(_pairs(truth, docs[0.95]))
    assert len(pairs) == 4 * (2 + 3 * 2)
    missed = [name for name, p, e in pairs if not e["ci"][0] <= p <= e["ci"][1]]
    # 32 Clopper-Pearson intervals with coverage >= 95%: expect <= 1.6 misses; > 4 has chance < 3%
    assert len(missed) <= 4, missed
    wide_missed = [name for name, p, e in _pairs(truth, docs[0.999]) if not e["ci"][0] <= p <= e["ci"][1]]
    assert wide_missed == []  # Bonferroni: P(any of 32 misses) <= 3.2%
    for name, p, e in pairs:
        assert e["trials"] > 200, name
        assert abs(e["value"] - p) < 5 * math.sqrt(p * (1 - p) / e["trials"]) + 1e-9, name


def test_estimated_file_builds_the_switch(estimated, tmp_path: Path) -> None:
    truth, log, _ = estimated
    out = tmp_path / "params.yaml"
    result = CliRunner().invoke(app, ["estimate", str(log), "--out", str(out), "--ttc-score", str(TTC_SCORE),
                                      "--hw-score", str(HW_SCORE), "--n", str(N)])
    assert result.exit_code == 0, result.output
    params = load_parameters(out)
    assert [c.name for c in params.configurations] == [c.name for c in truth.configurations]
    assert params.configurations[2].metrics["hw"].secondary == pytest.approx(0.25, abs=0.05)
    model = tmp_path / "sw.prism"
    built = CliRunner().invoke(design_app, ["build", "paper-switch", "--params", str(out), "--out", str(model)])
    assert built.exit_code == 0, built.output
    # the built model's entry branch carries the estimated probability
    m = build_design("paper-switch", params=out).model
    probs = set(np.round(m.probs, 12))
    assert round(params.configurations[0].enter, 12) in probs
    assert round(params.configurations[0].exit, 12) in probs


def test_reference_run_scores_and_provenance(tmp_path: Path) -> None:
    recs = [StepRecord(0, i, float(i + 1), 0.1, 0.1, None, "primary", None, None, None, None,
                       float(t), float(h), False, 1) for i, (t, h) in enumerate([(math.inf, 1.0), (3.0, math.inf), (7.0, 2.0), (1.0, 4.0)])]
    log = tmp_path / "ref.csv"
    write_log(log, [EpisodeResult(0, tuple(recs), False)])
    ttc, hw = reference_scores(load_logs([log]), "no-switch")
    assert ttc.value == pytest.approx(np.percentile([100.0, 3.0, 7.0, 1.0], 10))
    assert hw.value == pytest.approx(np.percentile([1.0, 100.0, 2.0, 4.0], 50))
    assert ttc.provenance["run"] == "no-switch" and ttc.provenance["steps"] == 4
    with pytest.raises(ConfigError, match="no switch steps"):
        estimate_parameters(load_logs([log]), DEFAULT_CONFIGURATIONS, n=4, k=4, ttc=ttc, hw=hw)


def test_interval_methods_cover_at_their_level() -> None:
    rng = np.random.default_rng(5)
    for method in ("clopper-pearson", "wilson"):
        hits = 0
        for _ in range(2000):
            k = int(rng.binomial(60, 0.2))
            p = proportion(k, 60, method)
            hits += p.low <= 0.2 <= p.high
        assert hits / 2000 > 0.93, method  # nominal 95% (Wilson can dip slightly below)
    assert clopper_pearson(0, 10)[0] == 0.0 and clopper_pearson(10, 10)[1] == 1.0
    lo, hi = wilson(5, 10)
    assert lo < 0.5 < hi and hi - 0.5 == pytest.approx(0.5 - lo)


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    r = CliRunner().invoke(app, ["estimate", str(bad), "--out", str(tmp_path / "p.yaml"), "--ttc-score", "1", "--hw-score", "1"])
    assert r.exit_code == 2 and "not a runtime step log" in r.output
    r = CliRunner().invoke(app, ["estimate", str(bad), "--out", str(tmp_path / "p.yaml")])
    assert r.exit_code == 2 and "not a runtime step log" in r.output  # the log's defect before a missing option
    recs = [StepRecord(0, i, float(i + 1), 0.1, 0.1, None, "primary", None, None, None, None, 5.0, 2.0, False, 1)
            for i in range(3)]
    good = tmp_path / "good.csv"
    write_log(good, [EpisodeResult(0, tuple(recs), False)])
    r = CliRunner().invoke(app, ["estimate", str(good), "--out", str(tmp_path / "p.yaml")])
    assert r.exit_code == 2 and "--reference" in r.output
    for args, words in (([str(tmp_path / "nonexist")], "nonexist: log not found"),  # asked for --reference first
                        ([str(good), "--ttc-score", "1", "--hw-score", "1", "--ci", "foo"], "--ci 'foo': unknown interval"),
                        ([str(good), "--ttc-score", "1", "--hw-score", "1", "--level", "1.5"], "--level 1.5: the confidence")):
        r = CliRunner().invoke(app, ["estimate", *args, "--out", str(tmp_path / "p.yaml")])
        assert r.exit_code == 2 and words in r.output and r.output.count("\n") == 1, r.output
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text('{"format": 5}')
    r = CliRunner().invoke(app, ["estimate", str(sweep), "--out", str(tmp_path / "p.yaml")])
    assert r.exit_code == 2 and "sweep.json is a sweep manifest" in r.output and "readable sweep episode file" not in r.output
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("change, words", [
    # the runtime never writes these; they were counted as given
    ({"controller": "zzz"}, "controller: unknown controller 'zzz' (known: primary, 1, 2"),
    ({"ttc": -7.0}, "ttc: expected a number >= 0, got -7.0"),
    ({"cost": 9}, "cost: expected 2 for a secondary step, got 9"),
    ({"cc": -4}, "cc: expected a number >= 0, got -4"),
])
def test_step_records_the_runtime_cannot_write_are_refused(tmp_path: Path, change, words) -> None:
    recs = [StepRecord(0, 0, 1.0, 0.1, 0.1, "C1", "primary", None, None, None, None, 5.0, 2.0, False, 1),
            StepRecord(0, 1, 2.0, 0.3, 0.2, "C1", "1", 0, True, False, False, 5.0, 2.0, False, 2)]
    recs[1] = recs[1]._replace(**change)
    log = tmp_path / "s.csv"
    write_log(log, [EpisodeResult(0, tuple(recs), False)])
    r = CliRunner().invoke(app, ["estimate", str(log), "--out", str(tmp_path / "p.yaml"), "--ttc-score", "1",
                                 "--hw-score", "1"])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert f"s.csv:3: bad step record ({words}" in r.output


def test_a_log_given_twice_or_copied_is_refused(tmp_path: Path) -> None:
    """A walkthrough found 'estimate t4 t4' pooled 72 episodes from 36, narrowing the intervals."""
    recs = [StepRecord(0, i, float(i + 1), 0.1, 0.1, None, "primary", None, None, None, None, 5.0, 2.0, False, 1)
            for i in range(3)]
    log = tmp_path / "a.csv"
    write_log(log, [EpisodeResult(0, tuple(recs), False)])
    with pytest.raises(ConfigError, match=r"a.csv: this log is given twice; give each log once"):
        load_logs([log, tmp_path / "." / "a.csv"])
    (tmp_path / "b.csv").write_bytes(log.read_bytes())
    with pytest.raises(ConfigError, match=r"b.csv: the same content as .*a.csv, a copy of the same episodes"):
        load_logs([log, tmp_path / "b.csv"])


def test_notes_on_a_switched_reference_and_a_shorter_csv(estimated, tmp_path: Path) -> None:
    """A switched run as the reference, and a CSV whose longest episode is shorter than n, were taken
    silently (a walkthrough): both are said on stderr; the estimate still runs."""
    _, log, _ = estimated
    short = tmp_path / "short.csv"
    recs = [StepRecord(0, i, float(i + 1), 0.1, 0.1, None, "primary", None, None, None, None, 5.0, 2.0, False, 1)
            for i in range(3)]
    write_log(short, [EpisodeResult(0, tuple(recs), False)])
    r = CliRunner().invoke(app, ["estimate", str(log), str(short), "--out", str(tmp_path / "p.yaml"),
                                 "--reference", str(log)])
    assert r.exit_code == 0, r.output
    assert re.search(r"note: reference run .*switch.csv switches \(C1, C2, C3, C4 at \d+ of \d+ steps\)", r.stderr)
    assert f"note: {short}: its longest episode has 3 steps, fewer than n = {N}" in r.stderr
    r = CliRunner().invoke(app, ["estimate", str(log), "--out", str(tmp_path / "p.yaml"), "--reference", str(short)])
    assert r.exit_code == 0 and "note:" not in r.stderr, r.output
