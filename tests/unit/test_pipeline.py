"""Phases 1 and 3 of a tool call: prepare_call, execute_call, run_calls, truncation."""

import json
import logging
import threading
import time
import types

import pytest

from app.settings import ToolSettings
from app.tools.core.base import Preparation, ToolContext, ToolOutcome
from app.tools.core.pipeline import (
    ArgumentsError,
    PreparedCall,
    execute_call,
    parse_arguments,
    prepare_call,
    run_calls,
)
from app.tools.core.registry import build_registry
from app.tools.core.truncation import truncate, truncate_pieces
from app.tools.files import images


class Recorder:
    """A handler for the `search` schema that records what reaches it."""

    def __init__(self, output="found", prepare_error=None, execute_error=None):
        self.prepared, self.executed = [], []
        self.output, self.prepare_error, self.execute_error = output, prepare_error, execute_error

    def prepare(self, args, ctx):
        if self.prepare_error:
            raise self.prepare_error
        self.prepared.append(args)
        return Preparation(args, f"search {args.get('query')}", needs_approval=False)

    def execute(self, args, ctx):
        self.executed.append(args)
        if self.execute_error:
            raise self.execute_error
        return ToolOutcome(self.output)


def registry_with(handler):
    from app.tools import bash

    return build_registry({"bash": bash, "search": handler})


def context(tmp_path, kind="interactive", truncation=262_144):
    return ToolContext("ws", str(tmp_path), settings=ToolSettings(truncation=truncation), kind=kind)


def test_bare_string_arguments_use_the_primary_key(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", "ls -la", context(tmp_path))
    assert call.error is None
    assert call.args["command"] == "ls -la"


def test_a_json_string_uses_the_primary_key(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", '"ls -la"', context(tmp_path))
    assert call.args["command"] == "ls -la"


def test_json_object_arguments_are_passed_to_prepare(tmp_path):
    handler = Recorder()
    prepare_call(registry_with(handler), "c1", "search", '{"query": "x+"}', context(tmp_path))
    assert handler.prepared == [{"query": "x+"}]


def test_malformed_json_object_is_an_error_item(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", '{"command": "ls', context(tmp_path))
    assert call.error.startswith("Error: bash: arguments are not valid JSON")
    assert call.needs_approval is False


def test_a_complete_object_followed_by_junk_is_rescued(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", '{"command": "ls"}}', context(tmp_path))
    assert call.error is None and call.args["command"] == "ls"


def test_arguments_that_are_not_an_object_are_an_error_item(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", "[1, 2]", context(tmp_path))
    assert call.error == "Error: bash: arguments must be a JSON object, not list"


def test_empty_arguments_reach_the_handler_as_an_empty_object(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", "", context(tmp_path))
    assert "non-empty 'command'" in call.error


def test_unknown_tool_is_an_error_item_naming_only_offered_tools(tmp_path):
    call = prepare_call(build_registry(), "c1", "launch_missiles", "{}", context(tmp_path))
    offered = ", ".join(
        [
            "bash",
            "bash_output",
            "diff_file",
            "edit_file",
            "kill_shell",
            "memory",
            "notify",
            "open_preview",
            "read_file",
            "recall",
            "search",
        ]
        + ["skill", "task_agent", "watch"]
        + ["web_fetch", "web_search", "write_file"]
    )
    assert call.error == f"Unknown tool: launch_missiles. Available tools: {offered}"
    assert call.needs_approval is False


def test_a_tool_without_a_handler_is_unknown(tmp_path):
    call = prepare_call(build_registry(), "c1", "use_prompt", '{"name": "x"}', context(tmp_path))
    assert call.error.startswith("Unknown tool: use_prompt")


def test_a_tool_not_offered_to_the_kind_is_unknown(tmp_path):
    registry = build_registry({"task_agent": Recorder()})
    call = prepare_call(registry, "c1", "task_agent", "do it", context(tmp_path, kind="task"))
    assert call.error.startswith("Unknown tool: task_agent")


def test_an_exception_in_prepare_becomes_an_error_item(tmp_path, caplog):
    handler = Recorder(prepare_error=RuntimeError("bad state"))
    with caplog.at_level(logging.ERROR):
        call = prepare_call(registry_with(handler), "c1", "search", "x", context(tmp_path))
    assert call.error == "Error: could not prepare search: bad state"
    assert "preparing search call c1 failed" in caplog.text


def test_prepare_fills_header_preview_and_approval(tmp_path):
    call = prepare_call(build_registry(), "c7", "bash", '{"command": "pwd"}', context(tmp_path))
    assert (call.call_id, call.func_name, call.header) == ("c7", "bash", "$ pwd")
    assert call.preview == "pwd" and call.needs_approval is True


def test_prepared_call_survives_a_json_round_trip(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", '{"command": "ls", "timeout": 9}', context(tmp_path))
    assert PreparedCall.from_dict(json.loads(json.dumps(call.to_dict()))) == call


def test_error_items_are_never_executed(tmp_path):
    handler = Recorder()
    call = PreparedCall("c1", "search", {"query": "x"}, "h", "", False, "Denied by user")
    outcome = execute_call(registry_with(handler), call, context(tmp_path))
    assert outcome == ToolOutcome("Denied by user", is_error=True)
    assert handler.executed == []


def test_an_exception_in_execute_becomes_an_error_result(tmp_path):
    handler = Recorder(execute_error=OSError("disk on fire"))
    call = PreparedCall("c1", "search", {"query": "x"})
    outcome = execute_call(registry_with(handler), call, context(tmp_path))
    assert outcome == ToolOutcome("Error: disk on fire", is_error=True)


def test_long_output_is_truncated_to_the_setting(tmp_path):
    handler = Recorder(output="a" * 3000 + "b" * 3000)
    call = PreparedCall("c1", "search", {"query": "x"})
    outcome = execute_call(registry_with(handler), call, context(tmp_path, truncation=2000))
    assert outcome.output.startswith("a" * 1000 + "\n")
    assert outcome.output.endswith("\n" + "b" * 1000)
    assert "4,000 characters cut" in outcome.output


def test_execute_call_runs_bash(tmp_path):
    registry = build_registry()
    call = prepare_call(registry, "c1", "bash", "echo hello", context(tmp_path))
    assert execute_call(registry, call, context(tmp_path)) == ToolOutcome("hello")


def test_run_calls_runs_several_in_parallel_in_input_order():
    def nap(n):
        time.sleep(0.5)
        return n

    started = time.monotonic()
    assert run_calls([1, 2, 3, 4], nap) == [1, 2, 3, 4]
    assert time.monotonic() - started < 1.2


def test_run_calls_runs_one_call_on_the_calling_thread():
    assert run_calls(["x"], lambda _: threading.get_ident()) == [threading.get_ident()]


def test_run_calls_with_no_items_returns_nothing():
    assert run_calls([], lambda _: 1 / 0) == []


def test_truncate_leaves_short_text_alone():
    assert truncate("short", 10) == "short"


def test_truncate_keeps_head_and_tail_and_says_how_much_was_cut():
    text = truncate("H" * 50 + "M" * 100 + "T" * 50, 100)
    head, _, tail = text.partition("\n\n[... 100 characters cut")
    assert head == "H" * 50
    assert tail.endswith("\n\n" + "T" * 50)


def test_an_image_marker_is_never_truncated(tmp_path):
    output = images.marker("/w/pic.png", "image/png", b"\x89PNG" + b"\x00" * 3000)
    call = PreparedCall("c1", "search", {"query": "x"})
    outcome = execute_call(registry_with(Recorder(output)), call, context(tmp_path, truncation=100))
    assert outcome == ToolOutcome(output)


def test_long_text_that_only_looks_like_a_marker_is_truncated(tmp_path):
    output = '{"type": "image", "data": "' + "A" * 3000
    call = PreparedCall("c1", "search", {"query": "x"})
    outcome = execute_call(registry_with(Recorder(output)), call, context(tmp_path, truncation=100))
    assert "characters cut from the middle" in outcome.output and len(outcome.output) < 300


# -- phase 1: arguments, names, handler answers --------------------------------


@pytest.mark.parametrize("raw", ["true", "404", "null", "3.5"])
def test_a_bare_word_json_reads_as_a_scalar_uses_the_primary_key(tmp_path, raw):
    call = prepare_call(build_registry(), "c1", "bash", raw, context(tmp_path))
    assert call.error is None and call.args["command"] == raw


BARE_BRACKETS = [
    ("bash", "[ -f x ] && echo yes"),
    ("bash", "{ echo a; echo b; } > out"),
    ("bash", "[[ -d . ]] && echo dir"),
    ("bash", '{ "$cmd"; }'),
    ("search", "[0-9]+ errors"),
    ("search", "[abc]"),
    ("search", "[\"']quoted[\"']"),
    ("search", "{2,3}x"),
]


@pytest.mark.parametrize(("tool", "raw"), BARE_BRACKETS)
def test_a_bare_string_starting_with_a_bracket_or_brace_uses_the_primary_key(tmp_path, tool, raw):
    call = prepare_call(build_registry(), "c1", tool, raw, context(tmp_path))
    assert call.error is None
    assert call.args[build_registry().tool(tool, "interactive").definition.primary_key] == raw


def test_a_bare_bash_test_and_group_run_as_commands(tmp_path):
    registry = build_registry()
    (tmp_path / "x").write_text("")
    test = prepare_call(registry, "c1", "bash", "[ -f x ] && echo yes", context(tmp_path))
    assert execute_call(registry, test, context(tmp_path)) == ToolOutcome("yes")
    group = prepare_call(registry, "c2", "bash", "{ echo a; echo b; } > out", context(tmp_path))
    assert execute_call(registry, group, context(tmp_path)) == ToolOutcome("(no output)")
    assert (tmp_path / "out").read_text() == "a\nb\n"


BROKEN_OBJECTS = [
    '{"command": "ls',
    '{"command": "ls", "timeout": ',
    '{"command"',
    '{"comm',
    "{",
    '  {  "command" : ',
    '[{"command": "ls"',
    "{'command': 'ls'}",
]


@pytest.mark.parametrize("raw", BROKEN_OBJECTS)
def test_broken_json_that_starts_like_an_object_with_a_quoted_key_is_refused(tmp_path, raw):
    call = prepare_call(build_registry(), "c1", "bash", raw, context(tmp_path))
    assert call.error is not None
    assert call.error.startswith("Error: bash: arguments are not valid JSON (")
    assert call.error.endswith("); send one JSON object") and call.needs_approval is False


@pytest.mark.parametrize(
    "raw", ['{"' + "k" * 1_000_000, "[" * 100_000, '{"' + "\\\\" * 500_000 + '" x', "{'" + "k" * 1_000_000]
)
def test_huge_or_deep_argument_text_is_parsed_quickly_without_a_crash(raw):
    started = time.monotonic()
    try:
        args = parse_arguments(raw, "command")
    except ArgumentsError:
        args = None
    assert time.monotonic() - started < 1
    assert args is None or args == {"command": raw}


def test_malformed_json_error_says_where_and_what_to_send(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", '{"command": "ls', context(tmp_path))
    assert "line 1 column 13" in call.error and call.error.endswith("send one JSON object")


def test_a_malformed_call_is_never_executed(tmp_path):
    handler = Recorder()
    registry = registry_with(handler)
    call = prepare_call(registry, "c1", "search", '{"query": ', context(tmp_path))
    outcome = execute_call(registry, call, context(tmp_path))
    assert outcome.is_error and outcome.output == call.error
    assert handler.prepared == [] and handler.executed == []


def test_a_call_refused_at_prepare_is_never_executed(tmp_path):
    registry = build_registry()
    marker = tmp_path / "ran"
    call = prepare_call(registry, "c1", "bash", f"touch {marker}; rm -rf /", context(tmp_path))
    outcome = execute_call(registry, call, context(tmp_path))
    assert outcome == ToolOutcome("Blocked: command matches dangerous pattern 'rm -rf /'", is_error=True)
    assert not marker.exists()


def test_a_long_unknown_name_is_cut_in_the_header_too(tmp_path):
    call = prepare_call(build_registry(), "c1", "x" * 500, "{}", context(tmp_path))
    assert call.header == "x" * 80 + "..."
    assert call.error.startswith("Unknown tool: " + "x" * 80 + "...")


def test_a_prepare_that_returns_no_preparation_is_an_error_item(tmp_path):
    handler = types.SimpleNamespace(prepare=lambda args, ctx: None, execute=lambda args, ctx: None)
    call = prepare_call(registry_with(handler), "c1", "search", "x", context(tmp_path))
    assert call.error == "Error: could not prepare search: prepare() returned NoneType, not a Preparation"


class Asking(Recorder):
    """A handler that, like web_fetch in an interactive session, asks for approval."""

    def prepare(self, args, ctx):
        return Preparation(args, "fetch", needs_approval=True)


def test_task_sessions_run_task_auto_tools_unprompted(tmp_path):
    registry = build_registry({"web_fetch": Asking()})
    raw = '{"url": "https://example.com", "question": "what?"}'
    interactive = prepare_call(registry, "c1", "web_fetch", raw, context(tmp_path))
    task = prepare_call(registry, "c2", "web_fetch", raw, context(tmp_path, kind="task"))
    assert interactive.needs_approval is True
    assert task.needs_approval is False


def test_task_sessions_still_ask_before_other_tools(tmp_path):
    call = prepare_call(build_registry(), "c1", "bash", "ls", context(tmp_path, kind="task"))
    assert call.needs_approval is True


# -- phase 3: execution -----------------------------------------------------------


def test_run_calls_runs_at_most_four_at_once():
    running, most = 0, 0
    lock = threading.Lock()

    def work(_n):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.1)
        with lock:
            running -= 1

    run_calls(list(range(10)), work)
    assert most == 4


def test_bash_output_past_the_setting_keeps_its_head_and_tail(tmp_path):
    registry = build_registry()
    command = "echo FIRST; yes 0123456789 | head -c 100000; echo LAST"
    call = prepare_call(registry, "c1", "bash", command, context(tmp_path))
    outcome = execute_call(registry, call, context(tmp_path, truncation=2000))
    assert outcome.output.startswith("FIRST\n") and outcome.output.endswith("LAST")
    assert "characters cut from the middle of this output" in outcome.output
    assert len(outcome.output) < 2200


def cut_notice(count):
    return f"\n\n[... {count:,} characters cut from the middle of this output ...]\n\n"


@pytest.mark.parametrize(
    ("command", "stdout", "stderr", "note"),
    [
        ("seq 1 500000", range(1, 500_001), range(0), ""),
        ("seq 1 400000 >&2", range(0), range(1, 400_001), ""),
        ("seq 1 500000; seq 1 300000 >&2; exit 3", range(1, 500_001), range(1, 300_001), "\n[exit code: 3]"),
    ],
)
def test_bash_output_past_what_it_keeps_has_one_notice_counting_all_that_was_cut(
    tmp_path, command, stdout, stderr, note
):
    # Megabytes, where each stream keeps 4 x 2,048 characters while the command runs: the
    # model is told how much of the real output it does not see, not how much of what was kept.
    registry = build_registry()
    call = prepare_call(registry, "c1", "bash", command, context(tmp_path))
    outcome = execute_call(registry, call, context(tmp_path, truncation=2048))
    lines = [str(n) for n in stdout] + [f"[stderr] {n}" for n in stderr]
    whole = "\n".join(lines) + note
    assert outcome.output == whole[:1024] + cut_notice(len(whole) - 2048) + whole[-1024:]
    assert outcome.output.count("characters cut") == 1 and "not kept" not in outcome.output


def test_cutting_a_cut_text_again_changes_nothing():
    once = truncate("H" * 5000 + "T" * 5000, 100)
    assert truncate(once, 100) == once
    assert truncate_pieces(["H" * 3000, 1_000_000, "T" * 3000], 100) == (
        "H" * 50 + cut_notice(1_000_000 + 6000 - 100) + "T" * 50
    )


def test_a_gap_near_the_end_gives_only_the_text_after_it_and_counts_the_rest():
    text = truncate_pieces(["H" * 300, 5000, "end"], 100)
    assert text == "H" * 50 + cut_notice(250 + 5000) + "end"
    assert truncate(text, 100) == text


def test_an_output_that_prints_a_notice_of_its_own_is_still_cut_to_the_limit():
    fake = "x" * 500 + cut_notice(7) + "y" * 5000
    cut = truncate(fake, 1000)
    assert len(cut) <= 1000 + len(cut_notice(10**9)) and cut.endswith("y" * 500)
    assert truncate(cut_notice(3) * 40, 100).count("characters cut") <= 2


def test_an_argument_the_tool_does_not_take_is_an_error_item_and_never_runs(tmp_path):
    registry = build_registry()
    marker = tmp_path / "elsewhere"
    raw = json.dumps({"command": f"touch {marker.name}", "cwd": "/tmp"})
    call = prepare_call(registry, "c1", "bash", raw, context(tmp_path))
    assert call.error == (
        "Error: bash does not take 'cwd'; it takes: command, timeout, stop_on_error, run_in_background"
    )
    assert call.needs_approval is False
    assert execute_call(registry, call, context(tmp_path)).is_error
    assert not marker.exists()


def test_only_the_arguments_the_tool_does_not_take_are_named(tmp_path):
    handler = Recorder()
    raw = json.dumps({"query": "x", "path": ".", "extra": 1})
    call = prepare_call(registry_with(handler), "c1", "search", raw, context(tmp_path))
    assert call.error is not None and "'extra'" in call.error and "'path'" not in call.error
    assert handler.prepared == []
