"""Provider-native web search through the real SDKs and the fake model server: the request
bodies (Anthropic's server tool, OpenAI's web_search_options), the reply's blocks and cited
sources, and the stored reply sent back unchanged on the next step."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.conversation import stored
from app.providers import stream_reply
from app.providers.citations import Sources, cited, markdown_link
from app.settings import ModelSettings
from app.storage.models import Message
from app.tools.core.registry import build_registry
from app.tools.web import native_search
from tests.fakes.model_server import FakeModelServer, Reply, ToolCall, WebSearch

FAST: dict[str, Any] = {"retries": 0, "backoff_seconds": 0.01, "timeout_seconds": 10}
QUESTION = "where do ruddy turnstones breed?"
HELLO = [{"role": "system", "content": "sys"}, {"role": "user", "content": QUESTION}]
PAGES = [
    ("Ruddy turnstone - Wikipedia", "https://en.wikipedia.org/wiki/Ruddy_turnstone"),
    ("Turnstones [field notes]", "https://birds.example/turnstones?a=(1)"),
]
SEARCH = WebSearch(
    "ruddy turnstone breeding",
    PAGES,
    [("They breed on the Arctic tundra", 0), (", and winter on coasts", 1), (".", None)],
    id="srvtoolu_w1",
)
SOURCES = (
    "\n\nSources:\n1. [Ruddy turnstone - Wikipedia](https://en.wikipedia.org/wiki/Ruddy_turnstone)\n"
    "2. [Turnstones \\[field notes\\]](https://birds.example/turnstones?a=%281%29)"
)


@pytest.fixture(scope="module")
def server():
    with FakeModelServer() as fake:
        yield fake


def model(server: FakeModelServer, provider: str, **caps: Any) -> ModelSettings:
    base_url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    return ModelSettings("m", provider, "fake-model", base_url=base_url, api_key="k", capabilities=caps)


def our_tools(m: ModelSettings) -> list[dict[str, Any]]:
    """The interactive tool list (our web_search in it), swapped as a model step swaps it."""
    schemas = build_registry().model_tools("interactive", "/w", None)
    assert "web_search" in {s["function"]["name"] for s in schemas}
    return native_search.swap(schemas, m, is_offered=True)


def reply(server: FakeModelServer, m: ModelSettings, messages=HELLO, tools=None) -> tuple[list, Any]:
    before = len(server.history)
    events = list(stream_reply(m, messages, our_tools(m) if tools is None else tools, **FAST))
    return events, server.history[before].body


def text_of(events: list) -> str:
    return "".join(e.text for e in events if e.kind == "content")


def test_anthropic_gets_its_server_web_search_in_place_of_ours(server):
    m = model(server, "anthropic", supports_web_search=True, web_search_max_uses=3)
    _events, body = reply(server, m)
    names = [t["name"] for t in body["tools"]]
    assert names.count("web_search") == 1 and "bash" in names
    assert body["tools"][-1] == {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    assert "input_schema" not in body["tools"][-1]


def test_anthropic_without_the_capability_keeps_our_tool(server):
    m = model(server, "anthropic")
    _events, body = reply(server, m)
    ours = next(t for t in body["tools"] if t["name"] == "web_search")
    assert "input_schema" in ours and "type" not in ours


def test_anthropic_search_blocks_text_and_citations_are_kept_in_order(server):
    m = model(server, "anthropic", supports_web_search=True)
    server.enqueue(Reply(text="Let me look.", web_search=SEARCH))
    events, _body = reply(server, m)
    blocks = [e.block for e in events if e.kind == "server_block"]
    assert [b["type"] for b in blocks] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "text",
        "text",
    ]
    assert blocks[0] == {"type": "text", "text": "Let me look."}
    assert blocks[1] == {
        "type": "server_tool_use",
        "id": "srvtoolu_w1",
        "name": "web_search",
        "input": {"query": "ruddy turnstone breeding"},
    }
    assert [r["url"] for r in blocks[2]["content"]] == [url for _t, url in PAGES]
    assert blocks[3]["text"] == "They breed on the Arctic tundra"
    assert blocks[3]["citations"] == [
        {
            "type": "web_search_result_location",
            "cited_text": "They breed on the Arctic tundra",
            "url": PAGES[0][1],
            "title": PAGES[0][0],
            "encrypted_index": "idx-0",
        }
    ]
    assert "citations" not in blocks[5]
    # People read the answer with its sources as links.
    assert text_of(events) == "Let me look.They breed on the Arctic tundra, and winter on coasts." + SOURCES


def test_an_anthropic_reply_without_web_search_keeps_no_text_blocks(server):
    m = model(server, "anthropic")
    server.enqueue(Reply(text="Plain answer."))
    events, _body = reply(server, m)
    assert [e for e in events if e.kind == "server_block"] == []
    assert text_of(events) == "Plain answer."


def as_stored(events: list, calls: list[dict[str, Any]] | None = None) -> list[Message]:
    """The conversation as a model step stores this reply."""
    blocks = [dict(e.block) for e in events if e.kind == "server_block"]
    return [
        Message(ws_id="w", role="user", content=QUESTION),
        Message(ws_id="w", role="assistant", content=text_of(events), server_blocks=blocks, tool_calls=calls),
    ]


def test_anthropic_search_reply_goes_back_unchanged_on_the_next_step(server):
    m = model(server, "anthropic", supports_web_search=True)
    server.enqueue(Reply(text="Let me look.", web_search=SEARCH))
    events, _body = reply(server, m)
    blocks = [dict(e.block) for e in events if e.kind == "server_block"]
    rows = [*as_stored(events), Message(ws_id="w", role="user", content="and in winter?")]
    _again, body = reply(server, m, stored.for_model("sys", rows))
    assert body["messages"][1] == {"role": "assistant", "content": blocks}  # sources text not resent
    newest = {
        "type": "text",
        "text": "and in winter?",
        "cache_control": {"type": "ephemeral"},
    }  # a cache mark
    assert body["messages"][2] == {"role": "user", "content": [newest]}


def test_anthropic_search_then_a_tool_call_replays_blocks_then_the_call(server):
    m = model(server, "anthropic", supports_web_search=True)
    call = ToolCall("read_file", {"path": "notes.md"}, id="toolu_r1")
    server.enqueue(Reply(web_search=SEARCH, tool_calls=[call]))
    events, _body = reply(server, m)
    (request,) = [e.tool_call for e in events if e.kind == "tool_call"]
    calls = [
        {
            "id": request.id,
            "type": "function",
            "function": {"name": "read_file", "arguments": request.arguments},
        }
    ]
    rows = [
        *as_stored(events, calls),
        Message(ws_id="w", role="tool", tool_call_id="toolu_r1", content="notes"),
    ]
    _again, body = reply(server, m, stored.for_model("sys", rows))
    sent = body["messages"][1]["content"]
    assert [b["type"] for b in sent] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "text",
        "text",
        "tool_use",
    ]
    assert sent[-1] == {
        "type": "tool_use",
        "id": "toolu_r1",
        "name": "read_file",
        "input": {"path": "notes.md"},
    }


def test_openai_search_model_gets_web_search_options_and_no_function_web_search(server):
    m = model(server, "openai", supports_web_search=True)
    _events, body = reply(server, m)
    assert body["web_search_options"] == {}
    names = [t["function"]["name"] for t in body["tools"]]
    assert "web_search" not in names and "bash" in names
    assert all(t["type"] == "function" for t in body["tools"])


def test_openai_search_model_with_no_other_tools_sends_no_tools_key(server):
    m = model(server, "openai", supports_web_search=True)
    _events, body = reply(server, m, tools=native_search.swap([], m, is_offered=True))
    assert body["web_search_options"] == {} and "tools" not in body


def test_openai_without_the_capability_sends_no_web_search_options(server):
    m = model(server, "openai")
    _events, body = reply(server, m)
    assert "web_search_options" not in body
    assert "web_search" in [t["function"]["name"] for t in body["tools"]]


def test_openai_url_citations_become_source_links(server):
    m = model(server, "openai", supports_web_search=True)
    server.enqueue(Reply(text="Answer: ", web_search=SEARCH))
    events, _body = reply(server, m)
    assert text_of(events) == "Answer: They breed on the Arctic tundra, and winter on coasts." + SOURCES
    assert [e for e in events if e.kind == "server_block"] == []


def test_swap_leaves_the_list_alone_unless_the_model_searches_and_the_kind_may():
    schemas = [{"type": "function", "function": {"name": "web_search"}}]
    plain = ModelSettings("m", "anthropic", "x")
    native = ModelSettings("m", "anthropic", "x", capabilities={"supports_web_search": True})
    assert native_search.swap(schemas, plain, is_offered=True) == schemas
    assert native_search.swap(schemas, native, is_offered=False) == schemas
    assert native_search.swap(schemas, None, is_offered=True) == schemas
    assert native_search.swap(schemas, native, is_offered=True) == [
        {"type": "native_web_search", "max_uses": 5}
    ]


def test_sources_keep_the_first_title_and_only_web_addresses():
    sources = Sources()
    sources.add("https://a.example/x", "A")
    sources.add("https://a.example/x", "A again")
    sources.add("javascript:alert(1)", "evil")
    sources.add(None, "none")
    sources.add("https://b.example/", None)
    sources.add("ftp://c.example/", "c")
    assert (
        sources.text()
        == "\n\nSources:\n1. [A](https://a.example/x)\n2. [https://b.example/](https://b.example/)"
    )
    assert Sources().text() == ""


@pytest.mark.parametrize(
    ("title", "url", "link"),
    [
        ("a](javascript:x)", "https://x.example/", "[a\\](javascript:x)](https://x.example/)"),
        ("t", "https://x.example/a b)c", "[t](https://x.example/a%20b%29c)"),
        ("back\\slash [x]", "https://x/", "[back\\\\slash \\[x\\]](https://x/)"),
    ],
)
def test_markdown_links_stay_one_link(title, url, link):
    assert markdown_link(title, url) == link


def test_a_search_call_whose_result_never_came_is_not_sent_back(server):
    """A reply cancelled between the server's call and its result keeps what it had; the
    lone call would make every later request of the workstream fail."""
    m = model(server, "anthropic", supports_web_search=True)
    call = {"type": "server_tool_use", "id": "srvtoolu_cut", "name": "web_search", "input": {"query": "q"}}
    rows = [
        Message(ws_id="w", role="user", content=QUESTION),
        Message(
            ws_id="w",
            role="assistant",
            content="Let me look.",
            server_blocks=[{"type": "text", "text": "Let me look."}, call],
        ),
        Message(ws_id="w", role="user", content="go on"),
    ]
    _events, body = reply(server, m, stored.for_model("sys", rows))
    assert body["messages"][1]["content"] == [{"type": "text", "text": "Let me look."}]


def test_without_the_capability_any_more_earlier_searches_go_back_as_plain_text(server):
    m = model(server, "anthropic", supports_web_search=True)
    server.enqueue(Reply(text="Let me look.", web_search=SEARCH))
    events, _body = reply(server, m)
    rows = [*as_stored(events), Message(ws_id="w", role="user", content="and in winter?")]
    plain = model(server, "anthropic")  # the operator turned supports_web_search off
    _again, body = reply(server, plain, stored.for_model("sys", rows))
    sent = body["messages"][1]["content"]
    assert sent == [
        {"type": "text", "text": "Let me look."},
        {"type": "text", "text": "They breed on the Arctic tundra"},
        {"type": "text", "text": ", and winter on coasts"},
        {"type": "text", "text": "."},
    ]


@pytest.mark.parametrize(
    "annotations",
    [
        [None, 3, "x", [], {"type": "url_citation"}, {"type": "url_citation", "url_citation": "nope"}],
        [{"type": "url_citation", "url_citation": {"url": 5, "title": {"deep": [[[]]]}}}],
        [{"type": "url_citation", "url_citation": {"url": "javascript:alert(1)", "title": "x"}}],
        [{"type": "file_citation", "file_citation": {"url": "https://x.example/"}}],
    ],
)
def test_hostile_annotations_cite_nothing(annotations):
    sources = Sources()
    for url, title in cited(annotations):
        sources.add(url, title)
    assert sources.text() == ""


def test_a_cited_title_with_control_characters_stays_one_line():
    sources = Sources()
    sources.add("https://x.example/", "a\nb\x00c\u2028d " + "t" * 10)
    assert sources.text().count("\n") == 3  # the blank line, the heading, one entry
