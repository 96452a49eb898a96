"""`[models.NAME] max_concurrent` through the running service (docs/providers.md#concurrency-limits):
a model that takes one request at a time gets the second step's request only once the first
step's answer ended, the waiting step says so, and a cancel ends the wait without asking the
model; other models are not held."""

from __future__ import annotations

import pytest

from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration


def requests_saying(model, text: str) -> list:
    return [r for r in model.history if text in str(r.body.get("messages"))]


def test_one_request_at_a_time_the_next_step_waits_for_the_slot(api, model, open_socket, workdir):
    first = api.create_workstream(working_dir=str(workdir), model="single")
    second = api.create_workstream(working_dir=str(workdir), model="single")
    elsewhere = api.create_workstream(working_dir=str(workdir))  # the default model: no limit
    sock1, sock2, sock3 = open_socket(first), open_socket(second), open_socket(elsewhere)
    model.enqueue(Reply(chunks=["one ", "slow ", "answer ", "here"], chunk_delay=0.5), match="the first one")
    model.enqueue(Reply(text="the second answer"), match="the second one")
    model.enqueue(Reply(text="not held"), match="another model")
    turn1 = api.send(first, "the first one")
    assert model.wait_for_requests(1, timeout=30)
    turn2 = api.send(second, "the second one")
    waiting = sock2.wait_type("model_waiting")
    assert waiting["model"] == "single" and waiting["limit"] == 1 and waiting["step"] == 0
    turn3 = api.send(elsewhere, "another model")
    assert sock3.wait_turn_end(turn3)["state"] == "idle"  # while `single` is busy
    assert sock1.wait_turn_end(turn1)["state"] == "idle"
    assert sock2.wait_turn_end(turn2)["state"] == "idle"
    (asked1,) = requests_saying(model, "the first one")
    (asked2,) = requests_saying(model, "the second one")
    (asked3,) = requests_saying(model, "another model")
    assert asked2.time - asked1.time >= 1.4  # after the first answer's ~2 s stream
    assert asked3.time < asked2.time
    assert sock1.of_type("model_waiting") == [] and sock3.of_type("model_waiting") == []
    assert [m["content"] for m in api.history(second) if m["role"] == "assistant"] == ["the second answer"]


def test_a_cancel_ends_the_wait_and_the_model_is_not_asked(api, model, open_socket, workdir):
    busy = api.create_workstream(working_dir=str(workdir), model="single")
    waiting = api.create_workstream(working_dir=str(workdir), model="single")
    busy_sock, sock = open_socket(busy), open_socket(waiting)
    model.enqueue(Reply(chunks=["a ", "long ", "one"], chunk_delay=1.0), match="hold the slot")
    holder = api.send(busy, "hold the slot")
    assert model.wait_for_requests(1, timeout=30)
    turn_id = api.send(waiting, "never sent")
    sock.wait_type("model_waiting")
    assert api.cancel(waiting).status_code in (200, 202)
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert busy_sock.wait_turn_end(holder)["state"] == "idle"
    assert requests_saying(model, "never sent") == []
    assert [m["content"] for m in api.history(waiting) if m["role"] == "assistant"] in (
        [],
        [""],
    )  # nothing said
