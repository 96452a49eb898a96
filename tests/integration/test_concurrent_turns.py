"""Many workstreams sending several turns at once, every process writing the one database: each
turn is answered, in the order it was sent, and none is lost or answered twice."""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.integration

WORKSTREAMS = 10
TURNS = 3


def test_turns_sent_at_once_on_many_workstreams_are_each_answered_in_order(api, model, open_socket, workdir):
    ids = [api.create_workstream(name=f"at-once-{i}", working_dir=str(workdir)) for i in range(WORKSTREAMS)]
    sockets = [open_socket(ws_id) for ws_id in ids]
    sent: dict[str, list[str]] = {ws_id: [] for ws_id in ids}
    go = threading.Barrier(WORKSTREAMS)

    def send_all(ws_id: str) -> None:
        go.wait()
        for n in range(TURNS):
            sent[ws_id].append(api.send(ws_id, f"{ws_id} message {n}"))

    senders = [threading.Thread(target=send_all, args=(ws_id,)) for ws_id in ids]
    for t in senders:
        t.start()
    for t in senders:
        t.join(timeout=60)
    for ws_id, sock in zip(ids, sockets, strict=True):
        for turn_id in sent[ws_id]:
            assert sock.wait_turn_end(turn_id, timeout=120)["state"] == "idle"
        started = [e["turn_id"] for e in sock.of_type("state_change") if e["state"] == "thinking"]
        assert started == sent[ws_id]  # each started once, in the order sent
        messages = [(m["role"], m["content"]) for m in api.history(ws_id)]
        assert messages == [
            pair
            for n in range(TURNS)
            for pair in (("user", f"{ws_id} message {n}"), ("assistant", f"ok: {ws_id} message {n}"))
        ]
