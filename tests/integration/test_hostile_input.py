"""Hostile values for every input a person can send, over HTTP and the websocket: always a 4xx
with a JSON error, never a 5xx, never a lost turn, and the websocket stays open."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
import pytest
import websocket

from tests.fakes.model_server import Reply
from tests.integration.hostile import PATH_IDS, RAW_BODIES
from tests.integration.services import API_TOKEN

pytestmark = pytest.mark.integration

MAX_MESSAGE_BYTES = 256 * 1024
MAX_FRAME = MAX_MESSAGE_BYTES * 6 + 4096  # the body cap, which the websocket shares

# Each command with a body that is valid apart from the field a case replaces.
BASE = {
    "create": {},
    "send": {"message": "hello"},
    "approve": {"approved": True},
    "cancel": {},
}
TEXT_FIELDS = [
    ("create", "name"),
    ("create", "model"),
    ("create", "working_dir"),
    ("send", "message"),
    ("approve", "feedback"),
    ("approve", "call_id"),
    ("cancel", "turn_id"),
]
BOOL_FIELDS = [("create", "auto_approve"), ("approve", "approved"), ("approve", "always")]
NOT_TEXT = {"integer": 1, "huge integer": 2**80, "number": 1.5, "boolean": True, "array": [], "object": {}}
NOT_TEXT_OR_BOOL = {"string": "yes", "NUL string": "\u0000", "integer": 1, "array": [1], "object": {"a": 1}}
BAD_TEXT = {"NUL": "a\u0000b", "lone surrogate": "a\ud800b", "lone low surrogate": "\udc00"}
TOO_LONG = [
    ("create", "name", "n" * 201, 400),
    ("create", "model", "m" * 10_000, 400),
    ("create", "working_dir", "/" + "d" * 10_000, 400),
    ("approve", "call_id", "c" * 10_000, 400),
    ("cancel", "turn_id", "t" * 10_000, 400),
    ("send", "message", "m" * (MAX_MESSAGE_BYTES + 1), 413),
    ("send", "message", "\u00e9" * (MAX_MESSAGE_BYTES // 2 + 1), 413),  # bytes, not characters
]


def _cases() -> list[Any]:
    cases = []
    for command, name in TEXT_FIELDS:
        for label, value in {**NOT_TEXT, **BAD_TEXT}.items():
            cases.append(pytest.param(command, {name: value}, 400, id=f"{command}-{name}-{label}"))
    for command, name in BOOL_FIELDS:
        for label, value in NOT_TEXT_OR_BOOL.items():
            cases.append(pytest.param(command, {name: value}, 400, id=f"{command}-{name}-{label}"))
    for command, name, value, status in TOO_LONG:
        cases.append(pytest.param(command, {name: value}, status, id=f"{command}-{name}-{len(value)}"))
    for command in ("send", "approve"):  # the required fields, missing or null
        for name in BASE[command]:
            cases.append(pytest.param(command, {name: None}, 400, id=f"{command}-{name}-null"))
    cases.append(pytest.param("send", {"message": " \r\n\t"}, 400, id="send-message-blank"))
    return cases


CASES = _cases()


def _url(command: str, ws_id: str) -> str:
    return "/v1/api/workstreams" if command == "create" else f"/v1/api/workstreams/{ws_id}/{command}"


def _assert_json_4xx(r: httpx.Response, status: int | None = None) -> dict[str, Any]:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    if status is not None:
        assert r.status_code == status, r.text[:300]
    assert r.headers["Content-Type"].startswith("application/json")
    body = r.json()
    assert isinstance(body["error"], str) and body["error"]
    return dict(body)


@pytest.fixture
def ws_id(api, workdir) -> str:
    return str(api.create_workstream(working_dir=str(workdir)))


@pytest.mark.parametrize(("command", "fields", "status"), CASES)
def test_a_hostile_field_over_http_is_a_json_4xx_and_stores_nothing(api, ws_id, command, fields, status):
    before = len(api.http.get("/v1/api/workstreams").json()["workstreams"])
    r = api.http.post(
        _url(command, ws_id),
        content=json.dumps({**BASE[command], **fields}),  # ensure_ascii: surrogates as \ud800
        headers={"Content-Type": "application/json"},
    )
    body = _assert_json_4xx(r, status)
    if status == 400:
        assert body.get("field") == next(iter(fields))
    assert api.history(ws_id) == []
    assert len(api.http.get("/v1/api/workstreams").json()["workstreams"]) == before


@pytest.mark.parametrize("raw", RAW_BODIES.values(), ids=RAW_BODIES.keys())
@pytest.mark.parametrize("command", BASE.keys())
def test_a_body_that_is_not_a_json_object_is_a_json_400(api, ws_id, command, raw):
    for content_type in ("application/json", "application/x-www-form-urlencoded", "text/plain"):
        r = api.http.post(_url(command, ws_id), content=raw, headers={"Content-Type": content_type})
        assert _assert_json_4xx(r, 400)["field"] == "body"
    assert api.history(ws_id) == []


@pytest.mark.parametrize("bad_id", PATH_IDS.values(), ids=PATH_IDS.keys())
def test_a_hostile_workstream_id_in_the_path_is_a_json_404(services, api, bad_id):
    for method, suffix, body in (
        ("GET", "", None),
        ("GET", "/history", None),
        ("POST", "/send", {"message": "x"}),
        ("POST", "/cancel", {}),
    ):
        # A raw path: httpx would re-encode the percent signs.
        url = httpx.URL(services.base_url + f"/v1/api/workstreams/{bad_id}{suffix}")
        _assert_json_4xx(api.http.request(method, url, json=body), 404)
    sock = _open(services, bad_id)
    try:
        error = json.loads(sock.recv())
        assert error["type"] == "error" and error["status"] == 404
    finally:
        sock.close()


@pytest.mark.parametrize("after", ["abc", "-1", "1e400", "9" * 40, "%00", "1.5"])
def test_a_hostile_cursor_on_the_websocket_is_an_error_event(services, ws_id, after):
    sock = _open(services, ws_id, f"&after={after}")
    try:
        error = json.loads(sock.recv())
        assert error["type"] == "error" and error["status"] == 400 and "after" in error["message"]
    finally:
        sock.close()


def test_hostile_frames_get_4xx_replies_the_socket_stays_open_and_no_turn_is_lost(
    services, api, model, ws_id
):
    sock = _open(services, ws_id)
    try:
        frames: list[tuple[str | bytes, int]] = []
        for case in CASES:
            command, fields, status = case.values
            if command != "create":
                frames.append((json.dumps({"type": command, **BASE[command], **fields}), status))
        for raw in RAW_BODIES.values():
            frames.append((raw, 400))  # binary frames: bytes that may not be UTF-8
            with contextlib.suppress(UnicodeDecodeError):
                frames.append((raw.decode("utf-8"), 400))  # and as text where they can be
        for kind in ("nope", None, 1, ["send"], "\u0000", "\ud800"):
            frames.append((json.dumps({"type": kind, "message": "x"}), 400))
        for request_id in (2**80, [1], {"a": 1}, "r" * 201, "\u0000", 1.5):
            frames.append((json.dumps({"type": "send", "message": "", "request_id": request_id}), 400))
        frames.append(("", 400))
        for frame, status in frames:
            if isinstance(frame, bytes):
                sock.send_binary(frame)
            else:
                sock.send(frame)
            reply = _next_reply(sock)
            assert reply["status"] == status, (str(frame)[:120], reply)
            assert isinstance(reply["body"]["error"], str)
        # Still open, and the workstream still works: the one valid message is the only one stored.
        model.enqueue(Reply(text="still here"), match="after the storm")
        sock.send(json.dumps({"type": "send", "message": "after the storm", "request_id": "last"}))
        reply = _next_reply(sock)
        assert reply["status"] == 202 and reply["request_id"] == "last"
        api.wait_idle(ws_id)
        assert [m["content"] for m in api.history(ws_id)] == ["after the storm", "still here"]
    finally:
        sock.close()


def test_a_frame_past_the_cap_closes_that_socket_with_1009_and_nothing_else(services, api, ws_id):
    sock = _open(services, ws_id)
    sock.send(json.dumps({"type": "send", "message": "x" * MAX_FRAME}))
    while True:  # events may come first; then the close frame
        opcode, data = sock.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            break
    assert int.from_bytes(data[:2], "big") == 1009
    sock.close()
    assert api.history(ws_id) == []
    other = _open(services, ws_id)  # the server is alive and serves the workstream
    try:
        other.send(json.dumps({"type": "cancel", "request_id": 7}))
        reply = _next_reply(other)  # nothing is running: a 409, as over HTTP
        assert reply["request_id"] == 7 and reply["status"] == 409
    finally:
        other.close()


def _open(services, ws_id: str, query: str = "") -> websocket.WebSocket:
    url = services.base_url.replace("http://", "ws://") + f"/v1/ws/workstreams/{ws_id}?token={API_TOKEN}"
    return websocket.create_connection(url + query, timeout=30)


def _next_reply(sock: websocket.WebSocket) -> dict[str, Any]:
    while True:
        message = json.loads(sock.recv())
        if message.get("type") == "reply":
            return dict(message)
