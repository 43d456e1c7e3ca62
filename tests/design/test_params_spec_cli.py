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


# -------------------------------------------------------------------------------- bad input (audit)
def _spec_with(mutate):
    spec = yaml.safe_load(yaml.safe_dump(SPEC))
    mutate(spec)
    return spec


def _auto(s):
    return s["automata"][0]


@pytest.mark.parametrize("mutate, fragments", [
    # each of these was a Python exception (an "internal error" line, exit 1) or silently accepted
    (lambda s: s.update(actions=5), ["actions: expected a list, got int"]),
    (lambda s: s.update(actions="obs"), ["actions: expected a list, got str"]),  # was read as actions o, b, s
    (lambda s: _auto(s).update(variables=[{"name": "k", "low": "a", "high": 2}]), ["variables[0].low", "'a' is not an integer"]),
    (lambda s: _auto(s).update(variables=[{"name": "k", "low": 0.5, "high": 2}]), ["variables[0].low", "0.5 is not an integer"]),
    (lambda s: _auto(s).update(variables=[{"name": "k", "low": 3, "high": 1, "init": 3}]), ["low 3 > high 1"]),
    (lambda s: _auto(s).update(variables=[{"name": "k k", "low": 0, "high": 2}]), ["variables[0].name", "'k k' is not a name"]),
    (lambda s: _auto(s).update(variables=[{"name": "k", "type": "bool", "init": "false"}]), ["init", "'false' is not a Boolean"]),
    (lambda s: _auto(s).update(name="S S"), ["automata[0].name", "'S S' is not a name"]),
    (lambda s: _auto(s).update(location_variable=5), ["location_variable", "5 is not a name"]),
    (lambda s: _auto(s).update(clocks=["z", "z"]), ["clocks: a clock is declared twice"]),
    (lambda s: _auto(s).update(clocks=[{"a": 1}]), ["clocks[0]", "is not a name"]),
    (lambda s: _auto(s).update(invariants=["z <= 1"]), ["invariants: expected a mapping, got list"]),
    (lambda s: _auto(s).update(invariants={"wait": 5}), ["invariants.wait: expected a list, got int"]),
    (lambda s: _auto(s).update(invariants={"wait": ["y <= 0.1"]}), ["invariant of wait uses unknown clock 'y'"]),
    (lambda s: _auto(s)["edges"][0].update(action=[1]), ["edges[0].action", "[1] is not a name"]),
    (lambda s: _auto(s)["edges"][2].update(updates=["k"]), ["edges[2].updates: expected a mapping, got list"]),
    (lambda s: _auto(s)["edges"][2].update(when=["k < 2"]), ["edges[2].when: expected an expression, got list"]),
    (lambda s: _auto(s)["edges"][0].update(clocks=["z < 1e5e"]), ["clock constraint 'z < 1e5e'", "is not a number"]),
    (lambda s: s.update(rewards=[1]), ["rewards: expected a mapping, got list"]),
    (lambda s: s["rewards"]["late_steps"][0].update(value="x"), ["rewards.late_steps[0].value", "'x' is not a finite number"]),
    (lambda s: s["rewards"]["late_steps"][0].update(value=float("nan")), ["rewards.late_steps[0].value", "nan is not a finite number"]),
    (lambda s: s.update(rewards={"late steps": [{"action": "act", "value": 1}]}), ["reward model", "'late steps' is not a name"]),
    (lambda s: s.update(name=[1]), ["name: expected a text, got list"]),
    (lambda s: s.update(probabilities={"table": [{"guard": "z >= 0.1", "p": "x"}]}), ["probabilities.table[0].p", "'x' is not a finite number"]),
    (lambda s: s.update(probabilities={"table": [{"guard": "z >= 0.1", "p": True}]}), ["probabilities.table[0].p", "True is not a finite number"]),
    (lambda s: s.update(probabilities={"table": [{"guard": "z >= 0.1"}]}), ["probabilities.table[0]: missing key 'p'"]),
    (lambda s: s.update(probabilities={"table": [{"p": 0.5}]}), ["probabilities.table[0]: missing key 'guard'"]),
    (lambda s: s.update(probabilities={"table": [{"guard": "z >= 0.1", "p": 1.2}]}), ["probabilities.table[0].p", "outside [0, 1]"]),
    # rows and delays that name a clock or event the automata do not have were ignored silently
    (lambda s: s["probabilities"].update(table=[{"guard": "y >= 0.1", "p": 0.5}]), ["probabilities.table[0]: unknown clock 'y'"]),
    (lambda s: s["probabilities"].update(table=[{"guard": "exit_ok", "p": 0.5}]), ["probabilities.table[0]: event 'exit_ok' is on no edge"]),
    (lambda s: s["probabilities"]["delays"].append({"clock": "y"}), ["probabilities.delays: unknown clock 'y'"]),
    (lambda s: s["probabilities"].update(delays=[{"clock": "z", "scale": "x"}]), ["delays[0].scale", "'x' is not a finite number"]),
    (lambda s: s["probabilities"].update(delays=[{"clock": "z", "truncate": "x"}]), ["delays[0].truncate", "'x' is not a finite number"]),
    # expressions: named by file and key (they named only the edge, or nothing at all)
    (lambda s: _auto(s)["edges"][2].update(when="kk < 2"), ["bad.yaml: automata[0].edges[2].when: unknown variable 'kk'"]),
    (lambda s: _auto(s)["edges"][2].update(when="k <"), ["bad.yaml: automata[0].edges[2].when: expression 'k <' ends too early"]),
    (lambda s: _auto(s)["edges"][2].update(updates={"k": "q + 1"}), ["bad.yaml: automata[0].edges[2].updates.k: unknown variable 'q'"]),
    (lambda s: s["rewards"]["late_steps"][0].update(when="S_loc = lat"),
     ["bad.yaml: rewards.late_steps[0].when: 'lat' is not a location of S_loc"]),
    # errors of the automata themselves: they named the automaton, not the file and key
    (lambda s: _auto(s)["edges"][2].update(resets=["y"]), ["bad.yaml: automata[0]: automaton S: edge", "unknown clock 'y'"]),
    (lambda s: _auto(s).update(variables=[{"name": "k", "low": 0, "high": 2, "init": 5}]),
     ["bad.yaml: automata[0].variables[0]: variable 'k': init 5 is outside [0, 2]"]),
    (lambda s: _auto(s).update(initial="nowhere"), ["bad.yaml: automata[0]: automaton S: initial location 'nowhere'"]),
    (lambda s: _auto(s)["edges"][0].update(**{"from": "wat"}), ["bad.yaml: automata[0]: automaton S: edge", "unknown location 'wat'"]),
    (lambda s: s["automata"][1]["edges"][0].update(updates={"k": "1"}), ["bad.yaml: automata[1]: automaton E: edge",
                                                                       "writes 'k', which is not its own variable"]),
    (lambda s: s["automata"].append(dict(s["automata"][1])), ["bad.yaml: ", "duplicate component names"]),
    # a switch spec with automata of its own built SW2 and ignored them
    (lambda s: s.update(switch={"parameters": "table3"}), ["bad.yaml: a switch spec is built from its parameters alone; "
                                                          "it takes no actions, automata, probabilities, rewards"]),
    # an internal error (IndexError) and a message without the spec file and key
    (lambda s: s.update(automata=[]), ["bad.yaml: automata: expected a non-empty list"]),
    (lambda s: (s.clear(), s.update(switch={"parameters": "nonexist.yaml"})),
     ["bad.yaml: switch.parameters: parameter file", "nonexist.yaml not found"]),
])
def test_malformed_specs_are_named_errors(tmp_path, mutate, fragments):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_spec_with(mutate)))
    with pytest.raises(ConfigError) as err:
        load_design(path)
    for frag in fragments:
        assert frag in str(err.value), (frag, str(err.value))


def test_spec_files_with_repeated_keys_or_binary_bytes(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: a\nname: b\nautomata: [{name: S, locations: [a]}]\n")  # YAML kept the last one silently
    with pytest.raises(ConfigError, match=r"dup.yaml: line 2: key 'name' is given twice"):
        load_design(path)
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match=r"bin.yaml: not a text \(UTF-8\) file"):
        load_design(path)
    with pytest.raises(ConfigError, match="is a directory"):
        load_design(tmp_path)


@pytest.mark.parametrize("mutate, fragments", [
    (lambda d: d.update(n="x"), ["p.yaml: n: 'x' is not an integer"]),
    (lambda d: d.update(n=None), ["p.yaml: n: None is not an integer"]),
    (lambda d: d.update(n=2.5), ["p.yaml: n: 2.5 is not an integer"]),  # was truncated to 2
    (lambda d: d.update(n=0), ["n = 0", "between 1 and 10000"]),
    (lambda d: d.update(n=100_000), ["n = 100000", "between 1 and 10000"]),  # was a build of many minutes
    (lambda d: d.update(k="x"), ["p.yaml: k: 'x' is not an integer"]),
    (lambda d: d.update(k=10**9), ["k = 1000000000"]),
    (lambda d: d.update(format="other/9"), ["format 'other/9' is not 'mopmc-switch-parameters/1'"]),
    (lambda d: d.update(configurations={"a": 1}), ["configurations: expected a list, got dict"]),
    (lambda d: d["configurations"][0].update(t="x"), ["configurations[0].t: 'x' is not a finite number"]),
    (lambda d: d["configurations"][0].update(t=-0.1), ["configurations[0].t: the deadline must be >= 0"]),
    (lambda d: d["configurations"][0].update(t=float("nan")), ["configurations[0].t: nan is not a finite number"]),
    (lambda d: d["configurations"][0].update(controller="x"), ["configurations[0].controller: 'x' is not an integer"]),
    (lambda d: d["configurations"][0].update(controller=1.7), ["configurations[0].controller: 1.7 is not an integer"]),
    (lambda d: d["configurations"][0].update(name=[1]), ["configurations[0].name: [1] is not a name"]),
    (lambda d: d["configurations"][0].update(enter=True), ["configurations[0].enter: True is not a finite number"]),
    (lambda d: d.update(costs={"primary": "x"}), ["costs.primary: 'x' is not a finite number"]),
    (lambda d: d.update(costs={"primary": float("nan")}), ["costs.primary: nan is not a finite number"]),
    (lambda d: d.update(costs={"secondary": -2}), ["costs.secondary: -2 is negative"]),
    (lambda d: d.update(delay={"scale": "x"}), ["delay.scale: 'x' is not a finite number"]),
    (lambda d: d.update(metrics=["hw", "ttc", "ld"]), ["metrics: expected a mapping, got list"]),
    (lambda d: d["metrics"]["hw"].update(score="x"), ["metrics.hw.score: 'x' is not a finite number"]),
    (lambda d: d["metrics"]["hw"].update(provenance=[1]), ["metrics.hw.provenance: expected a mapping, got list"]),
    (lambda d: d.update(provenance=[1]), ["p.yaml: provenance: expected a mapping, got list"]),
    (lambda d: d["metrics"]["hw"].update(reward="head way"), ["metrics.hw.reward: 'head way' is not a name"]),
    # two metrics counted into one reward model (or into ctrl_cost) gave a silently wrong model
    (lambda d: d["metrics"]["ttc"].update(reward="headway_cost"), ["metrics.ttc.reward: reward model 'headway_cost' is used twice"]),
    (lambda d: d["metrics"]["ld"].update(reward="ctrl_cost"), ["metrics.ld.reward: 'ctrl_cost' is the controllers' reward model"]),
])
def test_malformed_parameter_values_are_named_errors(mutate, fragments):
    data = _table3_data()
    mutate(data)
    with pytest.raises(ConfigError) as err:
        parse_parameters(data, "p.yaml")
    for frag in fragments:
        assert frag in str(err.value), (frag, str(err.value))


def test_parameter_files_with_repeated_keys_or_binary_bytes(tmp_path):
    text = yaml.safe_dump(_table3_data(), sort_keys=False)
    path = tmp_path / "p.yaml"
    path.write_text(text.replace("n: 40\n", "n: 40\nn: 3\n", 1))
    with pytest.raises(ConfigError, match=r"p.yaml: line \d+: key 'n' is given twice"):
        load_parameters(path)
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match=r"p.yaml: not a text \(UTF-8\) file"):
        load_parameters(path)
    with pytest.raises(ConfigError, match="is a directory"):
        load_parameters(tmp_path)
    with pytest.raises(ConfigError, match="--n 0: the episode length"):
        from mopmc.design.params import episode_length

        episode_length(0, "--n")


def test_cli_bad_inputs_and_output_paths_give_one_line(tmp_path):
    from support import assert_one_line_error, run_mopmc

    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_spec_with(lambda s: _auto(s).update(variables=[{"name": "k", "low": "a", "high": 2}]))))
    (tmp_path / "folder.prism").mkdir()
    (tmp_path / "afile").write_text("x")
    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({**_table3_data(), "n": "forty"}))
    cases = [
        (["build", bad, "--out", tmp_path / "m.prism"], ["variables[0].low", "'a' is not an integer"]),
        (["build", spec, "--out", tmp_path / "folder.prism"], ["--out", "folder.prism: is a directory"]),
        (["build", spec, "--out", tmp_path / "none" / "m.prism"], ["--out", "the folder", "does not exist"]),
        (["build", spec, "--out", tmp_path / "afile" / "m.prism"], ["--out", "afile is not a directory"]),
        (["build", "paper-switch", "--n", "2", "--out", tmp_path / "m.prism", "--binding", tmp_path / "none" / "b.json"],
         ["--binding", "does not exist"]),
        (["build", spec, "--out", tmp_path / "m.prism", "--binding", tmp_path / "b.json"], ["--binding applies to switch specs only"]),
        (["build", "paper-switch", "--out", tmp_path / "m.prism", "--n", "0"], ["--n 0: the episode length"]),
        (["build", "paper-switch", "--out", tmp_path / "m.prism", "--n", "100000"], ["--n 100000: the episode length"]),
        (["build", "paper-switch", "--out", tmp_path / "m.prism", "--params", params], ["p.yaml: n: 'forty' is not an integer"]),
        (["build", spec, "--out", tmp_path / "m.prism", "--params", params], ["--params", "expected a mapping with 'probabilities'"]),
        # a network spec's own keys in its --params file were ignored
        (["build", spec, "--out", tmp_path / "m.prism", "--params", spec],
         ["--params", "tiny.yaml: unknown key(s) 'actions', 'automata', 'name', 'rewards'; allowed: probabilities"]),
        (["show", spec, "--out", tmp_path / "none" / "n.dot"], ["--out", "does not exist"]),
        (["show", "paper-switch", "--out", tmp_path / "folder.prism"], ["--out", "is a directory"]),
    ]
    for args, fragments in cases:
        assert_one_line_error(run_mopmc("design", *args), *fragments)
    assert not (tmp_path / "m.prism").exists()


def test_table3_refuses_a_model_that_is_not_a_switch_and_bad_outputs(tmp_path):
    from support import assert_one_line_error, run_mopmc

    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    model = tmp_path / "tiny.prism"
    assert run_mopmc("design", "build", spec, "--out", model).code == 0
    # was "internal error: ValueError: tuple.index(x): x not in tuple"
    assert_one_line_error(run_mopmc("table3", model, "--no-storm", "--export-scheduler", ""),
                          "tiny.prism: not a switch model", "'ctrl_cost'")
    (tmp_path / "folder").mkdir()
    assert_one_line_error(run_mopmc("table3", model, "--no-storm", "--export-scheduler", tmp_path / "none" / "s.json"),
                          "--export-scheduler", "does not exist")
    assert_one_line_error(run_mopmc("table3", model, "--no-storm", "--export-scheduler", tmp_path / "folder"),
                          "--export-scheduler", "is a directory")
    assert_one_line_error(run_mopmc("table3", model, "--no-storm", "--eps-rel", "nan"), "--eps-rel nan")


# ------------------------------------------------------------------------- review of the input audit
def test_numbers_with_an_exponent_are_numbers(tmp_path):
    """PyYAML (YAML 1.1) reads ``1e-3`` as text; ``float()`` took it before the audit, whose type checks
    refused it ("'1e-3' is not a number"). JSON and YAML 1.2 read it as a number, and so do we."""
    text = resources_text("table3.yaml")
    for old, new in (("n: 40", "n: 4e1"), ("score: 3.9710", "score: 3.971e0"),
                     ("exit: 0.16223244648929785", "exit: 16.223244648929785E-2"), ("scale: 0.2", "scale: 2e-1")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "p.yaml"
    path.write_text(text)
    p, table3 = load_parameters(path), load_parameters("table3")
    assert p.n == 40 and isinstance(p.n, int)
    assert (p.metrics[0].score, p.delay.scale) == (3.971, 0.2)
    assert abs(p.configurations[0].exit - table3.configurations[0].exit) < 1e-15
    spec = yaml.safe_dump(SPEC).replace("scale: 0.2", "scale: 2e-1").replace("name: tiny", "name: 1e3")
    assert "scale: 2e-1" in spec and "name: 1e3" in spec
    (tmp_path / "tiny.yaml").write_text(spec)
    d = load_design(tmp_path / "tiny.yaml")
    assert d.provider.providers[0].scale == 0.2 and d.network.name == "1000.0"
    text = text.replace("n: 4e1", 'n: "40"')  # a quoted number stays a text
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"p.yaml: n: '40' is not an integer"):
        load_parameters(path)


def resources_text(name):
    from importlib import resources

    return resources.files("mopmc.design").joinpath("data", name).read_text()


def test_a_deadline_of_zero_is_the_secondary_from_the_first_step():
    """t = 0 (what the runtime config allows, P(delay >= 0) = 1) built before the audit refused it."""
    from mopmc.design.build import convert_design
    from mopmc.design.spec import switch_design

    data = _table3_data()
    data["n"] = 3
    data["configurations"][1]["t"] = 0
    del data["configurations"][1]["enter"]  # from the delay distribution: P(delay >= 0) = 1
    p = parse_parameters(data, "p.yaml")
    assert p.configurations[1].t == 0.0 and p.configurations[1].name == "t0.1-ctrl1"
    assert convert_design(switch_design(p)).model.n_states > 1


def test_reward_null_is_the_default_reward_model():
    data = _table3_data()
    data["metrics"]["ld"]["reward"] = None  # was the reward model "None"
    assert [m.reward for m in parse_parameters(data, "p.yaml").metrics] == ["headway_cost", "ttc_cost", "ld_cost"]


def test_spec_and_parameter_file_share_one_wording():
    """One helper for numbers and names: a bad number or name reads the same in both files."""
    from mopmc.design import params, spec

    assert spec._number is params._number and spec._name is params._name
    data = _table3_data()
    data["metrics"]["hw"]["reward"] = "head way"
    with pytest.raises(ConfigError) as err:
        parse_parameters(data, "p.yaml")
    assert str(err.value) == "p.yaml: metrics.hw.reward: 'head way' is not a name (letters, digits and _, not starting with a digit)"
    data = _table3_data()
    data["configurations"][0]["exit"] = "x"
    with pytest.raises(ConfigError) as err:
        parse_parameters(data, "p.yaml")
    assert str(err.value) == "p.yaml: configurations[0].exit: 'x' is not a finite number"


def _doc_blocks(name):
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / name
    if not path.is_file():
        pytest.skip(f"{path} is not here (an installed package)")
    return re.findall(r"```yaml\n(.*?)```", path.read_text(), re.S)


def test_the_examples_in_the_docs_pass_the_validation(tmp_path):
    """Every YAML example of docs/design.md and docs/parameter-file.md that is a whole file loads."""
    from mopmc.design.build import convert_design

    loaded = 0
    for doc in ("design.md", "parameter-file.md"):
        for i, block in enumerate(_doc_blocks(doc)):
            path = tmp_path / f"{doc}.{i}.yaml"
            path.write_text(block)
            if "automata:" in block:
                d = load_design(path)
            elif "configurations:" in block:
                d = load_design("paper-switch", path)
            else:
                continue  # a fragment (the estimator's provenance)
            assert convert_design(d).model.n_states > 1, (doc, i)
            loaded += 1
    assert loaded >= 2


@pytest.mark.parametrize("delay, fragment", [
    ({"scale": 0}, "p.yaml: delay.scale: the delay scale must be > 0 seconds, not 0"),
    ({"scale": -0.2}, "p.yaml: delay.scale: the delay scale must be > 0 seconds, not -0.2"),
    ({"truncate": 0}, "p.yaml: delay.truncate: the truncation must be > 0 seconds (or null), not 0"),
    ({"distribution": "uniform"}, "p.yaml: delay.distribution: 'uniform' is not supported"),
])
def test_a_bad_delay_law_is_named_where_it_is_written(tmp_path, delay, fragment):
    """These were accepted in a parameter file whose configurations all give ``enter``, and failed
    without the file or key ("delay scale must be > 0, not 0.0") when one did not."""
    data = _table3_data()
    data["delay"] = delay
    with pytest.raises(ConfigError) as err:
        parse_parameters(data, "p.yaml")
    assert fragment in str(err.value)
    spec = yaml.safe_load(yaml.safe_dump(SPEC))
    spec["probabilities"]["delays"][0].update(delay)
    (tmp_path / "x.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError) as err:
        load_design(tmp_path / "x.yaml")
    assert fragment.replace("p.yaml: delay", "x.yaml: probabilities.delays[0]") in str(err.value)
