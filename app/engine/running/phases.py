"""Running one phase of a turn as a task: claim it, keep the claim alive, and be the task's
error boundary (a bug fails the turn; a passing database or Redis fault leaves the step to
the sweeper, which runs it again)."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable

from app.engine.running.leases import Claim, claim, count_failure, kept_alive
from app.engine.running.recovery import fail_turn, is_transient
from app.engine.running.stop_check import CancelCheck
from app.errors import StaleAttemptError
from app.events import Fence
from app.metrics import recording
from app.runtime import Runtime

# The poison guard: a phase whose attempts raised this many times (a passing fault each time;
# a bug fails the turn at once) fails its turn instead of being tried again...
MAX_PHASE_ATTEMPTS = 5
# ...and so does one whose worker stopped this many times while it ran (killed, out of memory):
# many more, since a worker killed by an operator or a deploy is no fault of the step's.
MAX_PHASE_CLAIMS = 20

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
    """Claim the phase (unless the hand-off to it claimed it for this task: `leases.handed_on`),
    keep the claim alive while `body` runs, stop quietly once superseded."""
    claimed = (
        claim(rt, turn_id, phase, step) if claimed_by_hand_off is None else Claim(claimed_by_hand_off, 1, 0)
    )
    if claimed is None:
        return  # already done, or held by a live attempt: a duplicate delivery
    fence = claimed.fence
    poisoned = _poisoned(phase, claimed)
    if poisoned is not None:
        log.error("turn %s: %s; failing the turn", turn_id, poisoned)
        return fail_turn(rt, fence, f"this turn's {poisoned}; see the worker log")
    try:
        with recording.phase_timer(phase), kept_alive(rt, fence) as held:
            body(fence, CancelCheck(rt, turn_id, held))
    except StaleAttemptError:
        log.warning("turn %s: attempt %s was superseded; stopping", turn_id, fence.attempt)
    except Exception as exc:  # the task boundary
        if is_transient(exc):
            # The class only: a database error's text may quote what a user or a model wrote.
            log.warning(
                "turn %s: %s step hit a passing fault (%s); the sweeper runs it again",
                turn_id,
                phase,
                type(exc).__name__,
            )
            _count_failure(rt, fence)
            return
        # Where it failed, and its class: not its text, which may quote what it was sent (a
        # database error quotes the statement's values: a file a model read, a message).
        where = "".join(traceback.format_tb(exc.__traceback__))
        log.error("turn %s: %s step failed (%s)\n%s", turn_id, phase, type(exc).__name__, where)
        fail_turn(rt, fence, FAILED_MESSAGE)


def _poisoned(phase: str, claimed: Claim) -> str | None:
    """Why this phase is not tried again, or None: its attempts raised MAX_PHASE_ATTEMPTS
    times, or its worker stopped under it MAX_PHASE_CLAIMS times."""
    if claimed.failures >= MAX_PHASE_ATTEMPTS:
        return f"{phase} step raised a passing fault (of the database or Redis) {claimed.failures} times"
    if claimed.claims > MAX_PHASE_CLAIMS:
        stopped = claimed.claims - 1
        return f"{phase} step was started {stopped} times and its worker stopped each time before it ended"
    return None


def _count_failure(rt: Runtime, fence: Fence) -> None:
    try:
        count_failure(rt, fence)
    except Exception as exc:  # the fault may still be there: this attempt then goes uncounted
        if not is_transient(exc):
            raise
        log.warning(
            "turn %s: its failed attempt could not be counted (%s)", fence.turn_id, type(exc).__name__
        )
