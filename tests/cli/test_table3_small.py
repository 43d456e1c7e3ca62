"""``mopmc table3`` on the switch built with a short episode (n = 2 < k = 4), as PRISM and as UMB.

With n <= k the switch never leaves the secondary: Storm's build of the PRISM export has no ``ex_s``
choice and so no ``ex_s`` action name (the UMB keeps the unused name); table3 used to reject the
PRISM model for it. Oracle: Storm on the exported PRISM text itself (not our loader): the minima
and achievability directly, each fixed strategy on a copy whose ``conf`` commands are replaced by
the strategy's (what nondeterminism remains, the interleaving of recorder steps, must not change a
value: Storm's min and max agree).
"""

import json
import re

import numpy as np
import pytest

from support import SWITCH_REWARDS, run_mopmc

stormpy = pytest.importorskip("stormpy")

MO = (1.9, 0.22, 0.169, 0.035)
MO2 = (2.0, 0.23, 0.174, 0.04)
CONF = re.compile(r"^  \[conf\] SW0_loc = 0 -> \(SW0_loc'=1\) & \(conf'=(\d)\);\n", re.M)


def _multi(bounds):
    return "multi(" + ", ".join(f'R{{"{r}"}}<={b}[ C ]' for r, b in zip(SWITCH_REWARDS, bounds)) + ")"


def _storm(path, props: str) -> list:
    prog = stormpy.parse_prism_program(str(path), prism_compatibility=True)
    formulas = stormpy.parse_properties(props, prog)
    built = stormpy.build_model(prog, formulas)
    init = built.initial_states[0]
    out = []
    for f in formulas:
        res = stormpy.model_checking(built, f, only_initial_states=True)
        out.append(res.get_value(init) if hasattr(res, "get_value") else bool(res[init]))
    return out


def _fixed(text: str, probs: dict[int, float], out):
    """The PRISM text with the configuration choice replaced by one command: conf = i w.p. probs[i]."""
    found = [int(m.group(1)) for m in CONF.finditer(text)]
    assert found == [1, 2, 3, 4], found  # the export's shape this oracle relies on
    update = " + ".join(f"{p} : (SW0_loc'=1) & (conf'={i})" for i, p in probs.items())
    body = CONF.sub("", text, count=3)
    out.write_text(CONF.sub(f"  [conf] SW0_loc = 0 -> {update};\n", body, count=1))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sw-n2")
    paths = {}
    for ext in ("prism", "umb"):
        res = run_mopmc("design", "build", "paper-switch", "--n", "2", "--out", str(folder / f"sw.{ext}"))
        assert res.code == 0, res.stderr
        paths[ext] = folder / f"sw.{ext}"
    assert "ex_s" in paths["prism"].read_text()  # exported, but never enabled (cc cannot reach k)
    return folder, paths


@pytest.fixture(scope="module")
def oracle(built):
    """Storm's values on the PRISM export: direct rows, minima, achievability."""
    folder, paths = built
    text = paths["prism"].read_text()
    both = ";".join(f'R{{"{r}"}}min=? [C]; R{{"{r}"}}max=? [C]' for r in SWITCH_REWARDS)
    direct = {}
    for name, probs in [*((f"C{i}", {i: 1.0}) for i in range(1, 5)), ("uniform", {i: 0.25 for i in range(1, 5)})]:
        vals = np.array(_storm(_fixed(text, probs, folder / f"{name}.prism"), both))
        np.testing.assert_allclose(vals[::2], vals[1::2], rtol=1e-12)  # nothing else to decide
        direct[name] = vals[::2]
    minima = _storm(paths["prism"], ";".join(f'R{{"{r}"}}min=? [C]' for r in SWITCH_REWARDS))
    achievable = [_storm(paths["prism"], _multi(b))[0] for b in (MO, MO2)]
    return direct, np.array(minima), achievable


@pytest.mark.parametrize("ext", ["prism", "umb"])
def test_table3_on_n2_agrees_with_storm(built, oracle, ext):
    folder, paths = built
    direct, minima, achievable = oracle
    res = run_mopmc("table3", str(paths[ext]), "--json", "--export-scheduler", str(folder / f"sched-{ext}.json"))
    assert res.code == 0, res.stderr
    out = res.json()
    assert out["objectives"] == list(SWITCH_REWARDS)
    assert [d["strategy"] for d in out["direct"]] == ["C1", "C2", "C3", "C4", "uniform"]
    for row in out["direct"]:
        np.testing.assert_allclose(row["values"], direct[row["strategy"]], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(row["storm"], direct[row["strategy"]], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose([m["value"] for m in out["minima"]], minima, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose([m["storm"] for m in out["minima"]], minima, rtol=1e-9, atol=1e-12)
    assert [a["achievable"] for a in out["achievability"]] == achievable == [False, True]
    assert [a["storm"] for a in out["achievability"]] == achievable
    sched = out["scheduler"]
    assert sched["path"] and json.loads((folder / f"sched-{ext}.json").read_text())
    np.testing.assert_allclose(sched["evaluated"], sched["storm"], rtol=1e-9, atol=1e-12)
    # the binding design build wrote beside the model makes it a runtime file, although the model has
    # no ex_s choice (n <= k: the runtime never asks to leave the secondary); it was refused for that
    from mopmc.runtime.scheduler import load_scheduler

    assert sched["runtime"] is True and sched["note"] is None, sched
    assert load_scheduler(str(folder / f"sched-{ext}.json")).episode_steps == 2
    # the convex query's point is achievable: no coordinate below the single-objective minimum
    assert np.all(np.array(out["convex_soft"]["point"]) >= minima - 1e-7)


def test_table3_text_with_and_without_storm(built):
    """The text output puts Storm's answer beside ours; with --no-storm it drops the Storm column
    and lines instead of printing '| -' and 'Storm on its chain -' for answers never asked."""
    folder, paths = built
    res = run_mopmc("table3", str(paths["umb"]), "--export-scheduler", "", cwd=folder)
    assert res.code == 0, res.stderr
    text = " ".join(res.stdout.split())  # (rich wraps lines)
    assert "ours | Storm" in text and "Storm on its chain (" in text
    res = run_mopmc("table3", str(paths["umb"]), "--no-storm", "--export-scheduler", "", cwd=folder)
    assert res.code == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "| -" not in text and "Storm" not in text.replace("--no-storm", "")
    assert re.search(r"mixing \d+ deterministic scheduler(s)?\)", text)
