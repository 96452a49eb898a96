"""`stop_on`: a small expression language over a poll's result, read from Python's syntax tree.

Never `eval`: `check` refuses at create time any node, name or method outside the lists below,
and `evaluate` walks the tree itself, checking receivers' types and, before each operation, what
it would build or visit (app/watches/limits.py), so an expression can neither reach the
interpreter's internals nor exhaust a worker's memory or time.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.watches.limits import Exceeded, Meter, bounded

MAX_EXPRESSION_CHARS = 1000
MAX_NODES = 200

VARIABLES = ("output", "data", "exit_code", "prev_output", "changed")
SAFE_FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "len": len,
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "abs": abs,
    "min": min,
    "max": max,
    "any": any,
    "all": all,
    "isinstance": isinstance,
    "sorted": sorted,
}
TYPE_NAMES: Mapping[str, type] = {"list": list, "dict": dict}  # for isinstance, besides str, int, ...
# Plain methods of plain values; none of them formats, imports or reaches an attribute.
METHODS: Mapping[type, frozenset[str]] = {
    str: frozenset(
        {
            *("lower", "upper", "casefold", "title", "capitalize", "strip", "lstrip", "rstrip"),
            *("startswith", "endswith", "removeprefix", "removesuffix", "count", "find", "rfind"),
            *("split", "rsplit", "splitlines", "partition", "rpartition", "replace", "join"),
            *("isdigit", "isalpha", "isalnum", "isspace", "isnumeric", "islower", "isupper"),
        }
    ),
    list: frozenset({"count", "index"}),
    dict: frozenset({"get", "keys", "values", "items"}),
}
ALL_METHODS = frozenset().union(*METHODS.values())

_BINARY: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: Mapping[type, Callable[[Any], Any]] = {
    ast.Not: operator.not_,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_COMPARE: Mapping[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.BinOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.Subscript,
    ast.Slice,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Attribute,
    ast.keyword,
    *_BINARY,
    *_UNARY,
    *_COMPARE,
)


_UNHASHABLE = "stop_on's dict keys must be strings, numbers, booleans or None"


class ConditionError(ValueError):
    """The expression is refused (at create time) or failed (at a poll); the message says why."""


class LimitError(ConditionError):
    """The expression would pass a limit (app/watches/limits.py); found at create time, on an
    empty output, it would on any output."""


@dataclass(frozen=True)
class PollResult:
    """What one poll produced, as the expression's variables see it."""

    output: str
    exit_code: int
    prev_output: str | None
    # Credentials bash's stream redacted from `output` by their shape, by kind (not a variable:
    # the output guard's event counts them, app/watches/poller.py).
    redacted: tuple[tuple[str, int], ...] = ()

    @property
    def changed(self) -> bool:
        return self.prev_output is not None and self.output != self.prev_output

    def variables(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "data": _json_or_none(self.output),
            "exit_code": self.exit_code,
            "prev_output": self.prev_output,
            "changed": self.changed,
        }


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


# -- create time: what the expression may contain -------------------------------------------


def check(expression: str) -> ast.Expression:
    """The parsed expression, or ConditionError saying what is not allowed in it."""
    if not isinstance(expression, str) or not expression.strip():
        raise ConditionError("stop_on must be a non-empty expression")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ConditionError(f"stop_on is {len(expression)} characters; the limit is {MAX_EXPRESSION_CHARS}")
    if "\x00" in expression:
        raise ConditionError("stop_on must not contain a NUL character")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"stop_on is not a valid expression: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ConditionError("stop_on is nested too deeply") from None
    nodes = list(ast.walk(tree))
    if len(nodes) > MAX_NODES:
        raise ConditionError(f"stop_on has {len(nodes)} parts; the limit is {MAX_NODES}")
    for node in nodes:
        _check_node(node)
    _check_attributes(tree)
    return tree


def _check_node(node: ast.AST) -> None:
    if not isinstance(node, _ALLOWED_NODES):
        raise ConditionError(f"stop_on may not use {_describe(node)}")
    if isinstance(node, ast.Name) and node.id not in (*VARIABLES, *SAFE_FUNCTIONS, *TYPE_NAMES):
        allowed = ", ".join((*VARIABLES, *SAFE_FUNCTIONS))
        raise ConditionError(f"stop_on may not use the name {node.id!r}; it may use {allowed}")
    if isinstance(node, ast.Attribute) and node.attr not in ALL_METHODS:
        raise ConditionError(
            f"stop_on may not use the attribute {node.attr!r}; only plain str, list and dict "
            "methods may be called (such as .lower(), .startswith(), .get())"
        )
    if isinstance(node, ast.Call):
        _check_call(node)
    if isinstance(node, ast.Dict) and any(key is None for key in node.keys):
        raise ConditionError("stop_on may not unpack a dict with **")
    if isinstance(node, ast.Dict) and any(isinstance(key, ast.List | ast.Dict) for key in node.keys):
        raise ConditionError(_UNHASHABLE)
    if isinstance(node, ast.Constant) and not isinstance(node.value, str | int | float | bool | type(None)):
        raise ConditionError(f"stop_on may not use the constant {type(node.value).__name__}")


def _check_call(node: ast.Call) -> None:
    func = node.func
    if isinstance(func, ast.Name):
        if func.id not in SAFE_FUNCTIONS and func.id not in TYPE_NAMES:
            raise ConditionError(f"stop_on may not call {func.id!r}")
    elif not isinstance(func, ast.Attribute):
        raise ConditionError("stop_on may call only the safe functions and plain methods by name")
    for kw in node.keywords:
        if kw.arg != "reverse" or not (isinstance(func, ast.Name) and func.id == "sorted"):
            raise ConditionError("stop_on may not pass keyword arguments (except sorted(..., reverse=...))")
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise ConditionError("stop_on may not unpack arguments with *")


def _describe(node: ast.AST) -> str:
    names = {
        ast.Lambda: "lambda",
        ast.ListComp: "comprehensions",
        ast.SetComp: "comprehensions",
        ast.DictComp: "comprehensions",
        ast.GeneratorExp: "generator expressions",
        ast.NamedExpr: "assignment (:=)",
        ast.JoinedStr: "f-strings",
        ast.FormattedValue: "f-strings",
        ast.Starred: "unpacking (*)",
        ast.Await: "await",
        ast.Yield: "yield",
        ast.Set: "set literals",
    }
    for kind, text in names.items():
        if isinstance(node, kind):
            return text
    return f"{type(node).__name__} expressions" if isinstance(node, ast.expr) else type(node).__name__


def validate(expression: str) -> None:
    """At create time: `check`, then a trial on an empty poll, so that an expression that
    exceeds the limits whatever the output (`2**10**10`, `"a" * 10**10`) is refused now."""
    check(expression)
    try:
        evaluate(expression, PollResult(output="", exit_code=0, prev_output=None))
    except LimitError:
        raise
    except ConditionError:
        pass  # data["state"] on an empty poll: fine, real output may have it


def _check_attributes(tree: ast.Expression) -> None:
    """An attribute only as the method of a call: `output.lower()`, never `output.__class__`."""
    called = {n.func for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node not in called:
            raise ConditionError(f"stop_on may use the attribute {node.attr!r} only as a method call")


# -- poll time: walking the tree ------------------------------------------------------------


def evaluate(expression: str, result: PollResult) -> bool:
    """Whether `expression` holds for this poll; ConditionError when it cannot be evaluated."""
    tree = check(expression)
    try:
        return bool(_Evaluator(result.variables()).visit(tree.body))
    except ConditionError:
        raise
    except Exceeded as exc:
        raise LimitError(str(exc)) from None
    except (RecursionError, MemoryError):
        raise LimitError("stop_on could not be evaluated: too deep or too large") from None
    except Exception as exc:  # a KeyError on data["x"], a TypeError on None < 1: the model's to fix
        raise ConditionError(f"stop_on failed: {type(exc).__name__}: {exc}"[:500]) from None


class _Evaluator:
    def __init__(self, names: dict[str, Any]) -> None:
        self.names = names
        self.meter = Meter()

    def visit(self, node: ast.AST) -> Any:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:  # check() lets nothing else through; this is the second lock
            raise ConditionError(f"stop_on may not use {_describe(node)}")
        return bounded(method(node))

    def _Constant(self, node: ast.Constant) -> Any:
        return node.value

    def _Name(self, node: ast.Name) -> Any:
        if node.id in self.names:
            return self.names[node.id]
        if node.id in TYPE_NAMES:
            return TYPE_NAMES[node.id]
        if node.id in SAFE_FUNCTIONS:
            return SAFE_FUNCTIONS[node.id]
        raise ConditionError(f"stop_on may not use the name {node.id!r}")

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        value: Any = None
        for operand in node.values:
            value = self.visit(operand)
            if isinstance(node.op, ast.And) and not value:
                return value
            if isinstance(node.op, ast.Or) and value:
                return value
        return value

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        return _UNARY[type(node.op)](self.visit(node.operand))

    def _BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            raise ConditionError("stop_on may not format strings with %")
        self.meter.binary(node.op, left, right)
        return _BINARY[type(node.op)](left, right)

    def _Compare(self, node: ast.Compare) -> Any:
        left = self.visit(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.visit(comparator)
            self.meter.compare(op, left, right)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def _IfExp(self, node: ast.IfExp) -> Any:
        return self.visit(node.body) if self.visit(node.test) else self.visit(node.orelse)

    def _Subscript(self, node: ast.Subscript) -> Any:
        value = self.visit(node.value)
        if not isinstance(value, str | list | tuple | dict):
            kind = type(value).__name__
            raise ConditionError(f"stop_on may index only strings, lists and dicts, not {kind}")
        key = self.visit(node.slice)
        self.meter.key(value, key)
        return value[key]

    def _Slice(self, node: ast.Slice) -> slice:
        parts = (node.lower, node.upper, node.step)
        return slice(*(None if part is None else self.visit(part) for part in parts))

    def _List(self, node: ast.List) -> list[Any]:
        return [self.visit(element) for element in node.elts]

    def _Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.visit(element) for element in node.elts)

    def _Dict(self, node: ast.Dict) -> dict[Any, Any]:
        # As written, so as large as the expression: `data.get("pr", {})`, `{"state": "open"}`.
        pairs = []
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:  # `**data`: refused when the watch was created
                raise ConditionError("stop_on may not unpack a dict with **")
            written = self.visit(key)
            self.meter.hashed(written)
            pairs.append((written, self.visit(value)))
        try:
            return dict(pairs)
        except TypeError:  # a key that is a list or a dict
            raise ConditionError(_UNHASHABLE) from None

    def _Call(self, node: ast.Call) -> Any:
        args = [self.visit(arg) for arg in node.args]
        kwargs = {kw.arg: self.visit(kw.value) for kw in node.keywords if kw.arg is not None}
        if isinstance(node.func, ast.Attribute):
            return self._method(node.func, args, kwargs)
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        func = SAFE_FUNCTIONS.get(name) or TYPE_NAMES.get(name)
        if func is None:
            raise ConditionError("stop_on may call only the safe functions and plain methods")
        self.meter.call(name, args)
        return func(*args, **kwargs)

    def _method(self, attribute: ast.Attribute, args: list[Any], kwargs: dict[str, Any]) -> Any:
        receiver = self.visit(attribute.value)
        allowed = METHODS.get(type(receiver), frozenset())
        if attribute.attr not in allowed:
            raise ConditionError(f"stop_on may not call .{attribute.attr}() on a {type(receiver).__name__}")
        self.meter.method(receiver, attribute.attr, args)
        return getattr(receiver, attribute.attr)(*args, **kwargs)
