"""The parameter file, YAML specs, pictures and the CLI."""

import shutil

import pytest
import yaml
from typer.testing import CliRunner

from mopmc.cli.design import app
from mopmc.design.dot import automaton_dot, network_dot, render
from mopmc.design.params import load_parameters, parse_parameters
from mopmc.design.spec import load_design
from mopmc.errors import ConfigError

SPEC = {
    "name": "tiny",
    "actions": ["obs", "act"],
    "automata": [
        {"name": "S", "locations": ["wait", "go", "late"], "clocks": ["z"],
         "variables": [{"name": "k", "low": 0, "high": 2}],
         "edges": [{"from": "wait", "to": "go", "action": "obs", "clocks": ["z < 0.1"]},
                   {"from": "wait", "to": "late", "clocks": ["z >= 0.1"]},
                   {"from": "go", "to": "wait", "action": "act", "when": "k < 2", "updates": {"k": "k + 1"}, "resets": ["z"]},
                   {"from": "late", "to": "wait", "action": "act", "when": "k < 2", "updates": {"k": "k + 1"}, "resets": ["z"]}]},
        {"name": "E", "locations": ["e"], "edges": [{"from": "e", "to": "e", "action": "obs"}, {"from": "e", "to": "e", "action": "act"}]},
    ],
    "rewards": {"late_steps": [{"action": "act", "value": 1, "when": "S_loc = late"}]},
    "probabilities": {"delays": [{"clock": "z", "scale": 0.2}]},
}


def _table3_data():
    from importlib import resources

    return yaml.safe_load(resources.files("mopmc.design").joinpath("data", "table3.yaml").read_text())


def test_table3_parameters():
    p = load_parameters("table3")
    assert (p.n, p.k) == (40, 4)
    assert [(c.t, c.controller) for c in p.configurations] == [(0.2, 1), (0.1, 1), (0.2, 2), (0.1, 2)]
    assert p.configurations[0].paper_label.startswith("C1")
    assert 1 - p.configurations[0].metrics["ld"].primary == 0.8356630774766796  # p1ol, exactly


@pytest.mark.parametrize("where, key", [((), "colour"), (("configurations", 0), "entr"), (("metrics", "hw"), "scor")])
def test_unknown_keys_are_rejected_by_name(where, key):
    data = _table3_data()
    node = data
    for w in where:
        node = node[w]
    node[key] = 1
    with pytest.raises(ConfigError, match=f"unknown key.*'{key}'"):
        parse_parameters(data, "p.yaml")


def test_parameter_values_are_checked():
    data = _table3_data()
    data["configurations"][1]["exit"] = 1.2
    with pytest.raises(ConfigError, match=r"configurations\[1\].exit: probability 1.2 is outside \[0, 1\]"):
        parse_parameters(data, "p.yaml")
    data = _table3_data()
    del data["configurations"][0]["enter"], data["delay"]
    with pytest.raises(ConfigError, match="no 'enter' probability"):
        parse_parameters(data, "p.yaml")


def test_per_controller_metrics_and_delay_distribution_build():
    from mopmc.design.explore import convert
    from mopmc.design.spec import switch_design

    data = _table3_data()
    data["n"] = 3
    data["configurations"][0]["metrics"]["hw"] = {"primary": 0.1, "secondary": 0.6}
    del data["configurations"][1]["enter"]  # from the exponential CDF: exp(-0.1/0.2)
    conv = convert(*(lambda d: (d.network, d.provider))(switch_design(parse_parameters(data, "p.yaml"))))
    probs = set(round(float(x), 12) for x in conv.model.probs)
    assert {0.1, 0.6, round(2.718281828459045 ** -0.5, 12)} <= probs


def test_yaml_spec_builds_and_rejects_errors(tmp_path):
    from mopmc.design.explore import convert

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    d = load_design(path)
    m = convert(d.network, d.provider).model
    assert m.n_states > 1 and "late_steps" in m.rewards
    bad = yaml.safe_load(yaml.safe_dump(SPEC))
    bad["automata"][0]["edges"][0]["action"] = "jump"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="unknown action 'jump'"):
        load_design(path)
    bad = yaml.safe_load(yaml.safe_dump(SPEC))
    del bad["automata"][0]["variables"][0]["high"]
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="unbounded"):
        load_design(path)


def test_dot_of_automata_and_composition(tmp_path):
    net = load_design("paper-switch").network
    text = network_dot(net)
    assert text.count("subgraph cluster_") == 6 and "SW0.sc" in text
    assert '"ss3" -> "ss_exit" [label="exit_ok / tau"' in automaton_dot(net.component("SW0"))
    assert render(text, tmp_path / "n.dot").read_text() == text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed: PNG rendering not tested")
def test_png_rendering(tmp_path):
    out = render(network_dot(load_design("paper-switch").network), tmp_path / "n.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


runner = CliRunner()


def test_cli_build_and_show(tmp_path):
    res = runner.invoke(app, ["build", "paper-switch", "--out", str(tmp_path / "m.prism"), "--n", "5"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "m.prism").read_text().startswith("//")
    assert '"configuration": "conf"' in (tmp_path / "m.prism.binding.json").read_text()
    res = runner.invoke(app, ["show", "paper-switch", "--out", str(tmp_path / "c.dot"), "--component", "CC"])
    assert res.exit_code == 0 and "digraph" in (tmp_path / "c.dot").read_text()


@pytest.mark.parametrize("mutate, message", [
    (lambda s: s["automata"][0].update(colour=1), "unknown key(s) 'colour'"),
    (lambda s: s["automata"][0]["edges"][0].update(action="jump"), "unknown action 'jump'"),
    (lambda s: s["automata"][0]["edges"][1].update(clocks=["z >= 0.05"]), "neither exclusive nor equivalent"),
    (lambda s: s.update(probabilities={"table": [{"guard": "z >= 0.1", "p": 1.5}]}), "outside [0, 1]"),
])
def test_cli_invalid_specs_give_one_line_and_exit_2(tmp_path, mutate, message):
    spec = yaml.safe_load(yaml.safe_dump(SPEC))
    mutate(spec)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    res = runner.invoke(app, ["build", str(path), "--out", str(tmp_path / "m.prism")])
    assert res.exit_code == 2
    assert message in res.output and res.output.count("\n") == 1
