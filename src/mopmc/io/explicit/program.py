"""A PRISM program (parsed by Storm) compiled to arrays, explored, and assembled into a SparseMDP."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from mopmc.errors import ConfigError, InvalidModelError, MopmcError
from mopmc.io import storm
from mopmc.io.explicit import explore as ex
from mopmc.io.explicit import kernels as kx
from mopmc.io.explicit.bytecode import Code, NotCompilable, conjuncts, counter_update, implied_ranges, range_test, rational_literal
from mopmc.io.explicit.rewards_text import ATOM_LABEL, ITEMS_MODULE, item_value, reward_items, strip_comments, with_items_module
from mopmc.model.sparse_mdp import SparseMDP, StateValuations

MAX_STATES = 1 << 31
# the explorer numbers states through a dense int32 table over every valuation up to this many (256 MiB)
DENSE_MAX = 1 << 26


def build(
    path: Path,
    constants: Mapping[str, str],
    atoms: Sequence[str] | None = (),
    *,
    valuations: bool = False,
    source: str | None = None,
    min_space: int = 0,
    before_explore: Callable[[], None] | None = None,
    text: str | None = None,
    why: list[str] | None = None,
) -> SparseMDP | None:
    """Build the PRISM model in ``path`` ourselves; ``None`` when it needs Storm's builder, or when
    its variables span fewer than ``min_space`` valuations (a small model: Storm's builder is done
    before numba has started). ``atoms``: the properties' atomic expressions (Storm's printed
    text, :func:`mopmc.properties.states.atomic_expressions`), built as labels of that name;
    ``None`` when they are not known (Storm's builder then adds them). ``before_explore``: called
    once the explorer's kernels are loaded, just before the exploration (which releases the GIL).
    ``text``: the file's text when the caller has read it (else it is read here). ``why``: a list
    that gets the reason when the result is ``None``."""
    if path.suffix.lower() not in storm.PRISM_SUFFIXES or atoms is None:
        return _decline(why, "atomic expressions in the properties that mopmc does not parse" if atoms is None
                        else "not a PRISM file")
    try:
        text = strip_comments(path.read_text() if text is None else text)
        reward_names, items = reward_items(text)
        atoms = list(atoms)
        program = storm.parse_program_text(with_items_module(text, items, atoms), path)
        if program is None:
            return _decline(why, "Storm rejects the program as mopmc rewrites its reward items (as command probabilities)")
        program = storm.define_constants(program, path, constants, text)  # (comments stripped line by line)
        program = program.substitute_constants().substitute_formulas()
        if program.model_type.name not in ("MDP", "DTMC"):
            return _decline(why, f"a {program.model_type.name} (mopmc builds MDPs and DTMCs)")
        if program.has_initial_states_expression:  # (variables have no initial values to read)
            return _decline(why, "an init ... endinit block (several initial states)")
        if min_space and space(program) < min_space:
            return _decline(why, f"fewer than {min_space} valuations")
        return _build(program, reward_names, items, atoms, valuations, source or str(path), before_explore, why)
    except (InvalidModelError, ConfigError):  # the model's fault, or the user's settings (MOPMC_BUILD_THREADS)
        raise
    except NotCompilable as exc:
        return _decline(why, str(exc))
    except (MopmcError, RuntimeError, ValueError, UnicodeDecodeError, OSError) as exc:
        return _decline(why, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")


def _decline(why: list[str] | None, reason: str) -> None:
    if why is not None:
        why.append(reason)
    return None


#: why the explorer stopped, by status
_STATUS = {
    kx.NONDETERMINISTIC_DTMC: "overlapping guards in a DTMC (several commands enabled in one state)",
    kx.BAD_PROBABILITY: "a probability outside [0, 1] or not a number",
    kx.NOT_ONE: "probabilities that do not sum to 1",
    kx.TOO_MANY: f"more than {MAX_STATES} states",
}


#: how Storm prints the bound of an integer variable declared without one (``x : int``)
_UNSET = "__storm::notinitialized__"


def _variables(program):
    """``(names, kinds, lo, hi, init)`` of every variable in Storm's order: Booleans, then integers,
    each global ones first and then module by module."""
    modules = [m for m in program.modules if m.name != ITEMS_MODULE]
    out = []
    for v in [*program.global_boolean_variables, *(v for m in modules for v in m.boolean_variables)]:
        init = v.initial_value_expression.evaluate_as_bool() if v.initial_value_expression is not None else False
        out.append((v.name, "bool", 0, 1, int(init)))
    for v in [*program.global_integer_variables, *(v for m in modules for v in m.integer_variables)]:
        if _UNSET in (str(v.lower_bound_expression), str(v.upper_bound_expression)):
            # an unbounded `x : int` (Storm's builder takes it); touching the unset bound crashes stormpy
            raise NotCompilable(f"unbounded integer variable {v.name}")
        lo = v.lower_bound_expression.evaluate_as_int()
        hi = v.upper_bound_expression.evaluate_as_int()
        init = v.initial_value_expression.evaluate_as_int() if v.initial_value_expression is not None else lo
        out.append((v.name, "int", lo, hi, init))
    return out


def space(program) -> int:
    """The number of valuations of the program's variables (a bound on its states)."""
    return math.prod(hi - lo + 1 for _, _, lo, hi, _ in _variables(program))


@dataclass(frozen=True)
class _Layout:
    """How a state is packed into an int64: variable ``j`` as value - ``lo[j]`` in ``mask[j]`` bits
    at ``shift[j]``."""

    names: list
    kinds: tuple
    lo: np.ndarray
    hi: np.ndarray
    shift: np.ndarray
    mask: np.ndarray
    init: int

    @classmethod
    def of(cls, variables) -> "_Layout | None":
        lo = np.array([v[2] for v in variables], np.int64)
        hi = np.array([v[3] for v in variables], np.int64)
        width = np.array([max(1, int(h - l).bit_length()) for l, h in zip(lo, hi)], np.int64)
        init = np.array([v[4] for v in variables], np.int64)
        if width.sum() > 62 or np.any(lo > hi) or np.any(init < lo) or np.any(init > hi):
            return None
        shift = np.concatenate([[0], np.cumsum(width)[:-1]]).astype(np.int64)
        packed = int(np.sum((init - lo) << shift))
        return cls([v[0] for v in variables], tuple(v[1] for v in variables), lo, hi, shift, (np.int64(1) << width) - 1, packed)

    def packing(self):
        return self.lo, self.shift, self.mask

    def dense_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``(strides, index)`` of a dense state index over every valuation (mixed radix; the index
        zeroed by ``np.zeros``, so its pages cost nothing until the explorer writes them), or two
        empty arrays (hash the states) when there are more than ``DENSE_MAX`` valuations."""
        sizes = [int(h - l) + 1 for l, h in zip(self.lo, self.hi)]
        if math.prod(sizes) > DENSE_MAX:
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        strides = np.array([math.prod(sizes[:j]) for j in range(len(sizes))], np.int64)
        return strides, np.zeros(math.prod(sizes), np.int32)


def _build(program, reward_names, items, atoms, valuations, source, before_explore=None, why=None) -> SparseMDP | None:
    if [r.name for r in program.reward_models] != reward_names:
        return _decline(why, "reward models that mopmc reads differently from Storm")
    variables = _variables(program)
    layout = _Layout.of(variables)
    if layout is None:
        return _decline(why, "variables that do not pack into 62 bits, or an initial value outside its range")
    index = {n: j for j, n in enumerate(layout.names)}
    code = Code(index)
    tables = _commands(program, code, index, layout.lo, layout.hi, layout.shift, layout.mask)
    action_of_gen = tables.pop("action_of_gen")
    rows, consts, start = code.arrays()
    if before_explore is not None:
        ex.load_kernels()
        before_explore()
    status, info, keys, row_groups, indptr, targets, probs, choice_gen = ex.explore(
        np.int64(layout.init), layout.lo, layout.hi, layout.shift, layout.mask, rows, consts, start,
        np.int64(code.depth), *tables.values(), program.model_type.name == "DTMC", np.int64(MAX_STATES),
        *layout.dense_index(),
    )
    if status == ex.OUT_OF_BOUNDS:
        raise _out_of_bounds(program, layout, keys, info, source)
    if status != ex.OK:
        return _decline(why, _STATUS.get(int(status), f"explorer status {int(status)}"))
    items_module = next(m for m in program.modules if m.name == ITEMS_MODULE)
    item_exprs = [(c.guard_expression, item_value(c.updates[0].probability_expression)) for c in list(items_module.commands)[1:]]
    rewards = _rewards(code, index, layout, keys, row_groups, choice_gen, action_of_gen, items, item_exprs, reward_names)
    labels = _labels(program, code, index, layout, keys, row_groups, choice_gen, atoms)
    action_names, actions = _actions(action_of_gen, choice_gen)
    vals = StateValuations(tuple(layout.names), layout.kinds, ex.decode(keys, *layout.packing())) if valuations else None
    row_groups, indptr, targets, probs, actions = map(_frozen_out, (row_groups, indptr, targets, probs, actions))
    return SparseMDP(
        row_groups, indptr, targets, probs, 0, rewards=rewards, labels=labels,
        action_names=action_names, actions=actions, valuations=vals, source=source,
    )


def _out_of_bounds(program, layout: _Layout, keys, info, source) -> InvalidModelError:
    state, var, value, command = (int(x) for x in info)
    commands = [f"({m.name}: {c})" for m in program.modules if m.name != ITEMS_MODULE for c in m.commands]
    values = ex.decode(keys[state : state + 1], *layout.packing())[0]
    valuation = ", ".join(f"{nm}={int(v)}" for nm, v in zip(layout.names, values))
    return InvalidModelError(
        f"{source}: state [{valuation}]: command {commands[command]} sets {layout.names[var]} to {value}, "
        f"outside its range [{layout.lo[var]}..{layout.hi[var]}]"
    )


def _rewards(code: Code, index, layout: _Layout, keys, row_groups, choice_gen, action_of_gen, items, item_exprs,
             names) -> dict:
    """Every reward model's vector over the choices, in one pass over the states: state items at
    every choice of a state (not the deadlock self-loop, as in Storm), action items at their
    action's choices. An item's guard conjuncts that test one variable against a literal are
    tested on the packed state (``range_test``); what is left of the guard, and a value that is
    not a literal, run as bytecode."""
    order = sorted(names)
    model_of = {name: m for m, name in enumerate(order)}
    actions = {a: k for k, a in enumerate(dict.fromkeys(action_of_gen))}
    it_model, it_action, it_guard, it_expr, it_value, pre_ptr, pre_var, pre_lo, pre_hi = [], [], [], [], [], [0], [], [], []
    for it, (guard, value) in zip(items, item_exprs):
        it_model.append(model_of[it.model])
        # -1: a state item; -2: an action no command has (never rewarded)
        it_action.append(-1 if it.action is None else actions.get(it.action, -2))
        it_guard.append(_guard(code, index, guard, pre_ptr, pre_var, pre_lo, pre_hi))
        it_expr.append(-1 if value.is_literal() else code.add(value))
        it_value.append(literal(value) if value.is_literal() else 0.0)
    rows, consts, start = code.arrays()
    def arr(x):
        return np.array(x, np.int64)

    gen_action = arr([actions[a] for a in action_of_gen])
    out = ex.choice_rewards(
        rows, consts, start, np.int64(code.depth), keys, *layout.packing(), row_groups, choice_gen, gen_action,
        np.int64(len(order)), arr(it_model), arr(it_action), arr(it_guard), arr(it_expr),
        np.array(it_value, np.float64), arr(pre_ptr), arr(pre_var), arr(pre_lo), arr(pre_hi),
    )
    return {name: _frozen_out(out[m]) for m, name in enumerate(order)}


def _labels(program, code: Code, index, layout: _Layout, keys, row_groups, choice_gen, atoms) -> dict:
    """The program's labels, the atoms' labels, ``init`` and ``deadlock`` (the states Storm gives a
    self-loop). All labels in one pass over the states; conjuncts testing one variable against a
    literal are range tests on the packed state (as guards)."""
    atom_names = {ATOM_LABEL.format(k): atom for k, atom in enumerate(atoms)}
    names, l_expr, pre_ptr, pre_var, pre_lo, pre_hi = [], [], [0], [], [], []
    for label in program.labels:
        names.append(atom_names.get(label.name, label.name))
        l_expr.append(_guard(code, index, label.expression, pre_ptr, pre_var, pre_lo, pre_hi))
    rows, consts, start = code.arrays()
    def arr(x):
        return np.array(x, np.int64)

    holds = ex.state_labels(rows, consts, start, np.int64(code.depth), keys, *layout.packing(), arr(l_expr),
                            arr(pre_ptr), arr(pre_var), arr(pre_lo), arr(pre_hi))
    labels = {name: holds[i] for i, name in enumerate(names)}
    n = len(keys)
    labels["init"] = np.zeros(n, bool)
    labels["init"][0] = True
    labels["deadlock"] = np.zeros(n, bool)
    labels["deadlock"][np.searchsorted(row_groups, np.flatnonzero(choice_gen < 0), side="right") - 1] = True
    return labels


def _actions(action_of_gen, choice_gen):
    """Storm's action names (those of some choice, sorted; "" for unlabelled) and each choice's index."""
    per_gen = np.array(action_of_gen + [""], dtype=object)
    # the generators some choice has (-1, Storm's deadlock self-loop, is the "" appended last): a
    # count over the few generators, not np.unique's sort or hash of every choice (24 ms at 7M)
    used = np.flatnonzero(np.bincount(choice_gen + 1, minlength=len(per_gen))) - 1
    action_names = tuple(sorted({per_gen[g] for g in used}))
    position = {a: i for i, a in enumerate(action_names)}
    return action_names, np.array([position.get(a, -1) for a in per_gen], np.int64)[choice_gen]


def _frozen_out(a: np.ndarray) -> np.ndarray:
    """A kernel's output, read-only: SparseMDP adopts it without a copy."""
    a.setflags(write=False)
    return a


def literal(e) -> float:
    if e.has_boolean_type():
        return 1.0 if e.evaluate_as_bool() else 0.0
    if e.has_integer_type():
        return float(e.evaluate_as_int())
    return rational_literal(e)


def _guard(code: Code, index, guard, pre_ptr, pre_var, pre_lo, pre_hi) -> int:
    """Split a guard into range tests of one variable against a literal (appended to ``pre_*``,
    then the new end to ``pre_ptr``) and the rest, compiled: its expression id, -1 for none. The
    rest's implied range tests (:func:`implied_ranges`) are tested first too."""
    rest = []
    tests = []
    for conj in conjuncts(guard):
        test = range_test(conj, index)
        if test is None:
            rest.append(conj)
            tests.extend((j, lo, hi) for j, (lo, hi) in implied_ranges(conj, index).items())
        else:
            tests.insert(0, test)
    for j, lo, hi in tests:
        pre_var.append(j)
        pre_lo.append(lo)
        pre_hi.append(hi)
    pre_ptr.append(len(pre_var))
    return code.add_conjunction(rest) if rest else -1


def _commands(program, code: Code, index, lo, hi, shift, mask) -> dict:
    """The kernel's command and generator tables (see :func:`mopmc.io.explicit.explore.explore`)."""
    cmd_guard, pre_ptr, pre_var, pre_lo, pre_hi = [], [0], [], [], []
    upd_ptr, upd_prob, asg_ptr, asg_var, asg_expr, asg_src, asg_delta = [0], [], [0], [], [], [], []
    upd_pval, upd_clear, upd_set = [], [], []
    modules = [m for m in program.modules if m.name != ITEMS_MODULE]
    cid: dict[tuple[int, int], int] = {}
    for mi, module in enumerate(modules):
        for ci, command in enumerate(module.commands):
            cid[(mi, ci)] = len(cmd_guard)
            cmd_guard.append(_guard(code, index, command.guard_expression, pre_ptr, pre_var, pre_lo, pre_hi))
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
                        counter = counter_update(a.expression, index)
                        asg_var.append(j)
                        asg_expr.append(-1 if counter else code.add(a.expression))
                        asg_src.append(counter[0] if counter else 0)
                        asg_delta.append(counter[1] if counter else 0)
                asg_ptr.append(len(asg_var))
                upd_clear.append(clear)
                upd_set.append(put)
            upd_ptr.append(len(upd_prob))
    # generators: each module's unlabelled commands (one choice per enabled command), then each
    # synchronising action (one choice per combination of enabled commands of its modules)
    parts: list[list[int]] = []
    gen_part_ptr, action_of_gen = [0], []
    for mi, module in enumerate(modules):
        mine = [cid[(mi, ci)] for ci, c in enumerate(module.commands) if not c.is_labeled]
        if mine:
            parts.append(mine)
            gen_part_ptr.append(len(parts))
            action_of_gen.append("")
    for action in sorted(program.get_synchronizing_action_indices()):
        for mi, module in enumerate(modules):
            mine = [cid[(mi, ci)] for ci, c in enumerate(module.commands) if c.is_labeled and c.action_index == action]
            if mine:
                parts.append(mine)
        if len(parts) > gen_part_ptr[-1]:
            gen_part_ptr.append(len(parts))
            action_of_gen.append(program.get_action_name(action))
    part_key, part_base, bucket_ptr, bucket_cmd = _buckets(parts, pre_ptr, pre_var, pre_lo, pre_hi, lo, hi)
    def arr(x):
        return np.array(x, np.int64)

    return {
        "cmd_guard": arr(cmd_guard), "cmd_pre_ptr": arr(pre_ptr), "pre_var": arr(pre_var),
        "pre_lo": arr(pre_lo), "pre_hi": arr(pre_hi),
        "cmd_upd_ptr": arr(upd_ptr), "upd_prob": arr(upd_prob), "upd_pval": np.array(upd_pval, np.float64),
        "upd_clear": arr(upd_clear), "upd_set": arr(upd_set), "upd_asg_ptr": arr(asg_ptr),
        "asg_var": arr(asg_var), "asg_expr": arr(asg_expr), "asg_src": arr(asg_src), "asg_delta": arr(asg_delta),
        "gen_part_ptr": arr(gen_part_ptr), "part_key": arr(part_key), "part_base": arr(part_base),
        "bucket_ptr": arr(bucket_ptr), "bucket_cmd": arr(bucket_cmd),
        "action_of_gen": action_of_gen,
    }


MAX_BUCKETS = 256


def _buckets(parts, pre_ptr, pre_var, pre_lo, pre_hi, lo, hi):
    """Each part's commands bucketed by the value of one variable their guards test for equality
    (the most tested one with at most MAX_BUCKETS values), so a state looks only at the commands
    that can be enabled: bucket ``v`` of part ``p`` is
    ``bucket_cmd[bucket_ptr[part_base[p] + v] : bucket_ptr[part_base[p] + v + 1]]`` for the
    variable's value ``lo + v`` (one bucket, ``v = 0``, when ``part_key[p]`` is -1); a command is in
    the buckets of the values its guard's range tests of that variable allow. Buckets keep the
    commands' order (Storm's choice order)."""
    part_key, part_base, bucket_ptr, bucket_cmd = [], [], [0], []
    for cmds in parts:
        tests: dict[int, dict[int, tuple[int, int]]] = {}
        for c in cmds:
            t = tests[c] = {}
            for k in range(pre_ptr[c], pre_ptr[c + 1]):
                a, b = t.get(pre_var[k], (-(1 << 62), 1 << 62))
                t[pre_var[k]] = (max(a, pre_lo[k]), min(b, pre_hi[k]))
        counts: dict[int, int] = {}
        for t in tests.values():
            for j, (a, b) in t.items():
                if a == b and hi[j] - lo[j] < MAX_BUCKETS:
                    counts[j] = counts.get(j, 0) + 1
        key = max(counts, key=lambda j: (counts[j], -j)) if counts else -1
        part_key.append(key)
        part_base.append(len(bucket_ptr) - 1)
        values = range(int(lo[key]), int(hi[key]) + 1) if key >= 0 else [None]
        for v in values:
            bucket_cmd.extend(c for c in cmds if v is None or _allows(tests[c].get(key), v))
            bucket_ptr.append(len(bucket_cmd))
    return part_key, part_base, bucket_ptr, bucket_cmd


def _allows(test, v) -> bool:
    return test is None or test[0] <= v <= test[1]
