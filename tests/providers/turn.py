"""One whole turn through the running service against recorded answers, and what the next
request to the model server held, read in either wire format."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from tests.fakes.replay_server import ReceivedRequest, Recording, ReplayServer
from tests.integration.client import Api, EventSocket
from tests.integration.services import API_TOKEN

# What each wire's request may carry at its top level; anything else a strict server refuses.
OPENAI_KEYS = {
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "max_tokens",
    "max_completion_tokens",
}
ANTHROPIC_KEYS = {"model", "max_tokens", "messages", "stream", "system", "tools", "thinking"}
# Keys only one family's server knows: hosted OpenAI routes a workstream to its prompt cache by key.
FAMILY_KEYS = {"openai": {"prompt_cache_key"}}
OPENAI_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id"}


@dataclass
class Seen:
    """What a person saw of the turn, and what the model server was sent."""

    ws_id: str
    events: list[dict[str, Any]]
    history: list[dict[str, Any]]
    requests: list[ReceivedRequest]

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == type_]

    def text(self, type_: str = "content") -> str:
        """The deltas of the answer that stood (those before a discarding stream_end dropped)."""
        kept: list[str] = []
        for event in self.events:
            if event["type"] == type_:
                kept.append(event["text"])
            elif event["type"] == "stream_end" and event.get("discard"):
                kept = []
        return "".join(kept)

    @property
    def errors(self) -> list[str]:
        return [e["message"] for e in self.of_type("error")]

    @property
    def answer(self) -> dict[str, Any]:
        return self.history[-1]


def run_turn(
    api: Api, replay: ReplayServer, model: str, workdir: str, *answers: Recording, message: str = "go"
) -> Seen:
    """A workstream on `model`, `message` sent, every call asked about approved; the replay
    server answers with `answers` in order, and must have served them all."""
    replay.enqueue(*answers)
    ws_id = api.create_workstream(model=model, working_dir=workdir)
    return continue_turn(api, replay, ws_id, message)


def continue_turn(api: Api, replay: ReplayServer, ws_id: str, message: str, *answers: Recording) -> Seen:
    replay.enqueue(*answers)
    before = len(replay.posts())
    sock = EventSocket(api.base_url, API_TOKEN, ws_id)
    try:
        turn_id = api.send(ws_id, message)
        asked = 0
        while True:
            event = sock.wait_for(partial(_next, turn_id, asked))
            if event["type"] != "approve_request":
                break
            asked = event["id"]
            assert api.approve(ws_id, approved=True).status_code == 200
        events = [e for e in sock.events if e.get("turn_id") == turn_id]
    finally:
        sock.close()
    assert replay.left() == 0, "the service asked the model server fewer times than answers were queued"
    return Seen(ws_id, events, api.history(ws_id), replay.posts()[before:])


def _next(turn_id: str, asked: int, event: dict[str, Any]) -> bool:
    """An approval request not yet answered, or the turn's end."""
    if event["type"] == "approve_request":
        return bool(event["id"] > asked)
    is_end = event["type"] == "state_change" and event["state"] in ("idle", "error")
    return is_end and event.get("turn_id") == turn_id


def calls_of(request: ReceivedRequest) -> list[dict[str, Any]]:
    """The tool calls of the request's last assistant message, neutral: id, name, input."""
    body = request.json()
    assistant = [m for m in body["messages"] if m["role"] == "assistant"][-1]
    if isinstance(assistant.get("content"), list):  # the Anthropic wire
        uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
        return [{"id": b["id"], "name": b["name"], "input": b["input"]} for b in uses]
    return [
        {"id": c["id"], "name": c["function"]["name"], "input": json.loads(c["function"]["arguments"])}
        for c in assistant.get("tool_calls") or []
    ]


def results_of(request: ReceivedRequest) -> list[tuple[str, str]]:
    """(call id, output) of every tool result in the request, in order."""
    out: list[tuple[str, str]] = []
    for message in request.json()["messages"]:
        if message["role"] == "tool":
            out.append((message["tool_call_id"], message["content"]))
        elif isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    out.append((block["tool_use_id"], block["content"]))
    return out


def check_refusable_fields(request: ReceivedRequest, family: str) -> None:
    """No field `family`'s server would refuse: only the wire's own keys (and the family's own),
    no reasoning sent back on the OpenAI wire (DeepSeek answers 400 to `reasoning_content` in a
    message), no empty text."""
    body = request.json()
    known = FAMILY_KEYS.get(family, set())
    if request.path.endswith("/v1/messages"):
        assert set(body) <= ANTHROPIC_KEYS | known, set(body) - ANTHROPIC_KEYS - known
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                assert block.get("type") != "text" or block["text"], "an empty text block"
        return
    assert set(body) <= OPENAI_KEYS | known, set(body) - OPENAI_KEYS - known
    for message in body["messages"]:
        assert set(message) <= OPENAI_MESSAGE_KEYS, set(message) - OPENAI_MESSAGE_KEYS
