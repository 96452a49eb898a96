"""Which calls of a batch must run one after another: those that name a common file.

A batch runs on a pool of four, but a `read_file` and an `edit_file` of one
file in the same batch must see the file in the order the model asked for.
Calls are put in lanes: two calls naming a common path share a lane (kept in
batch order); lanes run in parallel. A call that names no path (bash) is a
lane of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

PATH_ARGUMENTS = ("path", "path_a", "path_b")


def paths_named(args: dict[str, Any], working_dir: str) -> set[str]:
    """The files a call's arguments name, resolved as the file tools resolve them."""
    found = set()
    for key in PATH_ARGUMENTS:
        value = args.get(key)
        if isinstance(value, str) and value:
            found.add(os.path.realpath(os.path.join(working_dir, os.path.expanduser(value))))
    return found


def lanes(items: Sequence[T], paths_of: Callable[[T], set[str]]) -> list[list[T]]:
    """`items` grouped into lanes, each in input order; lanes are ordered by their first item."""
    lane_of: list[int] = list(range(len(items)))

    def root(n: int) -> int:
        while lane_of[n] != n:
            lane_of[n] = lane_of[lane_of[n]]
            n = lane_of[n]
        return n

    owner: dict[str, int] = {}
    for n, item in enumerate(items):
        for path in paths_of(item):
            if path in owner:
                a, b = root(owner[path]), root(n)
                lane_of[max(a, b)] = min(a, b)
            else:
                owner[path] = n
    grouped: dict[int, list[T]] = {}
    for n, item in enumerate(items):
        grouped.setdefault(root(n), []).append(item)
    return [grouped[key] for key in sorted(grouped)]
