"""What a prepared fetch records about its target, so that the call, when it runs, fetches
only the kind of target that was shown for approval (`Fetcher.fetch(private_ok=...)`).

The record travels in the call's stored arguments: an approval is durable, so it may come
long after the call was prepared, and the call may then run on another worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.tools.web.fetch.guard import PRIVATE, Target

NETWORK = "prepared_network"  # the argument: "public" or "private" (guard.PUBLIC, guard.PRIVATE)


def recorded(args: dict[str, Any], target: Target) -> dict[str, Any]:
    """`args` with the network `target` was on when the call was prepared."""
    return {**args, NETWORK: target.network}


def is_private_approved(args: Mapping[str, Any]) -> bool:
    """Whether the call was prepared, and so shown for approval, as a private target. Anything
    else (a call stored before this was recorded, a value that is not the record) reads as public."""
    return args.get(NETWORK) == PRIVATE
