"""Prompt caching through the running service: Anthropic requests carry at most four
cache_control breakpoints, hosted-OpenAI requests the workstream's prompt_cache_key, and what the
provider read from its cache is stored per step and added up per workstream."""

from __future__ import annotations

import json

import pytest

from app.providers.prompt_cache import MAX_BREAKPOINTS, breakpoints
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def _two_steps(api, model, open_socket, workdir, name: str) -> tuple[str, list[dict]]:
    model.prompt_cache = True
    ws_id = api.create_workstream(working_dir=str(workdir), model=name, auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo cached"})]))
    model.enqueue(Reply(text="it printed cached"))
    sock.wait_turn_end(api.send(ws_id, "print cached"))
    return ws_id, [r.body for r in model.history if r.body]


def test_anthropic_requests_mark_tools_system_and_the_newest_message(api, model, open_socket, workdir):
    ws_id, bodies = _two_steps(api, model, open_socket, workdir, "claude")
    first, second = bodies
    for body in bodies:
        assert breakpoints(body) == 3 <= MAX_BREAKPOINTS
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # the second request starts as the first did, its one mark moved to the newest message
    unmarked = json.dumps(first["messages"][0]["content"][0] | {"cache_control": None})
    assert json.dumps(second["messages"][0]["content"][0] | {"cache_control": None}) == unmarked
    assert "cache_control" not in second["messages"][0]["content"][0]
    stored = [m["usage"] for m in api.history(ws_id) if m["role"] == "assistant"]
    assert stored[0].get("cache_read_input_tokens", 0) == 0  # nothing before the first request
    assert stored[1]["cache_read_input_tokens"] > 0
    total = api.workstream(ws_id)["usage"]
    assert total["cache_read_input_tokens"] == sum(u.get("cache_read_input_tokens", 0) for u in stored)


def test_hosted_openai_requests_carry_the_workstreams_cache_key(api, model, open_socket, workdir):
    ws_id, bodies = _two_steps(api, model, open_socket, workdir, "small")
    assert [b["prompt_cache_key"] for b in bodies] == [ws_id, ws_id]
    stored = [m["usage"] for m in api.history(ws_id) if m["role"] == "assistant"]
    assert stored[1]["cache_read_input_tokens"] > 0 and "cache_control" not in json.dumps(bodies)


def test_other_openai_compatible_servers_get_no_cache_key(api, model, open_socket, workdir):
    _ws_id, bodies = _two_steps(api, model, open_socket, workdir, "vision")  # a generic server
    assert all("prompt_cache_key" not in b for b in bodies)
