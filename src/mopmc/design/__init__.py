"""The design layer: timed automata for the switch, composition, conversion to an MDP, export.

Paper Sec. 3 (Figures 4-6) and Sec. 6.3.1. See ``docs/design.md``.
"""

from mopmc.design.automaton import Edge, Network, RewardItem, TimedAutomaton, Variable, compose
from mopmc.design.explore import Conversion, convert
from mopmc.design.guards import Guard
from mopmc.design.params import SwitchParameters, load_parameters
from mopmc.design.probability import DelayDistribution, ProbabilityModel, ProbabilityTable

__all__ = [
    "Conversion", "DelayDistribution", "Edge", "Guard", "Network", "ProbabilityModel", "ProbabilityTable",
    "RewardItem", "SwitchParameters", "TimedAutomaton", "Variable", "compose", "convert", "load_parameters",
]
