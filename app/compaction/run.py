"""A compaction run: the covered messages summarised by the model, the summary stored as a
message of its own with the range it covers, `compaction_started` / `compaction_done` sent.

Nothing is written until the summary is complete, in one transaction (under the turn's fence
inside a turn): a worker dying mid-way leaves the conversation as it was, and its step runs
again. A cancel while the summary streams ends the run with nothing stored."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from app.compaction import plan
from app.compaction.settings import Rules
from app.engine.publishing.outbox import ordered
from app.engine.running.leases import fenced
from app.events import EventType, Fence
from app.providers import ModelError, reply_text, stream_reply
from app.providers.reply import service_options
from app.runtime import Runtime
from app.settings import ModelSettings
from app.storage.models import Message, Workstream

log = logging.getLogger(__name__)

# The summariser's share of the window: the rest holds its instructions and its answer.
TRANSCRIPT_SHARE = 0.6
# Without a known window, a request the provider found too long is taken to be about twice
# what fits: the transcript gets half of it.
OVERFLOW_SHARE = 0.5
INSTRUCTIONS = (
    "You write the summary that replaces the earlier part of an agent's conversation when it no "
    "longer fits the model's context window. The agent goes on working from your summary and the "
    "newest messages only, so keep what it needs: the user's goals and instructions, decisions "
    "made, facts learned, files and commands involved with their outcomes, errors met and how "
    "they were solved, and what was still to do. Be concise and concrete; write plain text."
)
ASK = "Summarise this part of the conversation:\n\n{transcript}"


class Outcome(enum.Enum):
    DONE = "done"  # a summary was stored
    NOTHING = "nothing"  # nothing to summarise (too few messages, or no safe cut)
    FAILED = "failed"  # the summariser failed: nothing stored, `compaction_done` says why
    CANCELLED = "cancelled"  # the turn was cancelled meanwhile: nothing stored


Publish = Callable[..., object]


def is_due(rules: Rules, request_tokens: int) -> bool:
    """Whether a step's request would pass `context_window - reserve`."""
    threshold = rules.threshold
    return rules.enabled and threshold is not None and request_tokens > threshold


def budget_chars(rules: Rules, request_tokens: int | None) -> int:
    """How long the transcript sent to the summariser may be."""
    limits = []
    if rules.context_window is not None:
        limits.append(int((rules.context_window - rules.reserve) * plan.CHARS_PER_TOKEN * TRANSCRIPT_SHARE))
    if request_tokens is not None:
        limits.append(int(request_tokens * plan.CHARS_PER_TOKEN * OVERFLOW_SHARE))
    return max(plan.MIN_MESSAGE_CHARS, min(limits)) if limits else 200_000


def compact(
    rt: Runtime,
    ws: Workstream,
    rows: list[Message],
    *,
    reason: str,
    request_tokens: int | None = None,
    fence: Fence | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    upto: int | None = None,
) -> Outcome:
    """Summarise what `plan.cover` picks of `rows` (only rows up to id `upto` when given) and
    store it. Inside a turn, `fence` is its claim and `cancelled` its cancel check."""
    model = rt.settings.model(ws.model)
    if model is None:
        return Outcome.NOTHING
    rules = rt.settings.compaction.rules(model.name)
    within = [row for row in rows if upto is None or (row.id or 0) <= upto]
    chosen = plan.cover(within, rules.keep_last)
    if chosen is None:
        return Outcome.NOTHING
    turn_id = fence.turn_id if fence is not None else None

    def publish(type_: str, **fields: object) -> None:
        rt.events.publish(ws.id, type_, turn_id=turn_id, fence=fence, **fields)

    publish(EventType.COMPACTION_STARTED, reason=reason, messages=chosen.count)
    summariser = rt.settings.model(rt.settings.compaction.compactor) or model
    transcript = plan.transcript(chosen, budget_chars(rules, request_tokens))
    try:
        text, spent = _summary(rt, summariser, transcript, cancelled)
    except ModelError as exc:
        log.warning("workstream %s: compaction failed: %s", ws.id, exc)
        publish(EventType.COMPACTION_DONE, reason=reason, error=f"the summary could not be written: {exc}")
        return Outcome.FAILED
    if text is None or cancelled():
        return Outcome.CANCELLED
    return _store(rt, ws, chosen, text, spent, reason, fence)


def _summary(
    rt: Runtime, model: ModelSettings, transcript: str, cancelled: Callable[[], bool]
) -> tuple[str | None, dict[str, int]]:
    """The summariser's answer (None when stopped before it finished) and its token usage."""
    request = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": ASK.format(transcript=transcript)},
    ]
    answer = reply_text(
        stream_reply(model, request, [], should_stop=cancelled, **service_options(rt.settings))
    )
    if not answer.finished:
        return None, {}
    return answer.text.strip() or "(nothing to summarise)", answer.usage


def _store(
    rt: Runtime,
    ws: Workstream,
    chosen: plan.Cover,
    text: str,
    spent: dict[str, int],
    reason: str,
    fence: Fence | None,
) -> Outcome:
    row = Message(
        ws_id=ws.id,
        turn_id=fence.turn_id if fence is not None else None,
        role=plan.SUMMARY,
        content=text,
        covers_from=chosen.first_id,
        covers_to=chosen.last_id,
        covers_count=chosen.count,
        usage=spent or None,  # what writing it cost, counted with the steps' (app/usage)
    )
    with ordered(rt, ws.id) as out:
        if fence is None:
            with rt.db.session() as s:
                s.add(row)
                s.flush()  # its id, for the event; committed as the block ends
        else:
            with fenced(rt, fence) as (s, turn):
                if turn.cancel_requested:
                    return Outcome.CANCELLED
                s.add(row)
                s.flush()  # its id, for the event; committed as the block ends
        out.add(
            EventType.COMPACTION_DONE,
            turn_id=row.turn_id,
            fence=fence,
            reason=reason,
            message_id=row.id,
            covers_from=row.covers_from,
            covers_to=row.covers_to,
            count=row.covers_count,
        )
    return Outcome.DONE
