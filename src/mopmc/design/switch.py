"""The paper's switch library: SW0 (Figure 4), TS(n), CC(k), metric recorders MR (Figure 5), SW2.

``sw2(params)`` composes ``SW0 || TS(n) || CC(k) || MR_hw || MR_ttc || MR_ld`` with the
configurations conf(t, controller) of a parameter file, and ``switch_probabilities(params)`` gives
the probability provider; :func:`binding` tells the runtime what the model variables mean.

Where the paper's figures and the authors' hand encoding of SW2 (the model behind Table 3) differ,
we follow the encoding (each difference is listed in ``docs/design.md``):

* after a secondary step, the exit check branches into "may exit" and "must stay"; in "may exit" the
  *scheduler* chooses between exiting (``ex_s``, only once CC has counted k calls) and staying;
* the metric recorders resolve their outcome by an internal step between ``obs`` and the end of the
  step, interleaved with the controller call; the outcome is counted at ``ex_p``/``ex_s``/``re_s``;
* at the end of the episode (``tc = n``) the states without a move get a tau self-loop.

>>> from mopmc.design.params import load_parameters
>>> net = sw2(load_parameters("table3"))
>>> [c.name for c in net.components]
['SW0', 'TS', 'CC', 'HW', 'TTC', 'LD']
"""

from __future__ import annotations

from mopmc.design.automaton import Edge, Network, RewardItem, TimedAutomaton, Variable
from mopmc.design.expressions import disj, parse
from mopmc.design.params import SwitchParameters
from mopmc.design.probability import DelayDistribution, ProbabilityModel, ProbabilityTable, TableRow
from mopmc.design.guards import Guard

SW0_LOCATIONS = ("s0", "sc", "sp1", "sp2", "ss1", "ss2", "ss3", "ss_exit", "ss_stay", "sr")
PRIMARY = ("sp1", "sp2")
SECONDARY = ("ss2", "ss3", "ss_exit", "ss_stay")
STEP_ENDS = ("ex_p", "ex_s", "re_s")


def base_switch(configurations, name: str = "SW0") -> TimedAutomaton:
    """SW0 (Figure 4) with one ``conf`` edge per configuration ``(t, controller)``, numbered from 1."""
    ts = [float(c.t) for c in configurations]
    edges = [Edge("s0", "sc", "conf", updates={"conf": str(i)}, resets=("z",)) for i in range(1, len(ts) + 1)]
    for i, t in enumerate(ts, start=1):
        edges.append(Edge("sc", "sp1", "obs", when=f"conf = {i}", clocks=(f"z < {t!r}",)))
        edges.append(Edge("sc", "ss1", None, when=f"conf = {i}", clocks=(f"z >= {t!r}",)))
    edges += [
        Edge("sp1", "sp2", "act_p"),
        Edge("sp2", "sr", "ex_p"),
        Edge("ss1", "ss2", "obs"),
        Edge("ss2", "ss3", "act_s"),
        Edge("ss3", "ss_exit", None, events=("exit_ok",)),
        Edge("ss3", "ss_stay", None, events=("!exit_ok",)),
        Edge("ss_exit", "sr", "ex_s"),
        Edge("ss_exit", "ss1", "re_s"),
        Edge("ss_stay", "ss1", "re_s"),
        Edge("sr", "s0", None, updates={"conf": "0"}, resets=("z",)),
    ]
    return TimedAutomaton(
        name, SW0_LOCATIONS, "s0", clocks=("z",), variables=(Variable("conf", 0, len(ts), 0),),
        edges=tuple(edges), invariants={"sc": (f"z <= {max(ts)!r}",)},
    )


def timestep_counter(n: int, name: str = "TS") -> TimedAutomaton:
    """TS(n) (Figure 5a): counts controller calls; nothing starts once ``n`` steps are done."""
    more = f"tc < {n}"
    edges = (
        Edge("ts", "ts", "conf", when=more),
        Edge("ts", "ts", "obs", when=more),
        Edge("ts", "ts", "act_p", when=more, updates={"tc": "tc + 1"}),
        Edge("ts", "ts", "act_s", when=more, updates={"tc": "tc + 1"}),
    )
    return TimedAutomaton(name, ("ts",), "ts", variables=(Variable("tc", 0, n, 0),), edges=edges)


def consecutive_call_counter(k: int, name: str = "CC") -> TimedAutomaton:
    """CC(k) (Figure 5b): the secondary may be left only after ``k`` consecutive calls."""
    edges = (
        Edge("cc", "cc", "re_s", when=f"cc < {k}", updates={"cc": "cc + 1"}),
        Edge("cc", "cc", "re_s", when=f"cc = {k}"),
        Edge("cc", "cc", "ex_s", when=f"cc = {k}", updates={"cc": "0"}),
    )
    return TimedAutomaton(name, ("cc",), "cc", variables=(Variable("cc", 0, k, 0),), edges=edges)


def metric_recorder(name: str, event: str) -> TimedAutomaton:
    """MR (Figure 5c): after ``obs``, records whether ``event`` (the metric is bad) holds in this step."""
    edges = [Edge("idle", "observed", "obs"), Edge("observed", "bad", None, events=(event,)),
             Edge("observed", "good", None, events=(f"!{event}",))]
    edges += [Edge(loc, "idle", a) for loc in ("bad", "good") for a in STEP_ENDS]
    return TimedAutomaton(name, ("idle", "observed", "bad", "good"), "idle", edges=tuple(edges))


def recorder_name(metric: str) -> str:
    return metric.upper()


def event_name(metric: str) -> str:
    return f"{metric}_bad"


def sw2(params: SwitchParameters) -> Network:
    """SW2 = SW0 || TS(n) || CC(k) || one MR per metric, with the reward models of Table 2."""
    parts = [base_switch(params.configurations), timestep_counter(params.n), consecutive_call_counter(params.k)]
    parts += [metric_recorder(recorder_name(m.name), event_name(m.name)) for m in params.metrics]
    n = params.n
    rewards = {"ctrl_cost": (RewardItem("act_p", params.costs["primary"] / n), RewardItem("act_s", params.costs["secondary"] / n))}
    for m in params.metrics:
        bad = f"{recorder_name(m.name)}_loc = bad"
        rewards[m.reward] = tuple(RewardItem(a, 1 / n, bad) for a in STEP_ENDS)
    return Network(tuple(parts), rewards, name=f"SW2(n={params.n}, k={params.k})")


def _any_location(locations) -> str:
    return disj(*(parse(f"SW0_loc = {loc}") for loc in locations)).to_prism()


def switch_probabilities(params: SwitchParameters) -> ProbabilityModel:
    """Table rows per configuration (entry, exit, metric outcomes per controller), then the delay CDF."""
    rows = []
    for i, c in enumerate(params.configurations, start=1):
        conf = f"conf = {i}"
        if c.enter is not None:
            rows.append(TableRow(Guard.parse([f"z >= {c.t!r}"]), c.enter, parse(conf)))
        rows.append(TableRow(Guard.parse(events=["exit_ok"]), c.exit, parse(conf)))
        for m in params.metrics:
            p = c.metrics[m.name]
            g = Guard.parse(events=[event_name(m.name)])
            if p.primary == p.secondary:
                rows.append(TableRow(g, p.primary, parse(conf)))
            else:
                rows.append(TableRow(g, p.primary, parse(f"{conf} & ({_any_location(PRIMARY)})")))
                rows.append(TableRow(g, p.secondary, parse(f"{conf} & ({_any_location(SECONDARY)})")))
    providers = [ProbabilityTable(tuple(rows))]
    if params.delay is not None:
        providers.append(DelayDistribution("z", params.delay.scale, params.delay.truncate, params.delay.distribution))
    return ProbabilityModel(tuple(providers))


def binding(params: SwitchParameters) -> dict:
    """Meaning -> model variable, and the configurations in index order, for the runtime (JSON-ready)."""
    return {
        "format": "mopmc-switch-binding/1",
        "timestep": "tc",
        "consecutive_calls": "cc",
        "configuration": "conf",
        "location": "SW0_loc",
        "locations": list(SW0_LOCATIONS) + ["sc~obs"],
        "primary_locations": list(PRIMARY),
        "secondary_locations": list(SECONDARY),
        "recorders": {m.name: f"{recorder_name(m.name)}_loc" for m in params.metrics},
        "metrics": [{"name": m.name, "score": m.score} for m in params.metrics],  # the runtime's thresholds
        "n": params.n,
        "k": params.k,
        "configurations": [
            {"index": i, "name": c.name, "t": c.t, "controller": c.controller, "paper_label": c.paper_label}
            for i, c in enumerate(params.configurations, start=1)
        ],
    }
