"""Running one phase of a turn as a task: claim it, keep the claim alive, and be the task's
error boundary (a bug fails the turn; a passing database or Redis fault leaves the step to
the sweeper, which runs it again)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.engine.cancellation import CancelCheck
from app.engine.leases import claim, kept_alive
from app.engine.recovery import fail_turn, is_transient
from app.errors import StaleAttemptError
from app.events import Fence
from app.metrics import recording
from app.runtime import Runtime
from app.settings import MAX_PHASE_ATTEMPTS

log = logging.getLogger(__name__)

FAILED_MESSAGE = "internal error while running this turn; see the worker log"


def run_phase(
    rt: Runtime,
    turn_id: str,
    phase: str,
    step: int,
    body: Callable[[Fence, CancelCheck], None],
    claimed_by_hand_off: Fence | None = None,
) -> None:
    """Claim the phase (unless the hand-off to it claimed it for this task: `leases.hand_on`),
    keep the claim alive while `body` runs, stop quietly once superseded."""
    claimed = claim(rt, turn_id, phase, step) if claimed_by_hand_off is None else (claimed_by_hand_off, 1)
    if claimed is None:
        return  # already done, or held by a live attempt: a duplicate delivery
    fence, attempts = claimed
    if attempts > MAX_PHASE_ATTEMPTS:
        log.error("turn %s: its %s step was tried %s times; failing the turn", turn_id, phase, attempts - 1)
        return fail_turn(
            rt, fence, f"this turn's {phase} step failed {attempts - 1} times; see the worker log"
        )
    try:
        with recording.phase_timer(phase), kept_alive(rt, fence) as held:
            body(fence, CancelCheck(rt, turn_id, held))
    except StaleAttemptError:
        log.warning("turn %s: attempt %s was superseded; stopping", turn_id, fence.attempt)
    except Exception as exc:  # the task boundary
        if is_transient(exc):
            log.warning(
                "turn %s: %s step hit a passing fault (%s); the sweeper runs it again", turn_id, phase, exc
            )
            return
        log.exception("turn %s: %s step failed", turn_id, phase)
        fail_turn(rt, fence, FAILED_MESSAGE)
