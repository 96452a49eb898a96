"""A workstream's title from its first exchange: once the first turn has ended well, a side
request asks a model (`[roles] titler`, else the workstream's own) for a few words, and they
become its name unless someone named it meanwhile.

A side request: neither the request nor the title is stored in the conversation, and a title
that cannot be written (the model fails, answers nothing usable) leaves the default name; the
turn ended before this began, so nothing here can break it.
"""

from __future__ import annotations

import logging

from sqlmodel import col, select

from app.engine.life import changes
from app.providers import ModelError, reply_text, stream_reply
from app.providers.reply import service_options
from app.runtime import Runtime
from app.settings import ModelSettings
from app.storage.models import Message, NameOrigin, Workstream

log = logging.getLogger(__name__)

# The model sees at most this much of each side of the exchange: a title needs the gist.
EXCHANGE_CHARS = 2_000
MAX_TITLE_CHARS = 60  # a title longer than this is cut at a word
MAX_TITLE_TOKENS = 40
INSTRUCTIONS = (
    "You name conversations. Read the first exchange between a user and an AI agent and answer "
    "with a title of three to six words saying what the conversation is about. Answer with the "
    "title only: no quotes, no punctuation at the end, no preamble."
)
ASK = "User:\n{question}\n\nAgent:\n{answer}"


def write(rt: Runtime, ws_id: str) -> str | None:
    """Title the workstream from its first exchange; the title set, or None (named already,
    nothing to title from, or the model failed)."""
    exchange = _first_exchange(rt, ws_id)
    if exchange is None:
        return None
    ws, question, answer = exchange
    model = rt.settings.model(rt.settings.titler) if rt.settings.titler else rt.settings.model(ws.model)
    if model is None:
        return None
    exchange_text = ASK.format(question=question[:EXCHANGE_CHARS], answer=answer[:EXCHANGE_CHARS])
    request = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": exchange_text}]
    try:
        title = _asked(rt, model, request)
    except ModelError as exc:
        log.info("workstream %s: no title: %s", ws_id, exc)
        return None
    if not title or not changes.rename(rt, ws_id, title, NameOrigin.TITLE, unless_named=True):
        return None
    return title


def _first_exchange(rt: Runtime, ws_id: str) -> tuple[Workstream, str, str] | None:
    with rt.db.reader() as s:
        ws = s.get(Workstream, ws_id)
        if ws is None or ws.name_origin != NameOrigin.DEFAULT:
            return None
        rows = s.exec(
            select(Message.role, Message.content)
            .where(Message.ws_id == ws_id, col(Message.role).in_(["user", "assistant"]))
            .where(col(Message.branch_id).is_(None))
            .order_by(col(Message.id))
            .limit(20)
        ).all()
    question = next((text for role, text in rows if role == "user" and text), None)
    answer = next((text for role, text in rows if role == "assistant" and text), None)
    if question is None or answer is None:
        return None
    return ws, question, answer


def _asked(rt: Runtime, model: ModelSettings, request: list[dict]) -> str:
    options = {**service_options(rt.settings), "retries": 0}  # a title is not worth waiting for
    return tidy(reply_text(stream_reply(model, request, [], **options)).text)


_WRAPPING = "\"'`*#. "  # what models wrap a title in, or end it with


def tidy(text: str) -> str:
    """One line of at most MAX_TITLE_CHARS, without the quotes and end punctuation models add."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = line.replace("\x00", "").encode("utf-8", "ignore").decode()  # no NUL, no lone surrogate
    line = " ".join(line.split()).strip(_WRAPPING)
    if line.lower().startswith("title:"):
        line = line[len("title:") :].strip(_WRAPPING)
    if len(line) > MAX_TITLE_CHARS:
        line = line[:MAX_TITLE_CHARS].rsplit(" ", 1)[0]
    return line
