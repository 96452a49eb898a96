"""task_agent's handler, a sub-agent's tool set and its last bounded step: no services needed."""

from __future__ import annotations

import pytest

from app.settings import ModelSettings, Settings, ToolSettings
from app.storage.models import Workstream
from app.tools import task_agent
from app.tools.core import toolset
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import execute_call, prepare_call
from app.tools.core.registry import build_registry
from app.tools.core.tool import TASK
from app.tools.core.tool_search_plan import SearchPlan
from tests.unit.test_toolset import Source, names, tool


def context(tmp_path, **extra) -> ToolContext:  # type: ignore[no-untyped-def]
    return ToolContext(ws_id="w", working_dir=str(tmp_path), **extra)


@pytest.mark.parametrize(
    "raw",
    [
        '{"prompt": 5}',
        '{"prompt": null}',
        '{"prompt": ["a"]}',
        '{"prompt": {"deep": [[[1]]]}}',
        '{"prompt": " \\n "}',
    ],
)
def test_a_prompt_that_is_not_a_non_empty_string_is_an_error_item(tmp_path, raw):
    call = prepare_call(build_registry(), "c1", "task_agent", raw, context(tmp_path))
    assert call.error is not None and "non-empty string" in call.error
    assert call.needs_approval is False


def test_a_huge_prompt_is_refused_with_a_hint_and_not_stored_whole(tmp_path):
    call = prepare_call(
        build_registry(), "c1", "task_agent", '{"prompt": "' + "x" * 200_000 + '"}', context(tmp_path)
    )
    assert call.error is not None and "at most 100,000" in call.error and "file" in call.error
    assert len(call.args["prompt"]) <= task_agent.HEADER_CHARS


def test_a_bare_string_is_the_prompt_and_the_call_needs_approval(tmp_path):
    call = prepare_call(
        build_registry(), "c1", "task_agent", "find the TODOs\nand list them", context(tmp_path)
    )
    assert call.error is None and call.needs_approval is True
    assert call.args == {"prompt": "find the TODOs\nand list them"}
    assert call.header == "task_agent find the TODOs"
    assert call.preview == "find the TODOs\nand list them"


def test_execute_starts_a_sub_agent_and_waits_for_it(tmp_path):
    started = []
    ctx = context(tmp_path, start_task=lambda prompt: started.append(prompt) or "child-1")
    call = prepare_call(build_registry(), "c1", "task_agent", '{"prompt": "go"}', ctx)
    outcome = execute_call(build_registry(), call, ctx)
    assert started == ["go"] and outcome.waiting_on == "sub-agent child-1"


def test_without_a_service_execute_says_it_cannot_start_one(tmp_path):
    outcome = task_agent.execute({"prompt": "go"}, context(tmp_path))
    assert outcome.is_error and outcome.waiting_on is None and "cannot start" in outcome.output


def test_a_sub_agent_gets_task_tools_and_every_source_tool_in_view_but_never_task_agent():
    source = Source(tool("lookup"), tool("rare"))
    search = SearchPlan(mode="on", threshold=0, max_results=5)  # tool search on: tools of sources wait
    built = toolset.build(build_registry(), [source], TASK, search=search)
    assert "task_agent" not in names(built.visible)
    assert {"bash", "read_file", "lookup", "rare"} <= set(names(built.visible))
    assert built.deferred == []
    interactive = toolset.build(build_registry(), [source], "interactive", search=search)
    assert "task_agent" in names(interactive.visible) and names(interactive.deferred) == ["lookup", "rare"]


def settings(max_turns: int) -> Settings:
    return Settings(tools=ToolSettings(agent_max_turns=max_turns))


def ws(kind: str) -> Workstream:
    return Workstream(id="w", name="w", kind=kind, working_dir="/tmp")


def test_by_default_a_sub_agent_has_no_step_limit():
    assert Settings().tools.agent_max_turns == 0
    assert all(task_agent.last_step_notice(Settings(), ws(TASK), step) is None for step in range(500))


def test_at_the_limit_a_sub_agent_gets_the_notice_and_an_interactive_workstream_never():
    assert task_agent.last_step_notice(settings(3), ws(TASK), 2) is None
    notice = task_agent.last_step_notice(settings(3), ws(TASK), 3)
    assert notice is not None and "all 3 of your steps" in notice and "final answer" in notice
    assert task_agent.last_step_notice(settings(3), ws(TASK), 7) == notice
    assert task_agent.last_step_notice(settings(3), ws("interactive"), 9) is None


def test_the_last_step_offers_no_tools_but_keeps_them_listed_for_anthropic():
    built = toolset.build(build_registry(), [], TASK)
    openai = ModelSettings(name="m", provider="openai", model="x")
    anthropic = ModelSettings(name="c", provider="anthropic", model="claude")
    assert task_agent.last_step_tools(built, openai).visible == []
    assert task_agent.last_step_tools(built, anthropic) is built


def test_the_settings_read_agent_max_turns_from_config():
    loaded = Settings.from_mapping({"tools": {"agent_max_turns": 4}}, {})
    assert loaded.tools.agent_max_turns == 4
