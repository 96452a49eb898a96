"""Running a coroutine from a test whose thread may already have an event loop running."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_apart(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` in a thread of its own: in a full run the browser tests' Playwright (its
    sync API) keeps an event loop running in the main thread, where asyncio.run refuses."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
