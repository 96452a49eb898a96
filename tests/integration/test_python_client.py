"""turnstone_jobs.Client and AsyncClient against the running service: typed results, turns
followed to their end with decisions made by a callback, an event stream that survives the web
process dying, and errors a caller can tell apart (never a bare HTTP code)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.apart import run_apart
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.services import API_TOKEN, ROOT, free_port
from turnstone_jobs import (
    ApiError,
    ApprovalNeededError,
    AsyncClient,
    AuthError,
    Client,
    ConflictError,
    ConnectionError,
    Decision,
    InvalidRequestError,
    NotFoundError,
    TurnResult,
    Workstream,
)

pytestmark = pytest.mark.integration


def bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command})


@pytest.fixture
def client(services):
    with Client(services.base_url, API_TOKEN, reconnect_timeout=60) as c:
        yield c


def test_send_and_wait_decides_through_the_callback_and_returns_answer_and_results(client, model, workdir):
    ws = client.create_workstream("py", working_dir=str(workdir))
    assert isinstance(ws, Workstream) and ws.name == "py" and ws.state == "idle"
    model.enqueue(Reply(text="Running it.", tool_calls=[bash("echo from-the-tool")]))
    model.enqueue(Reply(chunks=["It ", "printed ", "from-the-tool."]))
    asked = []
    result = client.send_and_wait(ws.ws_id, "run echo", on_approval=lambda item: asked.append(item) or True)
    assert isinstance(result, TurnResult) and result.ok
    assert result.answer == "It printed from-the-tool."
    [tool] = result.tool_results
    assert (tool.name, tool.output, tool.is_error) == ("bash", "from-the-tool", False)
    [item] = asked
    assert item.func_name == "bash" and "echo from-the-tool" in item.preview and item.needs_approval
    history = client.history(ws.ws_id)
    assert [m.role for m in history.messages] == ["user", "assistant", "tool", "assistant"]
    assert history.messages[-1].content == "It printed from-the-tool."
    assert history.messages[2].raw["decision"]["via"] == "http"


def test_a_call_approved_with_edited_arguments_runs_as_edited(client, services, model, workdir):
    ws = client.create_workstream(working_dir=str(workdir))
    model.enqueue(Reply(tool_calls=[bash("echo as-the-model-asked")]))
    model.enqueue(Reply(text="done"))

    def edit(item):  # type: ignore[no-untyped-def]
        assert item.args["command"] == "echo as-the-model-asked"
        return Decision(True, arguments={**item.args, "command": "echo as-edited"})

    result = client.send_and_wait(ws.ws_id, "go", on_approval=edit)
    [tool] = result.tool_results
    assert tool.output == "as-edited"
    assert client.history(ws.ws_id).messages[2].raw["decision"]["arguments"]["command"] == "echo as-edited"

    # The asyncio client: a parked call approved as edited; a refused edit raises and decides nothing.
    model.enqueue(Reply(tool_calls=[bash("echo parked")]))
    model.enqueue(Reply(text="after"))
    with pytest.raises(ApprovalNeededError) as caught:
        client.send_and_wait(ws.ws_id, "again", timeout=60)
    [item] = caught.value.items

    async def decide() -> list[str]:
        async with AsyncClient(services.base_url, API_TOKEN) as aio:
            with pytest.raises(ApiError) as refused:
                await aio.approve(ws.ws_id, item.call_id, arguments={"command": ["not", "text"]})
            assert refused.value.status == 422 and refused.value.field == "arguments"
            return (await aio.approve(ws.ws_id, item.call_id, arguments={"command": "echo edited"})).decided

    assert run_apart(decide()) == [item.call_id]


def test_a_workstream_is_made_with_a_network_and_shows_it(client, services, workdir):
    assert client.create_workstream(working_dir=str(workdir)).network == "none"
    assert client.create_workstream(working_dir=str(workdir), network="host").network == "host"

    async def made() -> str | None:
        async with AsyncClient(services.base_url, API_TOKEN) as aio:
            return (await aio.create_workstream(working_dir=str(workdir), network="proxy")).network

    assert run_apart(made()) == "proxy"


def test_a_denial_with_feedback_reaches_the_model_and_nothing_runs(client, model, workdir):
    ws = client.create_workstream(working_dir=str(workdir))
    model.enqueue(Reply(tool_calls=[bash("touch should-not-exist")]))
    model.enqueue(Reply(text="fine, I will not"))
    result = client.send_and_wait(
        ws.ws_id, "make a file", on_approval=lambda _item: Decision(False, feedback="not here")
    )
    assert result.answer == "fine, I will not"
    [tool] = result.tool_results
    assert tool.is_error and tool.output == "Denied by user: not here"
    assert not (workdir / "should-not-exist").exists()


def test_without_a_callback_a_waiting_call_raises_and_the_turn_stays_parked(client, api, model, workdir):
    ws = client.create_workstream(working_dir=str(workdir))
    model.enqueue(Reply(tool_calls=[bash("echo parked")]))
    model.enqueue(Reply(text="after the decision"))
    with pytest.raises(ApprovalNeededError) as caught:
        client.send_and_wait(ws.ws_id, "go", timeout=60)
    [item] = caught.value.items
    parked = client.workstream(ws.ws_id)
    assert parked.state == "attention" and [p.call_id for p in parked.pending_approvals] == [item.call_id]
    decided = client.approve(ws.ws_id, item.call_id)
    assert decided.decided == [item.call_id] and decided.pending == []
    with pytest.raises(ConflictError) as again:
        client.deny(ws.ws_id, "call-that-is-not-pending")
    assert again.value.status == 409 and "not pending" in again.value.message
    api.wait_idle(ws.ws_id)  # the turn goes on after the decision: let it end within this test
    assert client.history(ws.ws_id).messages[-1].content == "after the decision"


def test_async_client_follows_a_turn_with_an_async_callback_and_always(services, model, workdir):
    async def scenario() -> tuple[TurnResult, TurnResult, Workstream]:
        async with AsyncClient(services.base_url, API_TOKEN) as client:
            ws = await client.create_workstream("async", working_dir=str(workdir))

            async def always(_item):
                return Decision(True, always=True)

            model.enqueue(Reply(tool_calls=[bash("echo one")]))
            model.enqueue(Reply(text="first done"))
            first = await client.send_and_wait(ws.ws_id, "first", on_approval=always, timeout=60)
            model.enqueue(Reply(tool_calls=[bash("echo two")]))
            model.enqueue(Reply(text="second done"))
            second = await client.send_and_wait(ws.ws_id, "second", timeout=60)  # no callback needed now
            assert await client.watches(ws.ws_id) == []
            assert (await client.history(ws.ws_id)).messages[-1].content == "second done"
            return first, second, await client.workstream(ws.ws_id)

    first, second, ws = run_apart(scenario())
    assert (first.answer, [r.output for r in first.tool_results]) == ("first done", ["one"])
    assert (second.answer, [r.output for r in second.tool_results]) == ("second done", ["two"])
    assert ws.raw["auto_approve_tools"] == ["bash"]


def test_events_resume_after_the_web_process_dies_losing_and_repeating_nothing(
    services, client, model, workdir
):
    ws = client.create_workstream(working_dir=str(workdir))
    pieces = [f"w{i} " for i in range(24)]
    model.enqueue(Reply(chunks=pieces, chunk_delay=0.25))  # six seconds of streaming
    stream = client.events(ws.ws_id, after=client.history(ws.ws_id).last_event_id)
    turn_id = client.send(ws.ws_id, "stream slowly").turn_id
    seen = []
    with stream:
        while not any(e.type == "content" for e in seen):
            seen.append(stream.next(timeout=30))
        services.restart_web()  # every socket drops; the worker streams on into Redis
        while not (seen[-1].type == "state_change" and seen[-1].get("state") == "idle"):
            seen.append(stream.next(timeout=60))
        assert stream.reconnects >= 1
    ids = [e.id for e in seen]
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # every id once, none skipped
    assert "".join(e.get("text") for e in seen if e.type == "content") == "".join(pieces)
    assert all(e.turn_id == turn_id for e in seen)


def test_errors_are_typed_and_say_what_went_wrong(services, client, workdir):
    with pytest.raises(AuthError) as denied, Client(services.base_url, "not-a-token") as stranger:
        stranger.workstreams()
    assert denied.value.status == 401 and denied.value.message
    with pytest.raises(NotFoundError, match="no workstream"):
        client.send("nosuchworkstream", "hello")
    ws = client.create_workstream(working_dir=str(workdir))
    with pytest.raises(InvalidRequestError) as nul:
        client.send(ws.ws_id, "a\x00b")
    assert nul.value.field == "message" and "NUL" in nul.value.message
    with pytest.raises(InvalidRequestError):
        client.send(ws.ws_id, "\ud800 lone surrogate")
    with pytest.raises(InvalidRequestError) as huge:
        client.send(ws.ws_id, "x" * (300 * 1024))
    assert huge.value.status == 413
    with pytest.raises(InvalidRequestError, match="tool_search"):
        client.create_workstream(tool_search={"mode": "sometimes"})
    with pytest.raises(AuthError), Client(services.base_url, "not-a-token") as stranger:
        next(iter(stranger.events(ws.ws_id)))
    with pytest.raises(NotFoundError):
        next(iter(client.events("nosuchworkstream")))
    with pytest.raises(ConnectionError), Client(f"http://127.0.0.1:{free_port()}", API_TOKEN) as nowhere:
        nowhere.workstreams()
    assert client.workstream(ws.ws_id).state == "idle"  # nothing of that reached the workstream


def _readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Terminal and Python clients", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's client section has a python example"
    return match.group(1)


def test_the_readme_example_runs_against_the_service(services, model, workdir: Path):
    code = _readme_example()
    assert len(code.strip().splitlines()) <= 12
    model.enqueue(Reply(tool_calls=[bash("ls")]))
    model.enqueue(Reply(text="There is one file: notes.txt"))
    (services.workdir / "notes.txt").write_text("hi")
    env = {**os.environ, "TURNSTONE_URL": services.base_url, "TURNSTONE_TOKEN": API_TOKEN}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=workdir, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "There is one file: notes.txt" in done.stdout
    assert "bash" in done.stdout and "notes.txt" in done.stdout  # the approved call and its output


def test_both_clients_branch_a_conversation(client, services, model, workdir):
    """Rewind, restore, edit, retry and fork (docs/branching.md) through Client and AsyncClient."""
    ws = client.create_workstream("branchy", working_dir=str(workdir))
    model.enqueue(Reply(text="one"))
    client.send_and_wait(ws.ws_id, "first")
    model.enqueue(Reply(text="two"))
    client.send_and_wait(ws.ws_id, "second")
    ids = [m.raw["id"] for m in client.history(ws.ws_id).messages]

    done = client.rewind(ws.ws_id, ids[1])
    assert done["archived"] == 2 and [b["id"] for b in client.branches(ws.ws_id)] == [done["branch"]]
    assert [m["content"] for m in client.branch(ws.ws_id, done["branch"])["messages"]] == ["second", "two"]
    assert client.restore(ws.ws_id, done["branch"])["restored"] == done["branch"]
    assert [m.content for m in client.history(ws.ws_id).messages] == ["first", "one", "second", "two"]

    model.enqueue(Reply(text="two, edited"))
    receipt = client.edit(ws.ws_id, ids[2], "second, edited", idempotency_key="e1")
    assert client.edit(ws.ws_id, ids[2], "second, edited", idempotency_key="e1") == receipt
    while client.workstream(ws.ws_id).active_turn_id is not None:
        time.sleep(0.05)
    with pytest.raises(NotFoundError):
        client.edit(ws.ws_id, 2**31 - 1, "no such message")
    fork = client.fork(ws.ws_id, ids[1], name="from one")
    assert fork.forked_from == ws.ws_id and [m.content for m in client.history(fork.ws_id).messages] == [
        "first",
        "one",
    ]

    async def retried() -> list[str]:
        async with AsyncClient(services.base_url, API_TOKEN) as aio:
            model.enqueue(Reply(text="two, retried"))
            await aio.retry(ws.ws_id)
            while (await aio.workstream(ws.ws_id)).active_turn_id is not None:
                await asyncio.sleep(0.05)
            reasons = [b["reason"] for b in await aio.branches(ws.ws_id)]
            with pytest.raises(ConflictError):
                await aio.retry((await aio.create_workstream("empty")).ws_id)
            return reasons

    assert run_apart(retried()) == ["retry", "edit"]
    assert [m.content for m in client.history(ws.ws_id).messages][-1] == "two, retried"


def test_a_coordinator_made_closed_and_its_task_list_read_through_both_clients(client, services, workdir):
    ws = client.create_workstream("lead", kind="coordinator", working_dir=str(workdir))
    assert ws.kind == "coordinator" and not ws.closed and ws.parent_id is None
    assert client.tasks(ws.ws_id) == []
    assert client.close_workstream(ws.ws_id) == [ws.ws_id]
    assert client.workstream(ws.ws_id).closed

    async def through_async() -> tuple[str, list[str], list]:
        async with AsyncClient(services.base_url, API_TOKEN) as aio:
            made = await aio.create_workstream("lead2", kind="coordinator", working_dir=str(workdir))
            return made.kind, await aio.close_workstream(made.ws_id), await aio.tasks(made.ws_id)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # a loop of its own, whatever this thread has
        kind, closed, tasks = pool.submit(asyncio.run, through_async()).result(timeout=60)
    assert kind == "coordinator" and len(closed) == 1 and tasks == []
