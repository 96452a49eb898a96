"""`turnstone-jobs send` and `turnstone-jobs workstreams` for scripts, as real subprocesses
against the running service: output to parse, exit 0 on success, 1 and one line on stderr
when the token is bad, the workstream unknown or the server down."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.services import API_TOKEN, BIN, free_port

pytestmark = pytest.mark.integration


def cli(*args: str | bytes, url: str, token: str | None = API_TOKEN) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TURNSTONE_URL", "TURNSTONE_TOKEN")}
    env["TURNSTONE_URL"] = url  # the environment; --url/--token are tested below
    if token is not None:
        env["TURNSTONE_TOKEN"] = token
    return subprocess.run(
        [str(BIN / "turnstone-jobs"), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_send_wait_prints_the_answer_and_json_carries_the_tool_results(api, services, model, workdir):
    ws_id = api.create_workstream(name="scripted", working_dir=str(workdir), auto_approve=True)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo cli-ran"})]))
    model.enqueue(Reply(text="The command printed cli-ran."))
    done = cli("send", ws_id, "run it", "--wait", "--json", url=services.base_url)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["state"] == "idle" and result["answer"] == "The command printed cli-ran."
    assert [(t["name"], t["output"]) for t in result["tool_results"]] == [("bash", "cli-ran")]
    model.enqueue(Reply(text="plain answer"))
    done = cli("send", ws_id, "again", "--wait", url=services.base_url)
    assert (done.returncode, done.stdout) == (0, "plain answer\n")


def test_send_without_wait_prints_the_turn_id(api, services, model, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    model.enqueue(Reply(text="later"))
    done = cli("send", ws_id, "hello", "--json", "--url", services.base_url, url="http://127.0.0.1:9")
    assert done.returncode == 0, done.stderr  # --url wins over TURNSTONE_URL
    receipt = json.loads(done.stdout)
    api.wait_idle(ws_id)
    assert [m["turn_id"] for m in api.history(ws_id)][0] == receipt["turn_id"]


def test_a_turn_that_fails_or_waits_for_a_person_exits_1(api, services, model, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), model="keyless")
    done = cli("send", ws_id, "hi", "--wait", url=services.base_url)
    assert done.returncode == 1 and done.stderr.startswith("turnstone-jobs: turn error")
    ws_id = api.create_workstream(working_dir=str(workdir))
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo x"})]))
    done = cli("send", ws_id, "hi", "--wait", url=services.base_url)
    assert done.returncode == 1 and "waits for a decision" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    api.cancel(ws_id)
    api.wait_idle(ws_id)


def test_workstreams_lists_them_as_lines_or_json(api, services, workdir):
    ws_id = api.create_workstream(name="listed one", working_dir=str(workdir))
    done = cli("workstreams", url=services.base_url)
    assert done.returncode == 0, done.stderr
    assert f"{ws_id}\tidle\tlisted one" in done.stdout.splitlines()
    rows = json.loads(cli("workstreams", "--json", url=services.base_url).stdout)
    assert any(r["ws_id"] == ws_id and r["name"] == "listed one" for r in rows)


@pytest.mark.parametrize(
    ("args", "token", "says"),
    [
        (("workstreams",), "wrong-token", "token"),
        (("workstreams",), None, "token"),
        (("send", "nosuchworkstream", "hello"), API_TOKEN, "no workstream nosuchworkstream"),
        (("send", "nosuchworkstream", "hello", "--wait"), API_TOKEN, "no workstream"),
    ],
)
def test_failures_exit_1_with_one_line_on_stderr(services, args, token, says):
    done = cli(*args, url=services.base_url, token=token)
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr.lower(), done.stderr
    assert "Traceback" not in done.stderr


def test_a_server_that_is_down_exits_1_saying_so(services):
    url = f"http://127.0.0.1:{free_port()}"
    for args in (("workstreams",), ("send", "abc", "hi", "--wait")):
        done = cli(*args, url=url)
        assert done.returncode == 1 and done.stderr.startswith(f"turnstone-jobs: cannot reach {url}")
        assert len(done.stderr.splitlines()) == 1


def test_a_hostile_message_is_refused_in_one_line(api, services, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    done = cli("send", ws_id, b"not UTF-8: \xff\xfe", url=services.base_url)  # argv: lone surrogates
    assert done.returncode == 1 and "lone surrogate" in done.stderr, done.stderr
    done = cli("send", ws_id, "   ", url=services.base_url)
    assert done.returncode == 1 and "must not be empty" in done.stderr
    assert api.history(ws_id) == []
