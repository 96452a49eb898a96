"""A big bash output as a websocket client sees it: whole, in order, in a bounded number of events."""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration

LINES = 100_000
# 100 writes of 1,000 lines, 10 ms apart: about a second of output, in many reads of the pipe.
PACED = "for i in $(seq 0 99); do seq $((i * 1000 + 1)) $((i * 1000 + 1000)); sleep 0.01; done"
EXPECTED = "".join(f"{n}\n" for n in range(1, LINES + 1))


def test_a_100000_line_output_reaches_live_and_late_clients_whole_at_most_40_events_a_second(
    api, model, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": PACED})]))
    model.enqueue(Reply(text="counted"))
    turn_id = api.send(ws_id, "count to a hundred thousand")
    sock.wait_turn_end(turn_id, timeout=120)
    result = sock.wait_type("tool_result")
    chunks = [e for e in sock.of_type("tool_output_chunk") if e["call_id"] == result["call_id"]]
    assert "".join(c["text"] for c in chunks) == EXPECTED
    # One event per 25 ms at most (by the events' own publish times), and one more from the
    # flush that closes the call: per 4 KiB, this output was more than 500 events.
    span = chunks[-1]["ts"] - chunks[0]["ts"]
    assert len(chunks) <= span * 40 + 3, (len(chunks), span)
    assert sock.events.index(chunks[-1]) < sock.events.index(result)
    assert result["output"].startswith("1\n2\n3\n") and result["output"].endswith("\n100000")

    late = open_socket(ws_id, after=0)  # a client that connects once it is all over
    late.wait_turn_end(turn_id)
    replayed = [e for e in late.of_type("tool_output_chunk") if e["call_id"] == result["call_id"]]
    assert "".join(c["text"] for c in replayed) == EXPECTED
    assert not late.of_type("replay_truncated")
