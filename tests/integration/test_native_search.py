"""Provider-native web search through the whole service (SQLite and PostgreSQL): a model whose
capabilities say `supports_web_search` searches itself, no approval asked; the reply's search
blocks and citations are stored and sent back unchanged; people see the cited pages as links.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.model_server import Reply, ToolCall, WebSearch

pytestmark = pytest.mark.integration

PAGES = [
    ("Ruddy turnstone - Wikipedia", "https://en.wikipedia.org/wiki/Ruddy_turnstone"),
    ("Turnstones on the shore", "https://birds.example/turnstones"),
]
SEARCH = WebSearch(
    "ruddy turnstone breeding",
    PAGES,
    [("They breed on the Arctic tundra", 0), (" and winter on coasts", 1), (".", None)],
    id="srvtoolu_svc1",
)
ANSWER = "They breed on the Arctic tundra and winter on coasts."
SOURCES = (
    "\n\nSources:\n1. [Ruddy turnstone - Wikipedia](https://en.wikipedia.org/wiki/Ruddy_turnstone)\n"
    "2. [Turnstones on the shore](https://birds.example/turnstones)"
)


def streamed(sock: Any) -> str:
    return "".join(e["text"] for e in sock.of_type("content"))


def assistant_said(api: Any, ws_id: str) -> list[str]:
    return [m["content"] for m in api.history(ws_id) if m["role"] == "assistant"]


def test_anthropic_searches_itself_and_its_blocks_go_back_unchanged(api, model, open_socket, searxng):
    ws_id = api.create_workstream(model="claude_web")
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="Let me look. ", web_search=SEARCH))
    turn_id = api.send(ws_id, "where do ruddy turnstones breed?")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert sock.of_type("approve_request") == [] and searxng.queries == []  # the provider searched

    first = model.history[0].body
    assert first["tools"][-1] == {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    assert [t for t in first["tools"] if t.get("name") == "web_search"] == [first["tools"][-1]]
    # What people see: the answer, with the cited pages as links, live and in the history.
    assert streamed(sock) == "Let me look. " + ANSWER + SOURCES
    assert assistant_said(api, ws_id) == ["Let me look. " + ANSWER + SOURCES]

    model.enqueue(Reply(text="In winter they move south."))
    turn_id = api.send(ws_id, "and in winter?")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    replayed = model.history[1].body["messages"][1]
    assert replayed["role"] == "assistant"
    blocks = replayed["content"]
    assert [b["type"] for b in blocks] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "text",
        "text",
    ]
    assert blocks[0] == {"type": "text", "text": "Let me look. "}
    assert blocks[1] == {
        "type": "server_tool_use",
        "id": "srvtoolu_svc1",
        "name": "web_search",
        "input": {"query": "ruddy turnstone breeding"},
    }
    assert blocks[2]["tool_use_id"] == "srvtoolu_svc1"
    assert [(r["title"], r["url"]) for r in blocks[2]["content"]] == PAGES
    assert all(r["encrypted_content"].startswith("enc-") for r in blocks[2]["content"])
    assert blocks[3]["citations"][0]["url"] == PAGES[0][1]
    assert blocks[3]["citations"][0]["encrypted_index"] == "idx-0"
    assert blocks[4]["citations"][0]["url"] == PAGES[1][1]
    assert "Sources:" not in "".join(b.get("text", "") for b in blocks)  # links are for people


def test_anthropic_search_then_a_tool_call_keeps_both_across_the_tool_step(api, model, open_socket, workdir):
    (workdir / "notes.md").write_text("turnstone notes")
    ws_id = api.create_workstream(model="claude_web", working_dir=str(workdir))
    sock = open_socket(ws_id)
    call = ToolCall("read_file", {"path": "notes.md"}, id="toolu_n1")
    model.enqueue(Reply(web_search=SEARCH, tool_calls=[call]))
    model.enqueue(Reply(text="Noted."))
    turn_id = api.send(ws_id, "search, then read my notes")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert sock.wait_type("tool_result", call_id="toolu_n1")["output"].endswith("turnstone notes")
    sent = model.history[1].body["messages"][1]["content"]
    types = [b["type"] for b in sent]
    assert types == ["server_tool_use", "web_search_tool_result", "text", "text", "text", "tool_use"]
    assert sent[-1]["id"] == "toolu_n1"
    result = model.history[1].body["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_n1"


def test_openai_search_model_gets_web_search_options_and_shows_its_citations(
    api, model, open_socket, searxng
):
    ws_id = api.create_workstream(model="gpt_search")
    sock = open_socket(ws_id)
    model.enqueue(Reply(web_search=SEARCH))
    turn_id = api.send(ws_id, "where do ruddy turnstones breed?")
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    body = model.history[0].body
    assert body["web_search_options"] == {}
    assert "web_search" not in [t["function"]["name"] for t in body.get("tools", [])]
    assert searxng.queries == []
    assert streamed(sock) == ANSWER + SOURCES
    assert assistant_said(api, ws_id) == [ANSWER + SOURCES]


def test_a_model_without_the_capability_still_gets_our_web_search(api, model, open_socket):
    ws_id = api.create_workstream(model="claude")
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="plain"))
    turn_id = api.send(ws_id, "hello")
    sock.wait_turn_end(turn_id)
    tools = model.history[0].body["tools"]
    ours = next(t for t in tools if t.get("name") == "web_search")
    assert "input_schema" in ours and not any(t.get("type") == "web_search_20250305" for t in tools)
    assert "web_search_options" not in model.history[0].body
