"""Graphviz pictures: one timed automaton, or a composed network (one cluster per component).

Edges are labelled ``guard / action / resets, updates``; in a network, edges that synchronise on
the same action share a colour. :func:`render` calls the ``dot`` binary for PNG/SVG.

>>> from mopmc.design.switch import consecutive_call_counter
>>> "digraph" in automaton_dot(consecutive_call_counter(4))
True
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from mopmc.design.automaton import TAU, Edge, Network, TimedAutomaton
from mopmc.errors import DependencyError, MopmcError

NEWLINE = "\\n"  # DOT's line break inside a label
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(e: Edge) -> str:
    parts = []
    guard = e.guard_text()
    if guard != "true":
        parts.append(guard)
    parts.append(e.action or TAU)
    effects = [f"{c} := 0" for c in e.resets] + [f"{k} := {v}" for k, v in e.updates.items()]
    if effects:
        parts.append(", ".join(effects))
    return " / ".join(parts)


def _body(ta: TimedAutomaton, prefix: str, colors: dict[str, str], indent: str) -> list[str]:
    out = []
    for loc in ta.locations:
        inv = ta.invariants.get(loc)
        label = _q(loc + (" | " + " & ".join(inv) if inv else "")).replace(" | ", NEWLINE)
        shape = "doublecircle" if loc == ta.initial else "circle"
        out.append(f"{indent}{_q(prefix + loc)} [label={label}, shape={shape}];")
    for e in ta.edges:
        color = colors.get(e.action or "", "black")
        style = ", style=dashed" if e.action is None else ""
        out.append(f"{indent}{_q(prefix + e.source)} -> {_q(prefix + e.target)} [label={_q(_label(e))}, color={_q(color)}, fontcolor={_q(color)}{style}];")
    return out


def automaton_dot(ta: TimedAutomaton) -> str:
    """DOT text of one automaton (initial location double-circled, tau edges dashed)."""
    lines = [f"digraph {_q(ta.name)} {{", "  rankdir=LR;", '  node [fontname="Helvetica"];', '  edge [fontname="Helvetica", fontsize=10];']
    if ta.variables or ta.clocks:
        decl = ", ".join([f"clock {c}" for c in ta.clocks] + [f"{v.name} in [{v.low}..{v.high}]" for v in ta.variables])
        lines.append(f"  label={_q(ta.name + ': ' + decl)};")
    lines += _body(ta, "", {}, "  ")
    return "\n".join(lines + ["}"]) + "\n"


def network_dot(net: Network) -> str:
    """DOT text of a composed network: one cluster per component; synchronising actions share a colour."""
    shared = [a for a in net.actions if sum(a in c.alphabet for c in net.components) > 1]
    colors = {a: _PALETTE[i % len(_PALETTE)] for i, a in enumerate(shared)}
    lines = [f"digraph {_q(net.name)} {{", "  rankdir=LR;", "  compound=true;", '  node [fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];', f"  label={_q(net.name + ' (edges of one colour synchronise)')};"]
    for i, c in enumerate(net.components):
        lines.append(f"  subgraph cluster_{i} {{")
        decl = ", ".join([f"clock {x}" for x in c.clocks] + [f"{v.name} in [{v.low}..{v.high}]" for v in c.variables])
        lines.append(f"    label={_q(c.name + (': ' + decl if decl else ''))};")
        lines += _body(c, f"{c.name}.", colors, "    ")
        lines.append("  }")
    return "\n".join(lines + ["}"]) + "\n"


def render(dot_text: str, path: str | Path) -> Path:
    """Write ``dot_text`` to ``path``: as is for ``.dot``, through Graphviz for ``.png``/``.svg``/``.pdf``."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt in ("dot", "gv"):
        try:
            path.write_text(dot_text)
        except OSError as e:
            raise MopmcError(f"{path}: cannot write ({e.strerror})") from None
        return path
    if fmt not in ("png", "svg", "pdf"):
        raise MopmcError(f"{path}: unknown picture format {path.suffix!r}; use .dot, .png, .svg or .pdf")
    exe = shutil.which("dot")
    if exe is None:
        raise DependencyError(f"{path}: the Graphviz 'dot' program is needed for .{fmt} (apt-get install graphviz); write .dot instead")
    done = subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=dot_text.encode(), capture_output=True)
    if done.returncode != 0:
        raise MopmcError(f"{path}: dot failed: {' '.join(done.stderr.decode(errors='replace').split())}")
    return path
