"""The cyclic garbage collector and what a process keeps for its whole life.

A started worker or web process holds a few hundred thousand objects it never lets go (modules,
the runtime, a model SDK), and a full collection walks every one: on the order of 100 ms, a
pause of every thread, about once in a few hundred turns. `settle` takes what lives now out of
its walks.
"""

from __future__ import annotations

import gc


def settle(collect: bool = True) -> None:
    """Call once a process has loaded what it keeps, and again when it loads more: every object
    alive now is moved where the collector never looks again (`gc.freeze`), so that a full
    collection walks only what came after. Such an object is still freed when nothing refers to
    it; only a reference cycle among them is never reclaimed. `collect` first frees the garbage
    of start-up rather than keeping it for good; mid-work, skip it (it costs the pause it saves)."""
    if collect:
        gc.collect()
    gc.freeze()
