"""A PRISM program (parsed by Storm) compiled to arrays, explored, and assembled into a SparseMDP."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

import numpy as np

from mopmc.errors import InvalidModelError, MopmcError
from mopmc.io import storm
from mopmc.io.explicit import explore as ex
from mopmc.io.explicit.bytecode import Code, NotCompilable, conjuncts, equality_test
from mopmc.io.explicit.rewards_text import ITEMS_MODULE, reward_items, strip_comments, with_items_module
from mopmc.model.sparse_mdp import SparseMDP, StateValuations

MAX_STATES = 1 << 31


def build(
    path: Path,
    constants: Mapping[str, str],
    formulas=(),
    *,
    valuations: bool = False,
    source: str | None = None,
) -> SparseMDP | None:
    """Build the PRISM model in ``path`` ourselves; ``None`` when it needs Storm's builder."""
    if path.suffix.lower() not in storm.PRISM_SUFFIXES:
        return None
    try:
        text = strip_comments(path.read_text())
        reward_names, items = reward_items(text)
        program = storm.parse_program_text(with_items_module(text, items), path)
        if program is None:
            return None
        program = storm.define_constants(program, path, constants)
        program = program.substitute_constants().substitute_formulas()
        return _build(program, reward_names, items, formulas, valuations, source or str(path))
    except InvalidModelError:
        raise
    except (NotCompilable, MopmcError, RuntimeError, ValueError, UnicodeDecodeError, OSError):
        return None


def _variables(program):
    """``(names, kinds, lo, hi, init)`` of every variable in Storm's order: Booleans, then integers,
    each global ones first and then module by module."""
    modules = [m for m in program.modules if m.name != ITEMS_MODULE]
    out = []
    for v in [*program.global_boolean_variables, *(v for m in modules for v in m.boolean_variables)]:
        init = v.initial_value_expression.evaluate_as_bool() if v.initial_value_expression is not None else False
        out.append((v.name, "bool", 0, 1, int(init)))
    for v in [*program.global_integer_variables, *(v for m in modules for v in m.integer_variables)]:
        lo = v.lower_bound_expression.evaluate_as_int()
        hi = v.upper_bound_expression.evaluate_as_int()
        init = v.initial_value_expression.evaluate_as_int() if v.initial_value_expression is not None else lo
        out.append((v.name, "int", lo, hi, init))
    return out


def _mentions_variables(formulas, names) -> bool:
    """Whether a property uses an atomic expression over the variables (Storm's builder adds those as labels)."""
    for f in formulas:
        text = re.sub(r'"[^"]*"', "", str(f))
        if set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)) & names:
            return True
    return False


def _build(program, reward_names, items, formulas, valuations, source) -> SparseMDP | None:
    kind = program.model_type.name
    if kind not in ("MDP", "DTMC") or program.has_initial_states_expression:
        return None
    if [r.name for r in program.reward_models] != reward_names:
        return None
    variables = _variables(program)
    names = [v[0] for v in variables]
    if _mentions_variables(formulas, set(names)):
        return None
    index = {n: j for j, n in enumerate(names)}
    lo = np.array([v[2] for v in variables], np.int64)
    hi = np.array([v[3] for v in variables], np.int64)
    width = np.array([max(1, int(h - l).bit_length()) for l, h in zip(lo, hi)], np.int64)
    if width.sum() > 62 or np.any(lo > hi):
        return None
    shift = np.concatenate([[0], np.cumsum(width)[:-1]]).astype(np.int64)
    mask = (np.int64(1) << width) - 1
    init_values = np.array([v[4] for v in variables], np.int64)
    if np.any(init_values < lo) or np.any(init_values > hi):
        return None
    init = int(np.sum((init_values - lo) << shift))

    code = Code(index)
    tables = _commands(program, code, index, lo, hi, shift, mask)
    commands = [f"({m.name}: {c})" for m in program.modules if m.name != ITEMS_MODULE for c in m.commands]
    action_of_gen = tables.pop("action_of_gen")
    rows, consts, start = code.arrays()
    status, info, keys, row_groups, indptr, targets, probs, choice_gen = ex.explore(
        np.int64(init), lo, hi, shift, mask, rows, consts, start, np.int64(code.depth),
        *tables.values(), kind == "DTMC", np.int64(MAX_STATES),
    )
    if status == ex.OUT_OF_BOUNDS:
        state, var, value, command = (int(x) for x in info)
        valuation = ", ".join(f"{nm}={int(v)}" for nm, v in zip(names, ex.decode(keys[state : state + 1], lo, shift, mask)[0]))
        raise InvalidModelError(
            f"{source}: state [{valuation}]: command {commands[command]} sets {names[var]} to {value}, "
            f"outside its range [{lo[var]}..{hi[var]}]"
        )
    if status != ex.OK:
        return None
    values = ex.decode(keys, lo, shift, mask)
    n = len(keys)
    n_choices = len(choice_gen)
    state_of_choice = np.repeat(np.arange(n, dtype=np.int64), np.diff(row_groups))

    items_module = next(m for m in program.modules if m.name == ITEMS_MODULE)
    item_exprs = [(c.guard_expression, c.updates[0].probability_expression) for c in items_module.commands]
    rewards = {}
    is_command = choice_gen >= 0
    for name in sorted(reward_names):
        mine = [(it, e) for it, e in zip(items, item_exprs) if it.model == name]
        state_terms = [e for it, e in mine if it.action is None]
        vec = np.zeros(n_choices)
        if state_terms:  # Storm gives the self-loop of a deadlock state no state reward
            expr = code_for(code, state_terms)
            vec += _at(code, values, state_of_choice, np.where(is_command, expr, -1).astype(np.int64))
        for action in sorted({it.action for it, _ in mine if it.action is not None}):
            terms = [e for it, e in mine if it.action == action]
            expr = code_for(code, terms)
            gens = [g for g, a in enumerate(action_of_gen) if a == action]  # the deadlock loop (-1) is no command
            which = np.where(is_command & np.isin(choice_gen, gens), expr, -1).astype(np.int64)
            vec += _at(code, values, state_of_choice, which)
        rewards[name] = vec

    labels = {}
    states = np.arange(n, dtype=np.int64)
    for label in program.labels:
        e = code.add(label.expression)
        labels[label.name] = _at(code, values, states, np.full(n, e, np.int64)) != 0.0
    init_mask = np.zeros(n, bool)
    init_mask[0] = True
    labels["init"] = init_mask
    labels["deadlock"] = np.zeros(n, bool)
    labels["deadlock"][state_of_choice[~is_command]] = True

    per_gen = np.array(action_of_gen + [""], dtype=object)
    used = np.unique(choice_gen)
    action_names = tuple(sorted({per_gen[g] for g in used}))  # as Storm: the actions of some choice
    position = {a: i for i, a in enumerate(action_names)}
    actions = np.array([position.get(a, -1) for a in per_gen], np.int64)[choice_gen]
    vals = None
    if valuations:
        kinds = tuple(v[1] for v in variables)
        vals = StateValuations(tuple(names), kinds, values)
    return SparseMDP(
        row_groups, indptr, targets, probs, 0, rewards=rewards, labels=labels,
        action_names=action_names, actions=actions, valuations=vals, source=source,
    )


def code_for(code: Code, terms) -> int:
    """One expression: the sum over ``(guard, value)`` terms of ``guard ? value : 0``."""
    return code.add_guarded_sum(terms)


def _at(code: Code, values, state_of, expr_of) -> np.ndarray:
    rows, consts, start = code.arrays()
    return ex.evaluate_at(rows, consts, start, np.int64(code.depth), values, state_of, expr_of)


def literal(e) -> float:
    if e.has_boolean_type():
        return 1.0 if e.evaluate_as_bool() else 0.0
    if e.has_integer_type():
        return float(e.evaluate_as_int())
    return float(e.evaluate_as_double())


def _commands(program, code: Code, index, lo, hi, shift, mask) -> dict:
    """The kernel's command and generator tables (see :func:`mopmc.io.explicit.explore.explore`)."""
    cmd_guard, pre_ptr, pre_var, pre_val = [], [0], [], []
    upd_ptr, upd_prob, asg_ptr, asg_var, asg_expr = [0], [], [0], [], []
    upd_pval, upd_clear, upd_set = [], [], []
    modules = [m for m in program.modules if m.name != ITEMS_MODULE]
    cid: dict[tuple[int, int], int] = {}
    for mi, module in enumerate(modules):
        for ci, command in enumerate(module.commands):
            cid[(mi, ci)] = len(cmd_guard)
            rest = []
            for conj in conjuncts(command.guard_expression):
                test = equality_test(conj, index)
                if test is None:
                    rest.append(conj)
                else:
                    pre_var.append(test[0])
                    pre_val.append(test[1])
            pre_ptr.append(len(pre_var))
            cmd_guard.append(code.add_conjunction(rest))
            for update in command.updates:
                p = update.probability_expression
                upd_prob.append(-1 if p.is_literal() else code.add(p))
                upd_pval.append(literal(p) if p.is_literal() else 0.0)
                clear = put = 0
                for a in update.assignments:
                    name = a.variable.name
                    if name not in index:
                        raise NotCompilable(f"assignment to {name!r}")
                    j = index[name]
                    if a.expression.is_literal():  # folded into the update's constant bit pattern
                        value = int(literal(a.expression))
                        if not lo[j] <= value <= hi[j]:
                            raise NotCompilable(f"{name} := {value} out of bounds")
                        clear |= int(mask[j]) << int(shift[j])
                        put |= (value - int(lo[j])) << int(shift[j])
                    else:
                        asg_var.append(j)
                        asg_expr.append(code.add(a.expression))
                asg_ptr.append(len(asg_var))
                upd_clear.append(clear)
                upd_set.append(put)
            upd_ptr.append(len(upd_prob))
    gen_part_ptr, part_cmd_ptr, part_cmd, action_of_gen = [0], [0], [], []
    for mi, module in enumerate(modules):
        for ci, command in enumerate(module.commands):
            if not command.is_labeled:
                part_cmd.append(cid[(mi, ci)])
                part_cmd_ptr.append(len(part_cmd))
                gen_part_ptr.append(len(part_cmd_ptr) - 1)
                action_of_gen.append("")
    for action in sorted(program.get_synchronizing_action_indices()):
        name = program.get_action_name(action)
        for mi, module in enumerate(modules):
            mine = [cid[(mi, ci)] for ci, c in enumerate(module.commands) if c.is_labeled and c.action_index == action]
            if mine:
                part_cmd.extend(mine)
                part_cmd_ptr.append(len(part_cmd))
        if len(part_cmd_ptr) - 1 > gen_part_ptr[-1]:
            gen_part_ptr.append(len(part_cmd_ptr) - 1)
            action_of_gen.append(name)

    def arr(x):
        return np.array(x, np.int64)

    return {
        "cmd_guard": arr(cmd_guard), "cmd_pre_ptr": arr(pre_ptr), "pre_var": arr(pre_var), "pre_val": arr(pre_val),
        "cmd_upd_ptr": arr(upd_ptr), "upd_prob": arr(upd_prob), "upd_pval": np.array(upd_pval, np.float64),
        "upd_clear": arr(upd_clear), "upd_set": arr(upd_set), "upd_asg_ptr": arr(asg_ptr),
        "asg_var": arr(asg_var), "asg_expr": arr(asg_expr),
        "gen_part_ptr": arr(gen_part_ptr), "part_cmd_ptr": arr(part_cmd_ptr), "part_cmd": arr(part_cmd),
        "action_of_gen": action_of_gen,
    }
