"""The stored conversation, as the model sees it and as the history API shows it."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from app import attachments
from app.compaction import plan
from app.engine.publishing.streaming import history_cursor
from app.engine.subagents.family import tag_history
from app.errors import NotFoundError
from app.previews import store as previews_store
from app.providers.content import SERVER_BLOCKS
from app.runtime import Runtime
from app.storage.models import Attachment, CallStatus, Message, ToolCall
from app.tools.files import images


def messages(s: Session, ws_id: str) -> list[Message]:
    """The workstream's conversation: its messages not in a branch, in order."""
    rows = select(Message).where(Message.ws_id == ws_id, col(Message.branch_id).is_(None))
    return list(s.exec(rows.order_by(col(Message.id))).all())


def for_model(system_prompt: str, rows: list[Message]) -> list[dict[str, Any]]:
    """Neutral (OpenAI chat) format, system prompt first.

    A tool result that carries an image has a list of parts for its content:
    `{"type": "text", "text": ...}` then `{"type": "image", "media_type": ..., "data": <base64>}`;
    each provider turns that into what its wire format (and its model) accepts.
    """
    return arrange(system_prompt, plan.visible([(row, model_entry(row)) for row in rows]))


def arrange(system_prompt: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stored messages' entries (`model_entry`, in id order) as the model is sent them, system
    prompt first. The entries may be shared between steps (a worker's conversation cache keeps
    them): whoever takes them reads them, never changes them."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]
    # A user message stored while a batch's calls were unanswered (a watch's result held back
    # by the depth guard, written whenever it fired) goes after their answers: a provider
    # refuses anything between an assistant's tool calls and their results.
    unanswered: set[str] = set()
    held: list[dict[str, Any]] = []
    for message in entries:
        role = message["role"]
        if role == "assistant":
            out.append(message)
            unanswered = {str(call.get("id")) for call in message.get("tool_calls") or []}
        elif role == "tool":
            out.append(message)
            unanswered.discard(str(message["tool_call_id"]))
        else:
            (held if unanswered else out).append(message)
        if held and not unanswered:
            out.extend(held)
            held = []
    return out + held


def model_entry(row: Message, load: attachments.Loader | None = None) -> dict[str, Any]:
    """One stored message as the model is sent it, in the neutral format; a user message's
    attachments as parts after its text (`load` reads them; without it they are named only)."""
    if row.role == plan.SUMMARY:
        return plan.summary_entry(row)
    if row.role == "assistant":
        entry: dict[str, Any] = {"role": "assistant", "content": row.content or ""}
        if row.tool_calls:
            entry["tool_calls"] = row.tool_calls
        if row.server_blocks:
            entry[SERVER_BLOCKS] = row.server_blocks
        return entry
    if row.role == "tool":
        return {"role": "tool", "tool_call_id": row.tool_call_id, "content": _tool_content(row.content or "")}
    if row.attachments:
        return {
            "role": "user",
            "content": attachments.parts(row.content or "", row.attachments, load or _unread),
        }
    return {"role": "user", "content": row.content or ""}


def _unread(_attachment_id: str) -> None:
    return None


def loader(rt: Runtime, ws_id: str) -> attachments.Loader:
    """Reads the workstream's attachments for `model_entry` (None for one deleted since)."""

    def load(attachment_id: str) -> tuple[Attachment, bytes] | None:
        try:
            return previews_store.attachment(rt.db, ws_id, attachment_id)
        except NotFoundError:
            return None

    return load


def _tool_content(text: str) -> str | list[dict[str, Any]]:
    image = images.image_content(text)
    if image is None:
        return text
    return [
        {"type": "text", "text": images.describe(image)},
        {"type": "image", "media_type": image["media_type"], "data": image["data"]},
    ]


def as_history(row: Message) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": row.id,
        "turn_id": row.turn_id,
        "role": row.role,
        # A stored image is the model's; people (and their browsers) get a line about it.
        "content": images.summary(row.content) if row.role == "tool" and row.content else row.content,
        "created_at": row.created_at.isoformat(),
    }
    if row.reasoning:
        entry["reasoning"] = row.reasoning
    if row.usage:
        entry["usage"] = row.usage
    if row.tool_calls:
        entry["tool_calls"] = row.tool_calls
    if row.role == "tool":
        entry.update(tool_call_id=row.tool_call_id, name=row.name, is_error=row.is_error)
    if row.role == plan.SUMMARY:
        entry.update(covers_from=row.covers_from, covers_to=row.covers_to, covers_count=row.covers_count)
    if row.origin:
        entry["origin"] = row.origin  # a user message something other than a person wrote (a watch)
    if row.model:
        entry["model"] = row.model  # an answer: the model that gave it (a fallback's, say)
    if row.attachments:
        entry["attachments"] = row.attachments  # a user message: what was sent with it
    return entry


def history(rt: Runtime, ws_id: str) -> dict[str, Any]:
    """The stored conversation and the event id to replay from: replaying after it may
    repeat what the messages hold (a client drops events it has), never miss what they
    do not (the deltas of an answer still streaming). A tool result a person decided on
    carries the `decision`: who, how, and through what."""
    cursor = history_cursor(rt, ws_id)  # read before the messages
    with rt.db.reader() as s:
        rows = messages(s, ws_id)
        decided = decisions(s, ws_id)
        entries = []
        for row in rows:
            entry = as_history(row)
            if row.role == "tool" and (row.turn_id, row.tool_call_id) in decided:
                entry["decision"] = decided[(row.turn_id, row.tool_call_id)]
            entries.append(entry)
        tag_history(s, ws_id, entries)
    return {"ws_id": ws_id, "last_event_id": cursor, "messages": entries}


def decisions(s: Session, ws_id: str) -> dict[tuple[str | None, str | None], dict[str, Any]]:
    """(turn_id, call_id) -> the decision on that call, for calls someone decided."""
    rows = s.exec(
        select(ToolCall).where(ToolCall.ws_id == ws_id, col(ToolCall.decided_by).is_not(None))
    ).all()
    return {
        (r.turn_id, r.call_id): {
            "approved": r.status != CallStatus.DENIED,
            "by": r.decided_by,
            "how": r.decided_how,
            "via": r.decided_via,
            "feedback": r.feedback,
            "rule": r.policy_rule,
            "verdict": r.verdict,
            # A person's edit: what ran (the model's arguments are its call's, above it).
            **({"arguments": r.args} if r.original_args is not None else {}),
        }
        for r in rows
    }
