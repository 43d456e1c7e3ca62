"""Differential testing: random PRISM programs, every property checked by mopmc and by Storm's exact engine.

Each program is generated from ``(seed, index)`` alone (``numpy.random.default_rng([seed, index])``):
1-3 bounded integer variables in 1-2 modules (synchronising on shared actions sometimes), MDPs with
nondeterminism and some DTMCs, probabilities written as decimals and as fractions, now and then
extreme exits (1e-6 .. 1e-12: near-traps and long walks), labels, 1-3 reward structures (state and
action rewards), with or without an absorbing sink. Its properties cover ``P[F]``, ``P[G]``,
``P[U]``, ``P[X]``, step bounds, ``R[F]``, ``R[C]``, ``R[C<=k]``, long-run averages and ``multi(...)``
queries (numerical and achievability).

Storm's single-objective values are exact rationals (``stormpy.build_model[stormpy.Rational]`` and
``stormpy.environments.exact()``); mopmc's are compared with them within ``tol * max(1, |storm|)``.
Storm's multi-objective engine is approximate (here to 1e-6 absolute), so ``multi(...)`` values
are compared within ``--multi-tol`` (relative, default 1e-4) and achievability verdicts that differ
where mopmc's margin is within that tolerance count as ``boundary``, not as mismatches.

Every check is one of: ``agree``, ``mismatch``, ``refused`` (mopmc said no in one line: a
:class:`~mopmc.errors.MopmcError`), ``crash`` (any other exception from mopmc: a defect),
``storm-failed`` (Storm raised, whatever mopmc said), ``timeout`` (the check ran past ``--timeout``;
its worker is replaced and the program goes on) or ``boundary``.

    python benchmarks/differential.py --programs 150 --seed 1 [--out /tmp/mopmc-differential] \
        [--engines kernel,torch,lp] [--tol 1e-9] [--jobs 1] [--timeout 60] [--json summary.json]

Programs go to ``OUT/programs/`` (``s<seed>_<index>.nm`` or ``.pm`` beside ``.props``, one property a
line), raw results to ``OUT/results/`` (one JSON file per program, written atomically once the
program is finished; a rerun with the same ``--out`` redoes only the checks missing there). The
classification is recomputed from the raw values on every run, so a rerun with another ``--tol``
costs nothing. ``--jobs 0`` checks in this process, without timeouts (debugging, the tests).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

ENGINES = ("kernel", "torch", "lp")
STATUSES = ("agree", "mismatch", "refused", "crash", "storm-failed", "timeout", "boundary")
MAX_STATES = 3000  # the product of the variables' ranges (reachable states are fewer)
STORM_MULTI_PRECISION = "1/1000000"


# ----------------------------------------------------------------------------------------------
# the generator


@dataclass(frozen=True)
class Check:
    """One property of a program: ``kind`` groups it in the summary (e.g. ``Pmax F``), ``multi``:
    ``None``, ``"numerical"`` or ``"achievability"``."""

    kind: str
    text: str
    multi: str | None = None


@dataclass(frozen=True)
class Program:
    seed: int
    index: int
    model_type: str  # "mdp" or "dtmc"
    text: str
    checks: tuple[Check, ...]
    features: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"s{self.seed}_{self.index:04d}"

    @property
    def suffix(self) -> str:
        return ".nm" if self.model_type == "mdp" else ".pm"


def _prob_text(p: Fraction, rng: np.random.Generator) -> str:
    """``p`` as PRISM text whose rational value is exactly ``p``: a decimal where it has one, else a fraction."""
    if p == 1:
        return "1"
    d = p.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1 and rng.random() < 0.7:  # a finite decimal
        digits = 0
        while (p * 10 ** digits).denominator != 1:
            digits += 1
        s = f"{p.numerator * 10 ** digits // p.denominator}"
        s = s.rjust(digits + 1, "0")
        return f"{s[:-digits]}.{s[-digits:]}" if digits else s
    return f"{p.numerator}/{p.denominator}"


def _distribution(rng: np.random.Generator, n: int) -> list[Fraction]:
    """``n`` positive rationals summing to exactly 1 (decimal or ``k/d`` denominators)."""
    if n == 1:
        return [Fraction(1)]
    denominator = int(rng.choice([2, 3, 4, 5, 6, 7, 8, 10, 12, 100, 1000]))
    while denominator < n:
        denominator *= 2
    cuts = sorted(rng.choice(np.arange(1, denominator), size=n - 1, replace=False).tolist())
    parts = np.diff([0, *cuts, denominator])
    return [Fraction(int(k), denominator) for k in parts]


class _Gen:
    """The state of one program's generation (``rng`` drawn from ``(seed, index)``)."""

    def __init__(self, seed: int, index: int):
        self.rng = np.random.default_rng([seed, index])
        self.seed, self.index = seed, index
        self.features: list[str] = []
        self.inits: dict[str, int] = {}

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    # variables and modules

    def variables(self, n_modules: int) -> list[tuple[str, int, int]]:
        """(name, high, module): ranges 0..high, the product at most MAX_STATES."""
        rng = self.rng
        n = int(rng.integers(max(1, n_modules), 4))
        names = ["x", "y", "z"][:n]
        budget = MAX_STATES
        out = []
        for i, name in enumerate(names):
            left = n - i - 1
            cap = int(min(40, max(1, budget // (2 ** left)) - 1))
            high = int(rng.integers(1, max(2, cap + 1)))
            budget //= high + 1
            module = 0 if i == 0 else (i % n_modules if n_modules > 1 else 0)
            out.append((name, high, module))
        if n_modules > 1 and not any(m == 1 for *_, m in out):
            name, high, _ = out[-1]
            out[-1] = (name, high, 1)
        return out

    def atom(self, variables) -> str:
        name, high, _ = self.pick(variables)
        k = int(self.rng.integers(0, high + 1))
        op = self.pick(["=", "<", ">=", "!=", "<=", ">"])
        if op == "<" and k == 0:
            op = "<="
        if op == ">" and k == high:
            op = ">="
        return f"{name}{op}{k}"

    def guard(self, variables, extra: str | None) -> str:
        atoms = [self.atom(variables) for _ in range(int(self.rng.integers(0, 3)))]
        if extra:
            atoms.insert(0, extra)
        return " & ".join(atoms) if atoms else "true"

    def assignment(self, own) -> str:
        """An update of 1-2 of the module's own variables, always within range."""
        k = 1 if len(own) == 1 or self.chance(0.6) else 2
        idx = self.rng.choice(len(own), size=k, replace=False)
        parts = []
        for i in sorted(idx.tolist()):
            name, high, _ = own[i]
            form = self.pick(["up", "up", "down", "down", "set", "keep", "jump2"])
            if form == "up":
                parts.append(f"({name}'=min({name}+1,{high}))")
            elif form == "down":
                parts.append(f"({name}'=max({name}-1,0))")
            elif form == "jump2":
                parts.append(f"({name}'=min({name}+2,{high}))")
            elif form == "keep":
                parts.append(f"({name}'={name})")
            else:
                parts.append(f"({name}'={int(self.rng.integers(0, high + 1))})")
        return "&".join(parts)

    def updates(self, own) -> str:
        if self.chance(0.12):  # an extreme exit: a near-trap or a long walk
            eps = self.pick(["1e-6", "1e-8", "1e-9", "1e-10", "1e-12", "0.000001", "1/1000000000"])
            if "extreme" not in self.features:
                self.features.append("extreme")
            stay, leave = self.assignment(own), self.assignment(own)
            if self.chance(0.5):
                return f"(1-{eps}):{stay} + {eps}:{leave}"
            return f"{eps}:{leave} + (1-{eps}):{stay}"
        n = int(self.rng.integers(1, 4))
        probs = _distribution(self.rng, n)
        if n == 1 and self.chance(0.5):
            return self.assignment(own)
        return " + ".join(f"{_prob_text(p, self.rng)}:{self.assignment(own)}" for p in probs)

    def program(self) -> Program:
        rng = self.rng
        dtmc = self.chance(0.2)
        n_modules = 1 if self.chance(0.5) else 2
        variables = self.variables(n_modules)
        sink = None
        if self.chance(0.6):
            name, high, _ = variables[0]
            sink = f"{name}={high}"
            self.features.append("sink")
        not_sink = f"!({sink})" if sink else None
        actions = ["a", "b"] if n_modules > 1 and not dtmc else []
        lines = ["dtmc" if dtmc else "mdp", ""]
        action_names = [""]
        for m in range(n_modules):
            own = [v for v in variables if v[2] == m]
            lines.append(f"module m{m}")
            for name, high, _ in own:
                init = 0 if self.chance(0.7) else int(rng.integers(0, high + 1))
                self.inits[name] = init
                lines.append(f"  {name} : [0..{high}] init {init};")
            if dtmc:  # disjoint, complete guards on the module's first variable
                name, high, _ = own[0]
                for v in range(high + 1):
                    guard = f"{name}={v}" + (f" & {not_sink}" if sink and m > 0 else "")
                    if m == 0 and sink == f"{name}={v}":
                        lines.append(f"  [] {guard} -> true;")
                        continue
                    lines.append(f"  [] {guard} -> {self.updates(own)};")
            else:
                if sink and m == 0:
                    lines.append(f"  [] {sink} -> true;")
                for _ in range(int(rng.integers(2, 7))):
                    act = ""
                    if actions and self.chance(0.3):
                        act = self.pick(actions)
                        if "sync" not in self.features:
                            self.features.append("sync")
                    if act and act not in action_names:
                        action_names.append(act)
                    lines.append(f"  [{act}] {self.guard(variables, not_sink)} -> {self.updates(own)};")
                if m == 0:  # a move that is always possible, so that few states deadlock
                    lines.append(f"  [] {self.guard(variables[:1], not_sink) if sink else 'true'} -> {self.updates(own)};")
            lines.append("endmodule")
            lines.append("")
        labels = {}
        # "t": false in the initial state (Storm's multi-objective engine refuses a target true there)
        name, high, _ = variables[-1]
        labels["t"] = f"{name}={self.inits[name] + 1 if self.inits[name] < high else 0}"
        for lab in ("a", "b", "goal"):
            text = self.atom(variables)
            if self.chance(0.3):
                text = f"{text} | {self.atom(variables)}"
            labels[lab] = text
        if sink and self.chance(0.7):
            labels["goal"] = sink
        for lab, text in labels.items():
            lines.append(f'label "{lab}" = {text};')
        rewards = ["r", "c", "d"][: int(rng.integers(1, 4))]
        for r in rewards:
            lines.append(f'rewards "{r}"')
            for _ in range(int(rng.integers(1, 4))):
                value = self.reward_value()
                guard = self.guard(variables, not_sink if sink and self.chance(0.8) else None)
                if not dtmc and self.chance(0.4):
                    act = self.pick(action_names)
                    lines.append(f"  [{act}] {guard} : {value};")
                else:
                    lines.append(f"  {guard} : {value};")
            lines.append("endrewards")
        text = "\n".join(lines) + "\n"
        checks = self.properties(dtmc, rewards, bool(sink))
        features = tuple(self.features) + (("dtmc",) if dtmc else ()) + ((f"modules={n_modules}",))
        return Program(self.seed, self.index, "dtmc" if dtmc else "mdp", text, tuple(checks), features)

    def reward_value(self) -> str:
        form = self.pick(["int", "int", "dec", "frac", "zero"])
        if form == "int":
            return str(int(self.rng.integers(1, 10)))
        if form == "dec":
            return f"{int(self.rng.integers(1, 100)) / 10:g}"
        if form == "frac":
            return f"{int(self.rng.integers(1, 7))}/{int(self.rng.integers(2, 8))}"
        return "0"

    # properties

    def phi(self) -> str:
        return self.pick(['"goal"', '"a"', '"b"', '("goal" | "a")', '!"b"'])

    def properties(self, dtmc: bool, rewards: list[str], sink: bool) -> list[Check]:
        pick, rng = self.pick, self.rng
        out: list[Check] = []

        def sense() -> str:
            return "" if dtmc else pick(["min", "max"])

        def add(kind: str, text: str, multi: str | None = None) -> None:
            out.append(Check(f"{kind}{' (dtmc)' if dtmc else ''}", text, multi))

        r = lambda: pick(rewards)  # noqa: E731
        k = lambda: int(rng.integers(1, 25))  # noqa: E731
        for s in (("",) if dtmc else ("max", "min")):
            add(f"P{s} F", f"P{s}=? [F {self.phi()}]")
            add(f"P{s} G", f"P{s}=? [G {self.phi()}]")
        s = sense()
        left = pick(['"a"', '!"b"', "true"])
        add(f"P{s} U", f"P{s}=? [{left} U {self.phi()}]")
        s = sense()
        add(f"P{s} F<=k", f"P{s}=? [F<={k()} {self.phi()}]")
        s = sense()
        add(f"P{s} X", f"P{s}=? [X {self.phi()}]")
        for s in (("",) if dtmc else ("min", "max")):
            add(f"R{s} F", f'R{{"{r()}"}}{s}=? [F {self.phi()}]')
            add(f"R{s} C", f'R{{"{r()}"}}{s}=? [C]')
        s = sense()
        add(f"R{s} C<=k", f'R{{"{r()}"}}{s}=? [C<={k()}]')
        s = sense()
        add(f"R{s} LRA", f'R{{"{r()}"}}{s}=? [LRA]')
        s = sense()
        add(f"LRA{s}", f"LRA{s}=? [{self.phi()}]")
        if not dtmc:  # total rewards where a sink may stop them, else the first k steps' (finite)
            def cost() -> str:
                bound = "C" if sink and self.chance(0.6) else f"C<={k()}"
                return f'R{{"{r()}"}}<={float(rng.integers(1, 200)) / 10:g} [{bound}]'

            reach = lambda: pick(['"t"', '"t"', '("t" | "goal")', '"goal"'])  # noqa: E731
            add("multi num", f"multi(Pmax=? [F {reach()}], {cost()})", "numerical")
            if len(rewards) > 1 and self.chance(0.5):
                r1 = rewards[0]
                bound = "C" if sink and self.chance(0.5) else f"C<={k()}"
                add("multi num", f'multi(R{{"{r1}"}}min=? [{bound}], {cost()})', "numerical")
            x = pick(["0.1", "0.25", "0.5", "0.75", "0.9", "1/3"])
            add("multi ach", f"multi(P>={x} [F {reach()}], {cost()})", "achievability")
        return out


def generate(seed: int, index: int) -> Program:
    """The program ``index`` of the campaign ``seed`` (the same for the same pair, always)."""
    return _Gen(seed, index).program()


# ----------------------------------------------------------------------------------------------
# checking (in a worker process)


def _number(text: str) -> float:
    if text in ("inf", "-inf"):
        return math.inf if text == "inf" else -math.inf
    value = Fraction(text)
    try:
        return float(value)
    except OverflowError:  # an exact value beyond the doubles: what a double engine can answer is inf
        return math.inf if value > 0 else -math.inf


class _Checker:
    """Checks one program's properties; the Storm model and mopmc's are built once, on demand."""

    def __init__(self, path: str, checks: list[dict], tol: float):
        self.path, self.checks, self.tol = path, checks, tol
        self._storm = None
        self._mopmc = None

    def storm(self, i: int) -> dict:
        import stormpy

        from mopmc.io.quiet import storm_output

        start = time.perf_counter()
        try:
            with storm_output():
                if self._storm is None:
                    prog = stormpy.parse_prism_program(self.path)
                    props = stormpy.parse_properties(";".join(c["text"] for c in self.checks), prog)
                    model = stormpy.build_model[stormpy.Rational](prog, props)
                    self._storm = (model, props)
                model, props = self._storm
                env = stormpy.environments.exact()
                if self.checks[i]["multi"]:
                    env.modelchecker().multi().precision = stormpy.Rational(STORM_MULTI_PRECISION)
                res = stormpy.model_checking(model, props[i], only_initial_states=True, environment=env)
                init = model.initial_states[0]
                if hasattr(res, "get_value"):
                    value = str(res.get_value(init))
                else:  # achievability, or an infeasible numerical query
                    value = bool(res[init])
        except Exception as exc:  # noqa: BLE001 - Storm's failures are recorded, whatever they are
            return {"status": "storm-failed", "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}",
                    "seconds": time.perf_counter() - start}
        return {"status": "ok", "value": value, "seconds": time.perf_counter() - start,
                "states": int(model.nr_states)}

    def model(self):
        """mopmc's model: its own builder, Storm's where the own one does not cover the program."""
        if self._mopmc is None:
            from mopmc.errors import UnsupportedModelError
            from mopmc.io.load import load

            text = ";\n".join(c["text"] for c in self.checks)
            try:
                self._mopmc = load(self.path, properties=text, builder="mopmc")
            except UnsupportedModelError as exc:
                if "builder does not cover" not in str(exc):
                    raise
                self._mopmc = load(self.path, properties=text, builder="storm")
        return self._mopmc

    def mopmc(self, engine: str, i: int) -> dict:
        from mopmc.errors import MopmcError

        start = time.perf_counter()
        try:
            loaded = self.model()
            prop = loaded.properties()[i]
            device = "cpu" if engine == "torch" else None
            if prop.multi:
                from mopmc.queries.dispatch import multi_query

                res = multi_query(loaded.model, prop, engine=engine, precision=1e-6, device=device)
                out = {"status": "ok", "query_status": res.status}
                if res.kind == "achievability":
                    out.update(value=bool(res.achievable), margin=res.margin, margin_upper=res.margin_upper,
                               near_boundary=bool(res.near_boundary))
                else:
                    out.update(value=None if res.value is None else repr(float(res.value)),
                               near_boundary=bool(res.near_boundary))
            else:
                from mopmc.queries.single import check

                res = check(loaded.model, prop, engine=engine, device=device,
                            precision=min(max(self.tol, 1e-12), 1e-6))
                out = {"status": "ok", "value": repr(float(res.value))}
                if res.note:
                    out["note"] = res.note
            out["builder"] = loaded.builder
        except MopmcError as exc:
            out = {"status": "refused", "error": f"{type(exc).__name__}: {exc.one_line()[:500]}"}
        except Exception as exc:  # noqa: BLE001 - a traceback from mopmc is a defect: recorded as a crash
            out = {"status": "crash", "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}",
                   "traceback": traceback.format_exc()[-3000:]}
        out["seconds"] = time.perf_counter() - start
        return out

    def run(self, key: str) -> dict:
        who, i = key.split("|")
        return self.storm(int(i)) if who == "storm" else self.mopmc(who, int(i))


def _worker(conn) -> None:
    """A worker process: receives ``(path, checks, tol, keys)``, sends ``("start", key)`` and
    ``("done", key, result)`` for each key, then ``("end",)``."""
    while True:
        task = conn.recv()
        if task is None:
            return
        path, checks, tol, keys = task
        checker = _Checker(path, checks, tol)
        for key in keys:
            conn.send(("start", key))
            conn.send(("done", key, checker.run(key)))
        conn.send(("end",))


# ----------------------------------------------------------------------------------------------
# the campaign


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_program(program: Program, out: Path) -> Path:
    """``OUT/programs/<name>.nm|.pm`` and ``<name>.props`` (the same text each time: written once)."""
    folder = out / "programs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{program.name}{program.suffix}"
    if not path.exists() or path.read_text() != program.text:
        _write_atomic(path, program.text)
    props = "\n".join(c.text for c in program.checks) + "\n"
    ppath = folder / f"{program.name}.props"
    if not ppath.exists() or ppath.read_text() != props:
        _write_atomic(ppath, props)
    return path


def _keys(program: Program, engines) -> list[str]:
    n = len(program.checks)
    return [f"storm|{i}" for i in range(n)] + [f"{e}|{i}" for e in engines for i in range(n)]


def _record_path(program: Program, out: Path) -> Path:
    return out / "results" / f"{program.name}.json"


def _load_record(program: Program, out: Path) -> dict:
    path = _record_path(program, out)
    if path.exists():
        rec = json.loads(path.read_text())
        if rec.get("text") == program.text and rec.get("properties") == [c.text for c in program.checks]:
            return rec
    return {"text": program.text, "properties": [c.text for c in program.checks], "results": {}}


class _Pool:
    """Worker processes with a deadline per check: a worker past it (or dead) is killed and
    replaced, the check recorded, and the rest of its program goes on in the fresh worker."""

    def __init__(self, jobs: int, timeout: float):
        import multiprocessing as mp

        self.ctx = mp.get_context("spawn")  # no forked threads (numba, torch, Storm)
        self.jobs, self.timeout = jobs, timeout

    def _start(self):
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        proc.start()
        child.close()
        return proc, parent

    def run(self, tasks, on_done) -> None:
        """``tasks``: ``(tag, path, checks, tol, keys)``; ``on_done(tag, results)`` once a program is done."""
        from multiprocessing.connection import wait

        pending = list(tasks)
        carry: dict = {}  # tag -> the results of its killed workers
        busy: dict = {}  # conn -> _Busy
        idle = [self._start() for _ in range(min(self.jobs, len(pending)))]
        while pending or busy:
            while idle and pending:
                proc, conn = idle.pop()
                task = pending.pop(0)
                conn.send(task[1:])
                busy[conn] = _Busy(proc, task, time.monotonic() + self.timeout)
            first = min(b.deadline for b in busy.values())
            for conn in wait(list(busy), timeout=max(0.0, first - time.monotonic())):
                b = busy[conn]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    msg = ("died",)
                if msg[0] == "start":
                    b.key, b.deadline = msg[1], time.monotonic() + self.timeout
                elif msg[0] == "done":
                    b.results[msg[1]], b.key = msg[2], None
                elif msg[0] == "end":
                    del busy[conn]
                    idle.append((b.proc, conn))
                    on_done(b.task[0], {**carry.pop(b.task[0], {}), **b.results})
                else:
                    b.proc.join(timeout=1)
                    self._replace(conn, busy, idle, pending, carry, on_done, "crash",
                                  f"the worker process died (exit code {b.proc.exitcode})")
            now = time.monotonic()
            for conn in [c for c, b in busy.items() if now > b.deadline]:
                self._replace(conn, busy, idle, pending, carry, on_done, "timeout", f"no answer in {self.timeout:g} s")
        for proc, conn in idle:
            conn.send(None)
            proc.join(timeout=5)

    def _replace(self, conn, busy, idle, pending, carry, on_done, status: str, why: str) -> None:
        b = busy.pop(conn)
        b.proc.kill()
        b.proc.join()
        conn.close()
        tag, path, checks, tol, keys = b.task
        if b.key is not None:
            b.results[b.key] = {"status": "storm-failed" if b.key.startswith("storm") else status,
                                "error": f"{status}: {why}"}
        carry.setdefault(tag, {}).update(b.results)
        rest = [k for k in keys if k not in carry[tag]]
        if rest:
            pending.insert(0, (tag, path, checks, tol, rest))
        else:
            on_done(tag, carry.pop(tag))
        idle.append(self._start())


@dataclass
class _Busy:
    proc: object
    task: tuple
    deadline: float
    results: dict = field(default_factory=dict)
    key: str | None = None


def run_campaign(programs: int, seed: int, out: Path, engines=("kernel",), tol: float = 1e-9, jobs: int = 1,
                 timeout: float = 60.0, multi_tol: float = 1e-4, progress: bool = True, start: int = 0) -> "Summary":
    """Generate, check and compare programs ``start .. start + programs - 1`` of ``seed``; returns the
    :class:`Summary` of every record in ``out`` for those programs."""
    out = Path(out)
    (out / "results").mkdir(parents=True, exist_ok=True)
    progs = [generate(seed, i) for i in range(start, start + programs)]
    tasks, records = [], {}
    for p in progs:
        path = write_program(p, out)
        rec = _load_record(p, out)
        records[p.name] = rec
        keys = [k for k in _keys(p, engines) if k not in rec["results"]]
        if keys:
            tasks.append((p.name, str(path), [c.__dict__ for c in p.checks], tol, keys))
    by_name = {p.name: p for p in progs}
    bar = _Bar(len(progs), len(progs) - len(tasks)) if progress else None

    def finish(name: str, results: dict) -> None:
        rec = records[name]
        rec["results"].update(results)
        rec["features"] = list(by_name[name].features)
        _write_atomic(_record_path(by_name[name], out), json.dumps(rec, indent=1))
        if bar:
            bar.advance(name)

    try:
        if jobs <= 0:  # in this process, no timeouts
            for tag, path, checks, t, keys in tasks:
                checker = _Checker(path, checks, t)
                finish(tag, {k: checker.run(k) for k in keys})
        else:
            _Pool(jobs, timeout).run(tasks, finish)
    finally:
        if bar:
            bar.close()
    return summarise(progs, records, engines, out, tol, multi_tol)


class _Bar:
    def __init__(self, total: int, done: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True))
        self.progress.start()
        self.task = self.progress.add_task("programs", total=total, completed=done)

    def advance(self, name: str) -> None:
        self.progress.update(self.task, advance=1, description=f"programs (last {name})")

    def close(self) -> None:
        self.progress.stop()


# ----------------------------------------------------------------------------------------------
# comparison and the summary


@dataclass
class Summary:
    """Counts per (property kind, engine) and status, and every finding (mismatch, crash, timeout)."""

    counts: dict = field(default_factory=dict)
    findings: list = field(default_factory=list)
    tol: float = 1e-9
    multi_tol: float = 1e-4

    def add(self, kind: str, engine: str, status: str) -> None:
        row = self.counts.setdefault((kind, engine), dict.fromkeys(STATUSES, 0))
        row[status] += 1

    def total(self, status: str) -> int:
        return sum(row[status] for row in self.counts.values())

    def to_json(self) -> dict:
        return {"tol": self.tol, "multi_tol": self.multi_tol,
                "counts": [{"kind": k, "engine": e, **row} for (k, e), row in sorted(self.counts.items())],
                "totals": {s: self.total(s) for s in STATUSES}, "findings": self.findings}


def classify(check: dict, storm: dict, ours: dict, tol: float, multi_tol: float) -> tuple[str, float | None]:
    """The status of one mopmc result against Storm's, and the relative error where both are numbers."""
    if ours.get("status") == "timeout":
        return "timeout", None
    if storm.get("status") != "ok":
        return "storm-failed", None
    if ours["status"] in ("refused", "crash"):
        return ours["status"], None
    sv, ov = storm["value"], ours["value"]
    if check["multi"] == "achievability":
        if bool(sv) == bool(ov):
            return "agree", None
        margin = ours.get("margin")
        close = ours.get("near_boundary") or (margin is not None and abs(margin) <= multi_tol)
        return ("boundary" if close else "mismatch"), None
    if check["multi"] == "numerical":
        if isinstance(sv, bool) or ov is None:  # infeasible on either side
            same = (isinstance(sv, bool) and not sv) == (ov is None)
            if same:
                return "agree", None
            return ("boundary" if ours.get("near_boundary") or ours.get("query_status") == "stalled"
                    else "mismatch"), None
        s, o = _number(sv), float(ov)
        err = abs(o - s) / max(1.0, abs(s)) if math.isfinite(s) and math.isfinite(o) else None
        if (s == o) or (err is not None and err <= multi_tol):
            return "agree", err
        return "mismatch", err
    s, o = _number(sv), float(ov)
    if math.isinf(s) or math.isinf(o):
        return ("agree" if s == o else "mismatch"), None
    err = abs(o - s) / max(1.0, abs(s))
    return ("agree" if err <= tol else "mismatch"), err


def summarise(programs, records: dict, engines, out: Path, tol: float, multi_tol: float) -> Summary:
    summary = Summary(tol=tol, multi_tol=multi_tol)
    for p in programs:
        rec = records[p.name]
        res = rec["results"]
        for i, c in enumerate(p.checks):
            storm = res.get(f"storm|{i}")
            for e in engines:
                ours = res.get(f"{e}|{i}")
                if storm is None or ours is None:
                    continue
                status, err = classify(c.__dict__, storm, ours, tol, multi_tol)
                summary.add(c.kind, e, status)
                if status in ("mismatch", "crash", "timeout"):
                    summary.findings.append({
                        "status": status, "program": str(out / "programs" / f"{p.name}{p.suffix}"),
                        "property": c.text, "kind": c.kind, "engine": e, "mopmc": ours.get("value"),
                        "storm": storm.get("value"), "relative_error": err, "error": ours.get("error"),
                        "features": list(p.features)})
    return summary


def render(summary: Summary) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 150))
    table = Table(title=f"mopmc against Storm's exact engine (tol {summary.tol:g}, multi {summary.multi_tol:g})")
    table.add_column("property")
    table.add_column("engine")
    for s in STATUSES:
        table.add_column(s, justify="right")
    for (kind, engine), row in sorted(summary.counts.items()):
        table.add_row(kind, engine, *(str(row[s]) if row[s] else "." for s in STATUSES))
    table.add_row("all", "", *(str(summary.total(s)) for s in STATUSES), style="bold")
    console.print(table)
    if summary.findings:
        found = Table(title="findings")
        for col in ("status", "program", "engine", "property", "mopmc", "storm", "rel. error / error"):
            found.add_column(col, overflow="fold")
        for f in summary.findings:
            storm = f["storm"]
            if isinstance(storm, str) and "/" in storm:
                storm = f"{float(Fraction(storm)):.17g} ({storm if len(storm) < 40 else storm[:37] + '...'})"
            detail = f"{f['relative_error']:.3g}" if f["relative_error"] is not None else (f["error"] or "")
            found.add_row(f["status"], Path(f["program"]).name, f["engine"], f["property"], str(f["mopmc"]),
                          str(storm), detail[:200])
        console.print(found)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="index of the first program")
    ap.add_argument("--out", type=Path, default=Path("/tmp/mopmc-differential"))
    ap.add_argument("--engines", default="kernel", help="comma-separated: kernel,torch,lp")
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--multi-tol", type=float, default=1e-4)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (0: in this process, no timeouts)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per check")
    ap.add_argument("--json", type=Path, default=None, help="write the summary and findings here")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        ap.error(f"--engines {','.join(unknown)}: use {', '.join(ENGINES)}")
    summary = run_campaign(args.programs, args.seed, args.out, engines, args.tol, args.jobs, args.timeout,
                           args.multi_tol, progress=not args.no_progress, start=args.start)
    render(summary)
    if args.json:
        _write_atomic(args.json, json.dumps(summary.to_json(), indent=1))
    return 1 if any(f["status"] in ("mismatch", "crash") for f in summary.findings) else 0


if __name__ == "__main__":
    sys.exit(main())
