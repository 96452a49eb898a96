"""Background shells through the running service: bash run_in_background returns a shell id at
once; the shell outlives its call and turn, bash_output reads it incrementally (filtered),
kill_shell stops it; at most N per workstream; closing the workstream stops them; a worker that
dies is reported honestly, with the output printed until then kept."""

from __future__ import annotations

import re
import time

import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import wait_until

pytestmark = pytest.mark.integration

SHELL_ID = re.compile(r"shell ([0-9a-f]{16})")


def background(command: str, call_id: str) -> ToolCall:
    return ToolCall("bash", {"command": command, "run_in_background": True}, id=call_id)


def run_turn(api, model, sock, ws_id: str, calls: list[ToolCall]) -> dict[str, dict]:
    """One turn making `calls`; their tool_result events by call id."""
    model.enqueue(Reply(tool_calls=calls))
    model.enqueue(Reply(text="ok"))
    turn_id = api.send(ws_id, "go")
    sock.wait_turn_end(turn_id, timeout=60)
    return {c.id: sock.wait_type("tool_result", call_id=c.id) for c in calls}


def shells(api, ws_id: str) -> list[dict]:
    return api.http.get(f"/v1/api/workstreams/{ws_id}/shells").json()["shells"]


def test_a_shell_outlives_its_turn_is_read_incrementally_filtered_and_killed(
    api, model, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    command = "for i in $(seq 1 600); do echo line$i; echo err$i >&2; sleep 0.05; done"
    started = time.monotonic()
    result = run_turn(api, model, sock, ws_id, [background(command, "b1")])["b1"]
    assert not result["is_error"] and time.monotonic() - started < 15  # at once, not after 30 s
    shell_id = SHELL_ID.search(result["output"]).group(1)
    # the turn has ended; the shell goes on
    wait_until(lambda: "line20" in (shells(api, ws_id)[0]["tail"]), 30, "the shell printing")
    first = run_turn(api, model, sock, ws_id, [ToolCall("bash_output", {"shell_id": shell_id}, id="o1")])[
        "o1"
    ]
    assert first["output"].startswith(f"[shell {shell_id}: running]")
    assert "line1\n" in first["output"] and "err1\n" in first["output"]
    seen = int(re.findall(r"line(\d+)", first["output"])[-1])
    time.sleep(1)
    args = {"shell_id": shell_id, "filter": "^line"}
    second = run_turn(api, model, sock, ws_id, [ToolCall("bash_output", args, id="o2")])["o2"]
    numbers = [int(n) for n in re.findall(r"line(\d+)", second["output"])]
    assert numbers and numbers[0] == seen + 1  # only what is new, from where the last read stopped
    assert "err" not in second["output"]  # the filter kept only the lines it matched
    killed = run_turn(api, model, sock, ws_id, [ToolCall("kill_shell", {"shell_id": shell_id}, id="k1")])[
        "k1"
    ]
    assert killed["output"] == f"Shell {shell_id} stopped (killed)."
    (listed,) = shells(api, ws_id)
    assert listed["status"] == "killed" and listed["note"] == "stopped by kill_shell"
    last = run_turn(api, model, sock, ws_id, [ToolCall("bash_output", {"shell_id": shell_id}, id="o3")])["o3"]
    assert last["output"].startswith(f"[shell {shell_id}: killed")
    time.sleep(0.5)
    assert shells(api, ws_id)[0]["tail"] == listed["tail"]  # stopped: nothing more printed


def test_at_most_n_shells_and_closing_the_workstream_stops_them(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    calls = [background(f"echo up{i}; sleep 60", f"b{i}") for i in range(5)]
    results = run_turn(api, model, sock, ws_id, calls)
    refused = [r for r in results.values() if r["is_error"]]
    assert len(refused) == 1 and "at most 4" in refused[0]["output"]
    wait_until(
        lambda: len([s for s in shells(api, ws_id) if s["status"] == "running"]) == 4, 30, "four running"
    )
    wrong = run_turn(api, model, sock, ws_id, [ToolCall("bash_output", {"shell_id": "f" * 16}, id="o1")])[
        "o1"
    ]
    assert wrong["is_error"] and "no background shell" in wrong["output"]
    assert api.http.post(f"/v1/api/workstreams/{ws_id}/close", json={}).status_code == 200
    wait_until(lambda: all(s["status"] == "killed" for s in shells(api, ws_id)), 30, "all stopped")
    assert {s["note"] for s in shells(api, ws_id)} == {"its workstream was closed"}


def test_a_worker_killed_under_a_shell_is_reported_with_its_output_kept(
    api, model, services, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    command = "for i in $(seq 1 2000); do echo tick$i; echo tick$i >> ticks; sleep 0.05; done"
    result = run_turn(api, model, sock, ws_id, [background(command, "b1")])["b1"]
    shell_id = SHELL_ID.search(result["output"]).group(1)
    wait_until(lambda: "tick10" in shells(api, ws_id)[0]["tail"], 30, "the shell printing")
    services.kill("worker")
    services.start_worker()
    wait_until(lambda: shells(api, ws_id)[0]["status"] == "lost", 60, "the shell reported lost")
    (lost,) = shells(api, ws_id)
    assert "worker stopped" in lost["note"] and "tick10" in lost["tail"]
    size = (workdir / "ticks").stat().st_size
    time.sleep(1)
    assert (workdir / "ticks").stat().st_size == size  # stopped with its worker: nothing more ran
    read = run_turn(api, model, sock, ws_id, [ToolCall("bash_output", {"shell_id": shell_id}, id="o1")])["o1"]
    assert read["output"].startswith(f"[shell {shell_id}: lost: its worker stopped")
    assert "tick1\n" in read["output"] and "tick10\n" in read["output"]
