"""What a stop_on expression may build, and make Python visit, checked before each operation runs.

A result longer than MAX_VALUE_LENGTH, or a comparison, hash, sort or search of a value with more
than MAX_PARTS parts, is refused (`Exceeded`) before the operation starts: `str()` of
`[[[0] * 999] * 999] * 999` is measured (app/watches/sizes.py) and refused, never built. The
measuring one evaluation does, and the sorting, are bounded too (MAX_WORK), so that no
expression, however often it repeats itself, keeps a worker busy for more than about a second.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from app.watches.sizes import case_mapped_length, extent, printed_length

MAX_VALUE_LENGTH = 1_000_000  # the longest string, list or tuple an expression may build
MAX_PARTS = 1_000_000  # the most parts (elements, characters) a comparison or lookup may visit
MAX_POWER_BITS = 4096  # an integer power past this many bits is refused
MAX_WORK = 2 * MAX_VALUE_LENGTH  # parts one evaluation's checks may walk and sorted() order, together
MAX_STRIP_LOOKUPS = 100 * MAX_PARTS  # strip(chars) looks each character it strips up in chars

CASE_METHODS = frozenset({"lower", "upper", "casefold", "title", "capitalize"})
_SET_LIKE: tuple[Any, ...] = (type({}.keys()), type({}.items()))  # `-` of these hashes each element
_SIZED: tuple[Any, ...] = (str, list, tuple, dict, type({}.keys()), type({}.values()), type({}.items()))


class Exceeded(Exception):
    """An operation would pass a limit; the message says which."""


def _too_long() -> Exceeded:
    return Exceeded(f"stop_on would build a value longer than {MAX_VALUE_LENGTH:,}")


class Meter:
    """The checks of one evaluation, and the work (parts walked, elements sorted) done so far."""

    def __init__(self) -> None:
        self.work = 0

    def call(self, name: str, args: list[Any]) -> None:
        """Before the safe function `name` runs on `args`."""
        if name == "str" and args:
            if self._measure(printed_length, args[0]) > MAX_VALUE_LENGTH:
                raise _too_long()
        elif name in ("sorted", "min", "max", "dict") and args:  # they compare or hash elements
            elements = args[0] if len(args) == 1 else args
            self._visit(elements)
            if name == "sorted" and hasattr(elements, "__len__"):
                self._spend(len(elements))  # n log n comparisons, each as quick as a step of a walk
        elif name == "isinstance" and len(args) == 2:  # a nested tuple of types is walked
            self._visit(args[1])

    def method(self, receiver: Any, name: str, args: list[Any]) -> None:
        """Before `receiver.name(*args)` runs."""
        if isinstance(receiver, str):
            _text_method(receiver, name, args)
            if name in ("startswith", "endswith") and args and isinstance(args[0], tuple):
                self._visit(args[0])
        elif isinstance(receiver, list) and name in ("count", "index"):
            self._visit(receiver)
        elif isinstance(receiver, dict) and name == "get" and args:  # the key is hashed
            self._visit(args[0])

    def binary(self, op: ast.operator, left: Any, right: Any) -> None:
        """Before `left op right` runs."""
        if isinstance(op, ast.Add) and isinstance(left, str | list | tuple) and type(left) is type(right):
            if len(left) + len(right) > MAX_VALUE_LENGTH:
                raise _too_long()
        elif isinstance(op, ast.Mult):
            _check_repeat(left, right)
        elif isinstance(op, ast.Pow):
            _check_power(left, right)
        elif isinstance(op, ast.Sub) and isinstance(left, _SET_LIKE):
            self._visit(left)
            self._visit(right)

    def compare(self, op: ast.cmpop, left: Any, right: Any) -> None:
        """Before `left op right` runs: an ordering, an equality or a search visits both sides."""
        if isinstance(op, ast.Is | ast.IsNot):
            return
        if isinstance(left, str) and isinstance(right, str):
            return  # a text search or comparison: one pass over characters
        self._visit(left)
        self._visit(right)

    def key(self, container: Any, key: Any) -> None:
        """Before `container[key]`: a dict hashes its key."""
        if isinstance(container, dict):
            self.hashed(key)

    def hashed(self, key: Any) -> None:
        """Before `key` is hashed: a dict's lookup, or a key of a dict literal."""
        self._visit(key)

    def _visit(self, value: Any) -> None:
        if self._measure(extent, value) > MAX_PARTS:
            raise Exceeded(f"stop_on would compare, hash or search a value of more than {MAX_PARTS:,} parts")

    def _measure(self, size: Callable[[Any, int], int], value: Any) -> int:
        measured = size(value, MAX_VALUE_LENGTH)
        if not isinstance(value, str):  # a text is measured at once; a walk takes a step a part
            self._spend(min(measured, MAX_VALUE_LENGTH + 1))
        return measured

    def _spend(self, parts: int) -> None:
        self.work += parts
        if self.work > MAX_WORK:
            raise Exceeded(f"stop_on does too much work in one poll (over {MAX_WORK:,} parts); simplify it")


def bounded(value: Any) -> Any:
    """`value`, once built, if it is within the length limit (the second lock)."""
    if isinstance(value, str | list | tuple | dict) and len(value) > MAX_VALUE_LENGTH:
        raise Exceeded(f"stop_on built a value longer than {MAX_VALUE_LENGTH:,}")
    return value


def _text_method(text: str, name: str, args: list[Any]) -> None:
    if name in CASE_METHODS and case_mapped_length(text, name, MAX_VALUE_LENGTH) > MAX_VALUE_LENGTH:
        raise _too_long()
    if name in ("split", "rsplit") and args and isinstance(args[0], str) and args[0]:
        pieces = text.count(args[0])
        if len(args) > 1 and isinstance(args[1], int) and args[1] >= 0:
            pieces = min(pieces, args[1])
        if pieces + 1 > MAX_VALUE_LENGTH:
            raise _too_long()
    if name == "replace" and len(args) >= 2:
        _check_replace(text, args[0], args[1], args[2] if len(args) > 2 else -1)
    if name == "join" and args:
        _check_join(text, args[0])
    chars = args[0] if name in ("strip", "lstrip", "rstrip") and args else None
    if isinstance(chars, str) and len(text) * len(chars) > MAX_STRIP_LOOKUPS:
        raise Exceeded(f"stop_on's {name}() would look up {len(text):,} characters among {len(chars):,}")


def _check_repeat(left: Any, right: Any) -> None:
    for seq, times in ((left, right), (right, left)):
        is_repeat = isinstance(seq, str | list | tuple) and isinstance(times, int)
        if is_repeat and len(seq) * max(times, 0) > MAX_VALUE_LENGTH:
            raise _too_long()


def _check_power(base: Any, exponent: Any) -> None:
    whole = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if whole and max(abs(base).bit_length(), 1) * exponent > MAX_POWER_BITS:
        raise Exceeded(f"stop_on's power is too large (over {MAX_POWER_BITS} bits)")


def _check_replace(text: str, old: Any, new: Any, count: Any) -> None:
    if isinstance(old, str) and isinstance(new, str):
        found = text.count(old) if old else len(text) + 1
        if isinstance(count, int) and count >= 0:
            found = min(found, count)
        if len(text) + found * max(len(new) - len(old), 0) > MAX_VALUE_LENGTH:
            raise _too_long()


def _check_join(separator: str, items: Any) -> None:
    if isinstance(items, _SIZED) and len(items) > 1:
        try:
            size = len(separator) * (len(items) - 1) + sum(map(len, items))
        except TypeError:
            return  # an item that is no text: join refuses it itself, saying so
        if size > MAX_VALUE_LENGTH:
            raise _too_long()
