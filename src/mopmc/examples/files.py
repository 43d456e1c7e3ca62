"""Named paths of the example models shipped as package data.

>>> from mopmc.examples import files
>>> files.dice.name
'dice.pm'
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent / "models"

#: Knuth-Yao die from fair coin flips (DTMC); reward "flips"; each face has probability 1/6.
dice = _HERE / "dice.pm"
#: A two-objective MDP: finish fast (reward "time") or cheaply (reward "energy").
tradeoff = _HERE / "tradeoff.nm"
#: A robot that reaches "goal" while avoiding "hazard" (MDP with a zero-reward end component).
robot = _HERE / "robot.nm"
#: A small real-time switch: primary vs secondary controller with a k-call lock (MDP, 4 rewards).
mini_switch = _HERE / "mini_switch.nm"

ALL = {"dice": dice, "tradeoff": tradeoff, "robot": robot, "mini_switch": mini_switch}
