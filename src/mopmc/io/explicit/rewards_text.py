"""Reward structures read off PRISM source text (stormpy does not expose their items).

Each item ``[action] guard : value;`` (``action`` absent for a state reward) is handed back to Storm
as a command ``[] guard -> value + z : true;`` of one extra module (with a variable ``z``, so that
negative constant values pass as probabilities) appended to the program text; Storm
parses it with the program's constants and formulas, so the builder reads the item's guard and value
as ordinary, fully substituted expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mopmc.io.explicit.bytecode import NotCompilable

ITEMS_MODULE = "mopmc_reward_items_"
ITEMS_VARIABLE = "mopmc_reward_zero_"


@dataclass(frozen=True)
class RewardItem:
    model: str
    action: str | None  # None: a state reward; "" : unlabelled commands
    guard: str
    value: str


def strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


def reward_items(text: str) -> tuple[list[str], list[RewardItem]]:
    """Reward-model names in order and their items, from PRISM text without comments."""
    names, items = [], []
    for m in re.finditer(r'\brewards\b\s*(?:"([^"]*)")?(.*?)\bendrewards\b', text, flags=re.S):
        name = m.group(1) or ""
        names.append(name)
        for raw in m.group(2).split(";"):
            raw = raw.strip()
            if not raw:
                continue
            action = None
            if raw.startswith("["):
                close = raw.find("]")
                if close < 0:
                    raise NotCompilable(f"reward item {raw!r}")
                action = raw[1:close].strip()
                raw = raw[close + 1 :]
            if "->" in raw:
                raise NotCompilable("transition rewards")
            cut = _separator(raw)
            items.append(RewardItem(name, action, raw[:cut].strip(), raw[cut + 1 :].strip()))
    return names, items


def _separator(item: str) -> int:
    """Index of the ':' between guard and value (those of ``c ? a : b`` pair with their '?')."""
    pending = 0
    for i, ch in enumerate(item):
        if ch == "?":
            pending += 1
        elif ch == ":":
            if pending == 0:
                return i
            pending -= 1
    raise NotCompilable(f"reward item {item!r} without ':'")


ATOM_LABEL = "mopmc_atom_{}_"


def with_items_module(text: str, items: list[RewardItem], atoms=()) -> str:
    """The program text with one extra module holding each item as a command, and a label
    ``mopmc_atom_K_`` for each atomic expression ``atoms[K]`` of the properties."""
    # z is written (first command), so that Storm's simplification does not fold it into a constant
    z = ITEMS_VARIABLE
    lines = [f"\nmodule {ITEMS_MODULE}", f"  {z} : [0..1];", f"  [] {z} = 0 -> ({z}'=1);"]
    for it in items:
        # "+ variable": a constant negative value would be rejected as a probability
        lines.append(f"  [] ({it.guard}) -> ({it.value}) + {ITEMS_VARIABLE} : true;")
    lines.append("endmodule")
    lines += [f'label "{ATOM_LABEL.format(k)}" = ({atom});' for k, atom in enumerate(atoms)]
    return text + "\n".join(lines) + "\n"


def item_value(probability):
    """The value expression of an item's command (its probability without the ``+ z``); the items'
    commands follow the module's first command (the one that writes ``z``)."""
    if (
        probability.is_function_application
        and probability.operator.name == "PLUS"
        and probability.arity == 2
        and probability.get_operand(1).is_variable()
        and probability.get_operand(1).get_identifier() == ITEMS_VARIABLE
    ):
        return probability.get_operand(0)
    raise NotCompilable(f"reward item value {probability}")
