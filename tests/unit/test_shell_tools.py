"""bash_output, kill_shell and bash's run_in_background at prepare: hostile values refused as
data, never raised; and without the service's database the tools say so."""

from __future__ import annotations

import pytest

from app.tools import bash, bash_output, kill_shell
from app.tools.core.base import ToolContext

HOSTILE = ["", " ", "\x00", "a\x00", "x" * 33, 7, True, None, [], {"a": 1}, [[[["deep"]]]], "\ud800"]


@pytest.fixture
def ctx(tmp_path):
    return ToolContext(ws_id="w1", working_dir=str(tmp_path))


@pytest.mark.parametrize("handler", [bash_output, kill_shell])
@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_a_hostile_shell_id_is_refused(handler, value, ctx):
    prep = handler.prepare({"shell_id": value}, ctx)
    assert prep.error is not None and "shell_id" in prep.error and not prep.needs_approval


@pytest.mark.parametrize("value", ["(", "a" * 501, 7, ["x"], {"a": 1}])
def test_a_filter_that_is_no_regular_expression_is_refused(value, ctx):
    prep = bash_output.prepare({"shell_id": "abc", "filter": value}, ctx)
    assert prep.error is not None and "'filter'" in prep.error


@pytest.mark.parametrize("value", ["yes", 1, [], {"a": 1}])
def test_run_in_background_takes_true_or_false_only(value, ctx):
    prep = bash.prepare({"command": "sleep 1", "run_in_background": value}, ctx)
    assert prep.error == "Error: 'run_in_background' must be true or false"


def test_a_background_call_asks_like_bash_and_says_so(ctx):
    prep = bash.prepare({"command": "npm run dev", "run_in_background": True}, ctx)
    assert prep.needs_approval and prep.header == "$ npm run dev &"
    assert "in the background" in prep.preview
    assert bash.prepare({"command": "rm -rf /", "run_in_background": True}, ctx).error.startswith("Blocked")


@pytest.mark.parametrize(
    ("handler", "args"),
    [
        (bash_output, {"shell_id": "abc"}),
        (kill_shell, {"shell_id": "abc"}),
        (bash, {"command": "true", "run_in_background": True}),
    ],
)
def test_without_the_services_database_the_tools_say_so(handler, args, ctx):
    outcome = handler.execute(handler.prepare(args, ctx).args, ctx)
    assert outcome.is_error and "database" in outcome.output
