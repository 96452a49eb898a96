"""How big a stop_on operation's result or work would be, measured before it runs: the length of
`str()` of a value, the parts a comparison or a hash of it may visit, a case mapping's length.

A walk counts a shared part each time it appears (`[[[0] * 999] * 999] * 999` prints a billion
zeros, whatever little memory it holds) and stops as soon as it is past its limit, so measuring
takes about as many steps as the size it reports, and never more than `limit`.
"""

from __future__ import annotations

from types import BuiltinFunctionType
from typing import Any

PIECE = 64 * 1024  # characters measured at a time when a text's printed form must be built
MAX_CASE_GROWTH = 3  # a case mapping turns one character into at most three ("ΐ".upper())
_KEYS: Any = type({}.keys())
_VALUES: Any = type({}.values())
_ITEMS: Any = type({}.items())
_VIEWS = (_KEYS, _VALUES, _ITEMS)
_VIEW_NAMES = {_KEYS: "dict_keys", _VALUES: "dict_values", _ITEMS: "dict_items"}
_CONTAINERS = (list, tuple, dict, *_VIEWS)
_PAIRS = (dict, _ITEMS)
_SMALL_REPR = (bool, float, type(None), type, BuiltinFunctionType)  # short, fixed printed forms
_INT_DIGITS_PER_BIT = 0.30103  # log10(2)
_EXACT_INT_BITS = 14_000  # int-to-text stays below Python's 4,300-digit limit


def printed_length(value: Any, limit: int) -> int:
    """`len(str(value))`, or a number past `limit` once it is clear the text would be longer."""
    if isinstance(value, str):
        return len(value)
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        own, parts = _printed_part(item, limit - total)
        total += own
        if total > limit:
            return total
        stack.extend(parts)
    return total


def _printed_part(item: Any, room: int) -> tuple[int, Any]:
    """The characters `repr(item)` adds itself (brackets, separators, a scalar's text) and the
    parts printed between them; past `room`, a number past it and no parts, which ends the walk."""
    if isinstance(item, str):
        return (room + 1 if len(item) + 2 > room else _quoted_length(item)), ()
    if isinstance(item, int) and not isinstance(item, bool):
        return _int_length(item), ()
    if isinstance(item, _SMALL_REPR):
        return len(repr(item)), ()
    if not isinstance(item, _CONTAINERS):
        return room + 1, ()  # nothing else reaches an expression: what cannot be measured is refused
    count = len(item)
    pairs = isinstance(item, _PAIRS)
    own = 2 + 2 * (count - 1) if count else 2  # the brackets, ", " between items
    if isinstance(item, tuple) and count == 1:
        own = 3  # "(x,)"
    if pairs:
        own += (2 if isinstance(item, dict) else 4) * count  # ": " in each; "(", ", ", ")" around each
    if isinstance(item, _VIEWS):
        own += len(_VIEW_NAMES[type(item)]) + 2  # "dict_keys(" and ")" around the list
    least = own + count * (2 if pairs else 1)  # each part prints one character at least
    if least > room:
        return least, ()
    if isinstance(item, dict):
        return own, [*item.keys(), *item.values()]
    if isinstance(item, _ITEMS):
        return own, [part for pair in item for part in pair]
    return own, item


def _quoted_length(text: str) -> int:
    """`len(repr(text))`, building no more than a piece of it at a time."""
    both = "'" in text and '"' in text  # then repr quotes with ' and escapes each '
    if text.isascii() and text.isprintable():
        return len(text) + 2 + text.count("\\") + (text.count("'") if both else 0)
    # A piece with a " added chooses its quotes and escapes as the whole text does (when the
    # whole has both kinds); the " added is one character of the piece's repr.
    pad = '"' if both else ""
    body = sum(len(repr(text[i : i + PIECE] + pad)) - 2 - len(pad) for i in range(0, len(text), PIECE))
    return body + 2


def _int_length(number: int) -> int:
    bits = number.bit_length()
    if bits < _EXACT_INT_BITS:
        return len(str(number))
    return int(bits * _INT_DIGITS_PER_BIT) + 2  # str() would refuse it anyway (too many digits)


def extent(value: Any, limit: int) -> int:
    """How many parts comparing, hashing or searching `value` may visit (its elements at every
    level, and the characters of its texts), or a number past `limit` once there are more."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        total += max(len(item), 1) if isinstance(item, str) else 1
        if isinstance(item, _CONTAINERS):
            inside = 2 * len(item) if isinstance(item, dict) else len(item)
            if total + inside > limit:
                return total + inside
            stack.extend([*item.keys(), *item.values()] if isinstance(item, dict) else item)
        if total > limit:
            return total
    return total


def case_mapped_length(text: str, method: str, limit: int) -> int:
    """No less than `len(getattr(text, method)())` for lower, upper, casefold, title and
    capitalize, and exact when it could pass `limit` (title: within two characters a piece),
    mapping no more than a piece of the text at a time."""
    if text.isascii():
        return len(text)
    if MAX_CASE_GROWTH * len(text) <= limit:
        return MAX_CASE_GROWTH * len(text)
    if method == "capitalize":  # the first character title-cased, the rest lower-cased
        return len(text[:1].title()) + case_mapped_length(text[1:], "lower", limit)
    # Case mapping changes only a few characters' lengths and never depends on the context,
    # except title(), whose choice of title or lower case for a piece's first character may
    # differ from the whole text's: allow for it.
    slack = MAX_CASE_GROWTH - 1 if method == "title" else 0
    return sum(len(getattr(text[i : i + PIECE], method)()) + slack for i in range(0, len(text), PIECE))
