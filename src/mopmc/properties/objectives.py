"""Typed objectives and properties, independent of Storm's formula classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

ObjectiveKind = Literal["total_reward", "reach_reward", "probability", "long_run"]
Sense = Literal["min", "max"]


@dataclass(frozen=True)
class Objective:
    """One objective of a property, in original units.

    kinds:
        ``total_reward``: ``R{"r"}[C]``, the expected total reward.
        ``reach_reward``: ``R{"r"}[F phi]``, reward collected until ``phi``.
        ``probability``: ``P[left U right]`` (``F phi`` is ``true U phi``). ``G phi`` is stored as
        ``negated=True`` with ``right = !phi``: the value is 1 - P[F !phi].
        ``long_run``: ``R{"r"}[LRA]``, the long-run average reward per step, or ``LRA[phi]``
        (``reward_model`` None, ``right_text`` phi), the long-run fraction of steps in ``phi``;
        single objectives only (:mod:`mopmc.engine.long_run`).

    ``left_text``/``right_text`` are Storm's printed state formulas: ``right_text`` is always the
    reach target (for ``G phi`` it is ``!(phi)``), ``left_text`` the formula that must hold until
    then (``None`` = true). :meth:`target_mask` and :meth:`hold_mask` evaluate them on a model.

    ``sense`` is the preferred direction: ``min=?``/``max=?`` when written, else, inside
    ``multi(...)``, ``<=`` means min and ``>=`` means max (some scheduler meets the bound), and in a
    property of its own the worst case: ``>=`` means min, ``<=`` max (every scheduler meets it; as
    PRISM and Storm). ``threshold`` and ``comparison`` are set for bounded objectives.
    ``directionless``: written without a direction or bound (``P=?``, ``R=?``), accepted on Markov
    chains only, where min and max agree (``sense`` is then ``max``).
    ``steps``: the step window ``(lo, hi)`` of a step-bounded objective (``hi`` ``None``: no upper
    bound; the initial state is step 0): ``P [phi U[l,u] psi]`` counts ``psi`` at steps ``l..u``,
    ``R [C<=k]`` the rewards of the choices at steps ``0..k-1``. Engines answer them on the
    step-counting product (:func:`mopmc.model.unfold.unfold_steps`).
    ``left`` and ``right`` are Storm's state formulas (kept for masks); ``left_text`` and
    ``right_text`` are their printed forms.
    """

    index: int
    text: str
    kind: ObjectiveKind
    sense: Sense
    reward_model: str | None = None
    left_text: str | None = None
    right_text: str | None = None
    negated: bool = False
    comparison: str | None = None
    threshold: float | None = None
    directionless: bool = False
    steps: tuple[int, int | None] | None = None

    @property
    def is_query(self) -> bool:
        """True for ``=?`` objectives."""
        return self.threshold is None

    @property
    def name(self) -> str:
        """A short name: the reward model, or the target formula of a probability."""
        if self.reward_model is not None:
            return self.reward_model
        if self.kind == "long_run":
            return f"LRA {self.right_text or ''}"
        if self.steps is not None:  # F<=3 "goal": the bound tells it from F "goal"
            lo, hi = self.steps
            if (lo, hi) == (1, 1) and self.left_text is None:  # X phi (F[1,1] phi, the same)
                return f"X {self.right_text or ''}"
            window = f"<={hi}" if lo == 0 else f">={lo}" if hi is None else f"[{lo},{hi}]"
            return f"F{window} {self.right_text or ''}"
        return ("G " if self.negated else "F ") + (self.right_text or "")

    def target_mask(self, model) -> np.ndarray:
        """States where the reach target holds (``phi`` of ``F phi``, ``psi`` of ``U``, ``!phi`` of ``G``)."""
        from mopmc.properties.states import state_mask

        return state_mask(self.right_text or "false", model.labels, model.n_states)

    def hold_mask(self, model) -> np.ndarray:
        """States where the left side of ``U`` holds (all states for ``F`` and ``G``)."""
        from mopmc.properties.states import state_mask

        return state_mask(self.left_text or "true", model.labels, model.n_states)

    def to_json(self) -> dict:
        """``index``, ``formula`` (thresholds as decimals), ``name``; with a bound also
        ``comparison`` and the numeric ``threshold``; with a step bound ``steps`` (``[lo, hi]``)."""
        out = {"index": self.index, "formula": self.text, "name": self.name}
        if self.threshold is not None:
            out["comparison"] = self.comparison
            out["threshold"] = self.threshold
        if self.steps is not None:  # [lo, hi]: the steps it counts (hi null: no upper bound)
            out["steps"] = list(self.steps)
        return out


QueryKind = Literal["value", "achievability", "numerical", "pareto"]


@dataclass(frozen=True)
class Property:
    """A parsed property: one objective, or ``multi(...)`` of several.

    ``kind`` follows Storm: a single objective is ``value`` (with a threshold it is still computed,
    then compared); ``multi`` with 0 queries is ``achievability``, 1 is ``numerical``, 2+ ``pareto``.
    """

    index: int
    text: str
    name: str | None
    objectives: tuple[Objective, ...]
    multi: bool

    @property
    def kind(self) -> QueryKind:
        if not self.multi:
            return "value"
        queries = sum(o.is_query for o in self.objectives)
        return "achievability" if queries == 0 else "numerical" if queries == 1 else "pareto"
