"""The owners of workstreams this process has read, so that a request naming a workstream it
has seen before is checked without a round trip to the database (app/users/ownership.py)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import NamedTuple

# Workstreams whose owner a process keeps: the most recently named. About 250 bytes each.
OWNERS_KEPT = 4096


class Owner(NamedTuple):
    user_id: str | None  # None: the operator's (app/users/ownership.py)


class KnownOwners:
    """The owner of each workstream found in the database, by workstream id.

    Sound because a workstream's owner is set when it is made and never changes, and its id
    (`turns.new_id`, a random UUID) is never given to another: what was read stays true for as long
    as the workstream exists. A workstream deleted since may still be known here (deleted
    through another process); every view that names a workstream reads it and answers 404
    when it is gone. An id not found is never kept."""

    def __init__(self, kept: int = OWNERS_KEPT) -> None:
        self._kept = kept
        self._owners: OrderedDict[str, Owner] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, ws_id: str) -> Owner | None:
        with self._lock:
            found = self._owners.get(ws_id)
            if found is not None:
                self._owners.move_to_end(ws_id)
            return found

    def add(self, ws_id: str, owner: Owner) -> None:
        with self._lock:
            self._owners[ws_id] = owner
            self._owners.move_to_end(ws_id)
            while len(self._owners) > self._kept:
                self._owners.popitem(last=False)

    def forget(self, ws_ids: Iterable[str]) -> None:
        with self._lock:
            for ws_id in ws_ids:
                self._owners.pop(ws_id, None)

    def __len__(self) -> int:
        return len(self._owners)
