"""A turn's next phase, kept by the task that ends the phase before it instead of sent.

The whole vocabulary of keeping, in one place (`chain.run` is the task that uses it):

- `keeping(turn_id)`: within, the first hand-off of `turn_id` to a phase this worker runs is
  kept in the yielded `Handoff`, not sent. Any other turn's (a sub-agent's first step, the next
  queued turn) is sent as always.
- `will_keep(rt, turn_id, task)`: asked inside the transaction that ends a phase, so that the
  same transaction may claim the next phase for this task (`leases.handed_on`) and, for a batch
  of one approved call, start that call (`calls.StartedCall`).
- `hand_on(rt, task, turn_id, step, claim, started)`: what a phase's end calls: kept or sent.

Keeping earns its place on measured numbers: a bash turn kept in one task takes two Celery
tasks and three write transactions fewer than the same turn sent phase by phase
(bench/turn_costs.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from app.events import Fence
from app.runtime import Runtime
from app.taskqueue import PHASE_QUEUES

_kept = threading.local()


@dataclass
class Handoff:
    """A turn's next phase, kept by the task that ended the phase before it."""

    turn_id: str
    task: str | None = None
    step: int = 0
    claim: Fence | None = None  # the next phase, claimed for this task by the hand-off itself
    # What the hand-off began of that phase, for it to take up (a batch's only call, already
    # marked running: app.engine.life.calls.StartedCall); only ever with a claim.
    started: Any = None


@contextmanager
def keeping(turn_id: str) -> Iterator[Handoff]:
    kept = Handoff(turn_id)
    _kept.handoff = kept
    try:
        yield kept
    finally:
        _kept.handoff = None


def runs_here(rt: Runtime, task: str) -> bool:
    """Whether this process's worker consumes the queue the phase task `task` travels on (none
    once it begins shutting down)."""
    return PHASE_QUEUES[task] in rt.queue.local_queues


def will_keep(rt: Runtime, turn_id: str, task: str) -> bool:
    """Whether a hand-off of `turn_id` to `task` made now would be kept."""
    return _keeper(turn_id) is not None and runs_here(rt, task)


def hand_on(
    rt: Runtime, task: str, turn_id: str, step: int, claim: Fence | None = None, started: Any = None
) -> None:
    """Keep the hand-off or send it. One that comes with its claim was judged keepable
    (`will_keep`) inside the transaction that claimed it: it is kept whatever, and the keeper
    releases the claim should it end up sending the phase (`chain.run`)."""
    kept = _keeper(turn_id)
    if (claim is not None or started is not None) and kept is None:
        raise RuntimeError(f"turn {turn_id}: a claimed hand-off with no keeper")
    if started is not None and claim is None:
        raise RuntimeError(f"turn {turn_id}: a hand-off that began its phase without claiming it")
    if kept is None or (claim is None and not runs_here(rt, task)):
        rt.queue.send_phase(task, turn_id, step)
    else:
        kept.task, kept.step, kept.claim, kept.started = task, step, claim, started


def _keeper(turn_id: str) -> Handoff | None:
    """The hand-off this thread keeps for `turn_id`, while it holds none yet."""
    kept: Handoff | None = getattr(_kept, "handoff", None)
    return kept if kept is not None and kept.turn_id == turn_id and kept.task is None else None
