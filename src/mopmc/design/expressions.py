"""Data expressions of the design layer: guards and updates over bounded variables.

A small PRISM-like language: integer and Boolean literals (``true``, ``false``), variable names,
``! & | => + - * / = != < <= > >=`` and parentheses. Expressions are parsed once and then
evaluated *vectorised*: variables are numpy columns, one entry per state, so a guard is decided for
thousands of states in one call. ``to_prism`` prints the expression back in PRISM syntax.

A comparison of a location variable with a bare name (``SW0_loc = wait``) means the location of that
name; :func:`resolve` turns such names into location indices.

>>> e = parse("x < 3 & !b")
>>> import numpy as np
>>> e.eval({"x": np.array([1, 5]), "b": np.array([0, 0])}).tolist()
[True, False]
>>> e.to_prism()
'x < 3 & (!b)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from mopmc.errors import ConfigError

_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\d*\.\d+|\d+)|([A-Za-z_][A-Za-z0-9_]*)|(<=>|=>|<=|>=|!=|[-+*/()!&|=<>]))")
_PRECEDENCE = [("=>",), ("|",), ("&",), ("=", "!=", "<", "<=", ">", ">="), ("+", "-"), ("*", "/")]


class Expr:
    """Base class of expression nodes."""

    def eval(self, env: Mapping[str, np.ndarray]):  # pragma: no cover - overridden
        raise NotImplementedError

    def names(self) -> set[str]:
        """Identifiers the expression reads."""
        return set()

    def to_prism(self, rename: Callable[[str], str] = str) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def __str__(self) -> str:
        return self.to_prism()


@dataclass(frozen=True)
class Const(Expr):
    value: int | float | bool

    def eval(self, env):
        return self.value

    def to_prism(self, rename=str) -> str:
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        return repr(self.value)


@dataclass(frozen=True)
class Name(Expr):
    name: str

    def eval(self, env):
        try:
            return env[self.name]
        except KeyError:
            raise ConfigError(f"unknown variable {self.name!r} in an expression; known: {', '.join(sorted(env))}") from None

    def names(self) -> set[str]:
        return {self.name}

    def to_prism(self, rename=str) -> str:
        return rename(self.name)


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    arg: Expr

    def eval(self, env):
        v = self.arg.eval(env)
        return np.logical_not(v) if self.op == "!" else -np.asarray(v)

    def names(self) -> set[str]:
        return self.arg.names()

    def to_prism(self, rename=str) -> str:
        return f"{self.op}{_wrap(self.arg, rename)}"


_BINARY = {
    "&": np.logical_and,
    "|": np.logical_or,
    "=>": lambda a, b: np.logical_or(np.logical_not(a), b),
    "=": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.true_divide,
}


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr

    def eval(self, env):
        return _BINARY[self.op](self.left.eval(env), self.right.eval(env))

    def names(self) -> set[str]:
        return self.left.names() | self.right.names()

    def to_prism(self, rename=str) -> str:
        if self.op in ("&", "|"):
            return f" {self.op} ".join(_wrap(x, rename, self.op) for x in _flatten(self.op, self))
        return f"{_wrap(self.left, rename)} {self.op} {_wrap(self.right, rename)}"


def _flatten(op: str, e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op == op:
        return _flatten(op, e.left) + _flatten(op, e.right)
    return [e]


def _wrap(e: Expr, rename, context: str | None = None) -> str:
    text = e.to_prism(rename)
    simple = isinstance(e, (Const, Name)) or (isinstance(e, Binary) and context in ("&", "|") and e.op in ("=", "!=", "<", "<=", ">", ">="))
    if isinstance(e, Binary) and e.op == context:
        simple = True
    return text if simple else f"({text})"


TRUE = Const(True)


def conj(*parts: Expr) -> Expr:
    """The conjunction of the parts, dropping literal ``true``."""
    parts = tuple({p.to_prism(): p for p in parts if p != TRUE}.values())
    if not parts:
        return TRUE
    out = parts[0]
    for p in parts[1:]:
        out = Binary("&", out, p)
    return out


def disj(*parts: Expr) -> Expr:
    """The disjunction of the parts (``false`` when empty)."""
    parts = tuple({p.to_prism(): p for p in parts}.values())
    if not parts:
        return Const(False)
    out = parts[0]
    for p in parts[1:]:
        out = Binary("|", out, p)
    return out


def parse(text: str | int | float | bool, where: str = "expression") -> Expr:
    """Parse PRISM-like expression text; raise :class:`ConfigError` naming ``where`` on bad syntax."""
    if isinstance(text, bool):
        return Const(text)
    if isinstance(text, (int, float)):
        return Const(text)
    tokens: list[str] = []
    pos, src = 0, str(text)
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOKEN.match(src, pos)
        if not m:
            raise ConfigError(f"{where}: cannot read {src[pos:]!r} in expression {src!r}")
        tokens.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    parser = _Parser(tokens, src, where)
    expr = parser.expr(0)
    if parser.i != len(tokens):
        raise ConfigError(f"{where}: unexpected {tokens[parser.i]!r} in expression {src!r}")
    return expr


class _Parser:
    def __init__(self, tokens: list[str], src: str, where: str):
        self.t, self.i, self.src, self.where = tokens, 0, src, where

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> str:
        if self.i >= len(self.t):
            raise ConfigError(f"{self.where}: expression {self.src!r} ends too early")
        self.i += 1
        return self.t[self.i - 1]

    def expr(self, level: int) -> Expr:
        if level == len(_PRECEDENCE):
            return self.unary()
        left = self.expr(level + 1)
        while self.peek() in _PRECEDENCE[level]:
            op = self.take()
            left = Binary(op, left, self.expr(level + 1))
        return left

    def unary(self) -> Expr:
        tok = self.take()
        if tok in ("!", "-"):
            return Unary(tok, self.unary())
        if tok == "(":
            e = self.expr(0)
            if self.take() != ")":
                raise ConfigError(f"{self.where}: missing ')' in expression {self.src!r}")
            return e
        if tok in ("true", "false"):
            return Const(tok == "true")
        if tok[0].isdigit() or tok[0] == ".":
            return Const(float(tok) if "." in tok else int(tok))
        if tok[0].isalpha() or tok[0] == "_":
            return Name(tok)
        raise ConfigError(f"{self.where}: unexpected {tok!r} in expression {self.src!r}")


def resolve(expr: Expr, variables: set[str], locations: Mapping[str, tuple[str, ...]], where: str) -> Expr:
    """Replace location names compared with a location variable by their index; check names.

    ``locations`` maps each location variable to its location names. Any other unknown identifier
    is an error naming ``where``.
    """
    if isinstance(expr, Binary):
        if expr.op in ("=", "!=") and isinstance(expr.left, Name) and isinstance(expr.right, Name):
            for var, other in ((expr.left.name, expr.right.name), (expr.right.name, expr.left.name)):
                if var in locations and other not in variables:
                    names = locations[var]
                    if other not in names:
                        raise ConfigError(f"{where}: {other!r} is not a location of {var} (it has {', '.join(names)})")
                    return Binary(expr.op, Name(var), Const(names.index(other)))
        return Binary(expr.op, resolve(expr.left, variables, locations, where), resolve(expr.right, variables, locations, where))
    if isinstance(expr, Unary):
        return Unary(expr.op, resolve(expr.arg, variables, locations, where))
    if isinstance(expr, Name) and expr.name not in variables:
        raise ConfigError(f"{where}: unknown variable {expr.name!r} (known: {', '.join(sorted(variables))})")
    return expr
