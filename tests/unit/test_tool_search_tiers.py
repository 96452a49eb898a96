"""The request bodies of the three tool search tiers, as the fake model server receives them
through the real SDKs; and Anthropic's server blocks kept and sent back on the next step."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.conversation import stored
from app.providers import stream_reply
from app.settings import ModelSettings, ToolSettings
from app.storage.models import Message
from app.tools.core import tool_search_plan, toolset
from app.tools.core.registry import build_registry
from tests.fakes.model_server import FakeModelServer, Reply, ServerToolSearch, ToolCall
from tests.unit.test_tool_search import DESCRIPTIONS, Source

FAST = {"retries": 0, "backoff_seconds": 0.01, "timeout_seconds": 10}
HELLO = [{"role": "system", "content": "sys"}, {"role": "user", "content": "what is the weather in Oslo?"}]


@pytest.fixture(scope="module")
def server():
    with FakeModelServer() as fake:
        yield fake


def model(server: FakeModelServer, provider: str, native: bool) -> ModelSettings:
    base_url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    caps = {"supports_tool_search": True} if native else {}
    return ModelSettings("m", provider, "fake-model", base_url=base_url, api_key="k", capabilities=caps)


def sent(server: FakeModelServer, m: ModelSettings, messages: list[dict[str, Any]] = HELLO) -> Any:
    search = tool_search_plan.plan(ToolSettings(search="on"), None, m)
    tools = toolset.build(build_registry(), [Source(DESCRIPTIONS)], "interactive", search=search)
    before = len(server.history)
    list(stream_reply(m, messages, tools.schemas("/w", None), **FAST))
    return server.history[before]


def tool_names(body: dict[str, Any], provider: str) -> list[str]:
    return [t["function"]["name"] if provider == "openai" else t["name"] for t in body["tools"]]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_client_tier_sends_tool_search_and_holds_the_deferred_tools_back(server, provider):
    request = sent(server, model(server, provider, native=False))
    names = tool_names(request.body, provider)
    assert "tool_search" in names and "bash" in names
    assert not set(DESCRIPTIONS) & set(names)
    assert all("defer_loading" not in t for t in request.body["tools"])
    assert "tool_search_tool_bm25" not in names
    assert "anthropic-beta" not in request.headers


def test_openai_native_tier_marks_the_deferred_tools_defer_loading(server):
    request = sent(server, model(server, "openai", native=True))
    tools = request.body["tools"]
    deferred = [t["function"]["name"] for t in tools if t.get("defer_loading") is True]
    assert deferred == list(DESCRIPTIONS)
    assert all(t["type"] == "function" for t in tools)
    assert "tool_search" not in tool_names(request.body, "openai")
    assert all("defer_loading" not in t for t in tools if t["function"]["name"] not in DESCRIPTIONS)


def test_anthropic_native_tier_adds_its_bm25_search_tool(server):
    request = sent(server, model(server, "anthropic", native=True))
    tools = request.body["tools"]
    assert [t["name"] for t in tools if t.get("defer_loading") is True] == list(DESCRIPTIONS)
    assert tools[-1] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    assert "tool_search" not in [t["name"] for t in tools]
    assert request.headers["anthropic-beta"] == "advanced-tool-use-2025-11-20"


def test_anthropic_server_blocks_are_kept_and_sent_back_as_they_came(server):
    m = model(server, "anthropic", native=True)
    server.enqueue(
        Reply(
            text="Looking it up.",
            tool_search=ServerToolSearch("weather forecast", ["weather_forecast"], id="srvtoolu_1"),
            tool_calls=[ToolCall("weather_forecast", {"q": "Oslo"}, id="toolu_1")],
        )
    )
    first = list(stream_reply(m, HELLO, [], **FAST))
    blocks = [e.block for e in first if e.kind == "server_block"]
    assert [b["type"] for b in blocks] == ["server_tool_use", "tool_search_tool_result"]  # type: ignore[index]
    # Stored as the model step stores them, then read back for the next step.
    rows = [
        Message(ws_id="w", role="user", content="what is the weather in Oslo?"),
        Message(
            ws_id="w",
            role="assistant",
            content="Looking it up.",
            tool_calls=[
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "weather_forecast", "arguments": '{"q": "Oslo"}'},
                }
            ],
            server_blocks=blocks,
        ),
        Message(ws_id="w", role="tool", tool_call_id="toolu_1", name="weather_forecast", content="sunny"),
    ]
    request = sent(server, m, stored.for_model("sys", rows))
    assistant = request.body["messages"][1]["content"]
    assert assistant[0] == {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "tool_search_tool_bm25",
        "input": {"query": "weather forecast"},
    }
    assert assistant[1] == {
        "type": "tool_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "weather_forecast"}],
        },
    }
    assert [b["type"] for b in assistant[2:]] == ["text", "tool_use"]
    # The same conversation on an OpenAI model: the Anthropic blocks are not sent.
    other = sent(server, model(server, "openai", native=False), stored.for_model("sys", rows))
    assert "server_blocks" not in other.body["messages"][2] and "srvtoolu_1" not in str(other.body)
