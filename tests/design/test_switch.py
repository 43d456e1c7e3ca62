"""The paper's SW2: the Table 3 model, round trips through Storm, the family of sizes."""

from pathlib import Path

import numpy as np
import pytest
from design_helpers import assert_same_mdp, reward_values, storm_round_trip

from mopmc.design.build import build_design
from mopmc.design.explore import convert
from mopmc.design.params import load_parameters
from mopmc.design.spec import switch_design

stormpy = pytest.importorskip("stormpy", reason="stormpy is needed to check against Storm")

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "switch-table3" / "switch_model.prism"
TABLE3 = {"ctrl_cost": 1.8484717986, "headway_cost": 0.1838291799, "lane_dep_cost": 0.1638948944, "ttc_cost": 0.0308373657}


@pytest.fixture(scope="module")
def table3():
    return build_design("paper-switch")


@pytest.fixture(scope="module")
def storm_table3(table3, tmp_path_factory):
    """Storm's build of our exported PRISM text of the Table 3 model."""
    from mopmc.design.prism_export import save_prism

    path = save_prism(table3.conversion, tmp_path_factory.mktemp("sw2") / "sw2.prism")
    prog = stormpy.parse_prism_program(str(path))
    return prog, stormpy.build_model(prog)


def test_paper_switch_has_the_reference_size(table3, storm_table3):
    m = table3.model
    assert (m.n_states, m.n_choices, m.n_transitions) == (92017, 152089, 263489)
    built = storm_table3[1]
    assert (built.nr_states, built.nr_choices, built.nr_transitions) == (92017, 152089, 263489)
    assert sorted(m.rewards) == sorted(TABLE3)


def test_paper_switch_gives_table3_minima(storm_table3):
    prog, model = storm_table3
    for reward, expected in TABLE3.items():
        prop = stormpy.parse_properties(f'R{{"{reward}"}}min=? [C]', prog)[0]
        value = stormpy.model_checking(model, prop).get_value(model.initial_states[0])
        assert value == pytest.approx(expected, abs=1e-6), reward


def test_paper_switch_achievability_verdicts(storm_table3):
    prog, model = storm_table3
    verdicts = []
    for c, h, l, t in (("1.9", "0.22", "0.169", "0.035"), ("2.0", "0.23", "0.174", "0.04")):
        text = f'multi(R{{"ctrl_cost"}}<={c}[ C ], R{{"headway_cost"}}<={h}[ C ], R{{"lane_dep_cost"}}<={l}[ C ], R{{"ttc_cost"}}<={t}[ C ])'
        res = stormpy.model_checking(model, stormpy.parse_properties(text, prog)[0])
        verdicts.append(bool(res[model.initial_states[0]]))
    assert verdicts == [False, True]


@pytest.mark.parametrize("n", [3, 7])
def test_round_trip_through_storm_is_equal(tmp_path, n):
    conv = convert(*_net(n))
    theirs = storm_round_trip(conv, tmp_path)
    assert_same_mdp(conv.model, theirs)
    for name in conv.model.rewards:
        assert reward_values(conv.model, name) == pytest.approx(reward_values(theirs, name), abs=1e-9)


def _net(n):
    d = switch_design(load_parameters("table3").with_n(n))
    return d.network, d.provider


@pytest.mark.skipif(not REFERENCE.is_file(), reason=f"reference model not found at {REFERENCE}")
def test_equal_to_the_authors_encoding_state_by_state():
    """Our SW2 and Storm's build of the authors' switch_model.prism, matched by valuation."""
    from mopmc.io.load import load_model

    ours = convert(*_net(40)).model
    ref = load_model(REFERENCE, valuations=True)
    sw = {"s0": (0, 0, 0), "sc": (1, 0, 0), "sp1": (1, 2, 0), "sp2": (1, 3, 0), "ss1": (1, 0, 1), "ss2": (1, 0, 2),
          "ss3": (1, 0, 3), "ss_exit": (1, 0, 5), "ss_stay": (1, 0, 4), "sr": (2, 0, 0), "sc~obs": (1, 1, 0)}
    locs = list(sw)
    col = {n: i for i, n in enumerate(ours.valuations.names)}
    v = ours.valuations.values
    rec = np.array([0, 1, 2, 3])
    mapped = np.column_stack([
        *np.array([sw[locs[i]] for i in v[:, col["SW0_loc"]]]).T, v[:, col["conf"]], v[:, col["cc"]],
        rec[v[:, col["HW_loc"]]], rec[v[:, col["TTC_loc"]]], np.array([0, 1, 3, 2])[v[:, col["LD_loc"]]], v[:, col["tc"]],
    ])
    names = ["sm", "sp", "ss", "conf", "cc", "shw", "sttc", "sol", "tc"]
    rcol = [list(ref.valuations.names).index(n) for n in names]
    index = {tuple(row): s for s, row in enumerate(ref.valuations.values[:, rcol].tolist())}
    to_ref = np.array([index[tuple(row)] for row in mapped.tolist()])
    assert len(set(to_ref.tolist())) == ref.n_states == ours.n_states

    def choices(m, s, relabel):
        return sorted(tuple(sorted((int(relabel[t]), round(float(p), 12)) for t, p in zip(m.targets[m.indptr[c]:m.indptr[c + 1]], m.probs[m.indptr[c]:m.indptr[c + 1]])))
                      for c in range(m.row_groups[s], m.row_groups[s + 1]))

    ident = np.arange(ref.n_states)
    for s in range(0, ours.n_states, 7):  # a sample keeps the test fast
        assert choices(ours, s, to_ref) == choices(ref, int(to_ref[s]), ident)


def test_family_builds_for_large_n():
    m = convert(*_net(200)).model
    small = convert(*_net(20)).model
    assert m.n_states > 9 * small.n_states
    assert np.all(m.valuations.values[:, list(m.valuations.names).index("tc")] <= 200)
