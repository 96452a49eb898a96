"""The Python client against small real servers (HTTP and websocket, in threads): error answers
become typed exceptions, the event stream reconnects after its last id and drops repeats, and a
turn's events add up to its answer and results."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import websockets.asyncio.client
import websockets.sync.client
from websockets.sync.server import ServerConnection, serve

from tests.apart import run_apart
from turnstone_jobs import (
    ApiError,
    AsyncClient,
    AuthError,
    Client,
    ClientError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    ServerError,
)
from turnstone_jobs.chat import _pump
from turnstone_jobs.protocol import TurnTracker
from turnstone_jobs.render import _complete_blocks
from turnstone_jobs.results import Event

ANSWERS: dict[str, tuple[int, str]] = {
    "/v1/api/workstreams": (401, '{"error": "no valid token"}'),
    "/v1/api/workstreams/gone": (404, '{"error": "no workstream gone"}'),
    "/v1/api/workstreams/busy/approve": (409, '{"error": "call c1 is not pending", "pending": ["c2"]}'),
    "/v1/api/workstreams/bad/send": (400, '{"error": "message: required", "field": "message"}'),
    "/v1/api/workstreams/teapot": (418, '{"error": "short and stout"}'),
    "/v1/api/workstreams/broken": (502, "<html>bad gateway</html>"),
    "/v1/api/workstreams/notjson": (200, "surprise"),
}


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.bodies.append(self.rfile.read(length))  # type: ignore[attr-defined]
        status, body = ANSWERS[self.path]
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def http_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.bodies = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.fixture
def client(http_server: ThreadingHTTPServer) -> Iterator[Client]:
    with Client(f"http://127.0.0.1:{http_server.server_address[1]}", "tok") as c:
        yield c


def test_each_error_answer_is_its_own_exception_with_the_services_words(client: Client) -> None:
    with pytest.raises(AuthError, match="no valid token"):
        client.workstreams()
    with pytest.raises(NotFoundError, match="no workstream gone") as nf:
        client.workstream("gone")
    assert nf.value.status == 404
    with pytest.raises(ConflictError) as conflict:
        client.approve("busy", "c1")
    assert conflict.value.body["pending"] == ["c2"]
    with pytest.raises(InvalidRequestError) as bad:
        client.send("bad", "x")
    assert bad.value.field == "message"
    with pytest.raises(ApiError) as other:
        client.workstream("teapot")
    assert type(other.value) is ApiError and other.value.message == "short and stout"
    with pytest.raises(ServerError, match="HTTP 502: <html>bad gateway"):
        client.workstream("broken")
    with pytest.raises(ServerError, match="not JSON"):
        client.workstream("notjson")
    assert all(issubclass(e, ClientError) for e in (AuthError, ServerError, ConflictError))


def test_a_lone_surrogate_travels_escaped_for_the_service_to_refuse(client: Client, http_server: Any) -> None:
    with pytest.raises(InvalidRequestError):
        client.send("bad", "\ud800")
    assert http_server.bodies[-1] == b'{"message": "\\ud800"}'


class _SocketServer:
    """A websocket server on a free port of loopback, serving each connection with `_serve`."""

    def __init__(self) -> None:
        self.server = serve(self._serve, "127.0.0.1", 0)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.socket.getsockname()[1]}"

    def _serve(self, conn: ServerConnection) -> None:
        raise NotImplementedError


class _FlakySocketServer(_SocketServer):
    """Serves ids 1..`last` after the client's `after`, dropping the first connection after
    three events and repeating one event on the second, as a careless relay might."""

    def __init__(self, last: int = 8) -> None:
        self.last = last
        self.afters: list[int] = []
        super().__init__()

    def _serve(self, conn: ServerConnection) -> None:
        assert conn.request is not None
        query = parse_qs(urlparse(conn.request.path).query)
        after = int(query.get("after", ["0"])[0])
        self.afters.append(after)
        if conn.request.headers.get("Authorization") != "Bearer tok":
            conn.send(json.dumps({"type": "error", "status": 401, "message": "no valid token"}))
            return
        first = len(self.afters) == 1
        start = after if first else after - 1  # the second connection repeats one event
        for n in range(start + 1, self.last + 1):
            conn.send(json.dumps({"type": "content", "id": n, "turn_id": "t", "step": 0, "text": f"{n} "}))
            if first and n == 3:
                return  # the socket drops
        conn.wait_closed()


def test_the_event_stream_reconnects_after_its_last_id_and_drops_repeats() -> None:
    flaky = _FlakySocketServer()
    with Client(flaky.url, "tok") as client, client.events("ws1") as stream:
        ids = [stream.next(timeout=10).id for _ in range(8)]
        assert ids == list(range(1, 9))
        assert flaky.afters == [0, 3] and stream.reconnects == 1
    flaky.server.shutdown()


def test_a_refused_socket_raises_instead_of_reconnecting() -> None:
    flaky = _FlakySocketServer()
    with Client(flaky.url, "wrong") as client, pytest.raises(AuthError, match="no valid token"):
        next(iter(client.events("ws1")))
    assert flaky.afters == [0]
    flaky.server.shutdown()


class _CappedSocketServer(_SocketServer):
    """Refuses its first `refusals` sockets as the service does at a cap on open sockets (an
    `error` with status 429, then close code 1013), then serves ids 1..3; notes when each came."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.arrivals: list[float] = []
        super().__init__()

    def _serve(self, conn: ServerConnection) -> None:
        self.arrivals.append(time.monotonic())
        if len(self.arrivals) <= self.refusals:
            conn.send(json.dumps({"type": "error", "status": 429, "message": "too many open sockets"}))
            conn.close(1013, "too many open sockets")
            return
        for n in range(1, 4):
            conn.send(json.dumps({"type": "content", "id": n, "turn_id": "t", "step": 0, "text": f"{n} "}))
        conn.wait_closed()


def test_a_socket_refused_at_a_cap_is_tried_again_later_not_at_once() -> None:
    capped = _CappedSocketServer(refusals=1)
    with Client(capped.url, "tok") as client, client.events("ws1") as stream:
        assert [stream.next(timeout=10).id for _ in range(3)] == [1, 2, 3]
    [first, second] = capped.arrivals
    assert second - first >= 0.9  # the first of the busy pauses, not the reconnect's 0.1 s
    capped.server.shutdown()


def test_the_async_event_stream_also_waits_after_a_refusal_at_a_cap() -> None:
    capped = _CappedSocketServer(refusals=1)

    async def follow() -> list[int]:
        async with AsyncClient(capped.url, "tok") as client, client.events("ws1") as stream:
            return [(await stream.next(timeout=10)).id for _ in range(3)]

    assert run_apart(follow()) == [1, 2, 3]
    [first, second] = capped.arrivals
    assert second - first >= 0.9
    capped.server.shutdown()


class _DyingFront:
    """A listener that closes its first `drops` connections as soon as it accepts them, as a
    web process does when it dies between accepting a socket and answering its handshake;
    later connections are forwarded to `target_port`."""

    def __init__(self, target_port: int, drops: int) -> None:
        self.target_port = target_port
        self.drops = drops
        self.listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            conn, _ = self.listener.accept()
            if self.drops > 0:
                self.drops -= 1
                conn.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=_copy, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=_copy, args=(upstream, conn), daemon=True).start()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:  # shutdown, not close: it also wakes the other direction's blocked recv
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def slow_handshakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients' handshakes start late, as on a busy machine, so that a socket closed
    right after accept is already seen as closed when the request goes out (websockets then
    raises ConnectionClosedError, not InvalidHandshake: one connect in eight without this)."""
    sync_handshake = websockets.sync.client.ClientConnection.handshake
    async_handshake = websockets.asyncio.client.ClientConnection.handshake

    def late(self: Any, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.05)
        sync_handshake(self, *args, **kwargs)

    async def late_async(self: Any, *args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(0.05)
        await async_handshake(self, *args, **kwargs)

    monkeypatch.setattr(websockets.sync.client.ClientConnection, "handshake", late)
    monkeypatch.setattr(websockets.asyncio.client.ClientConnection, "handshake", late_async)


@pytest.mark.usefixtures("slow_handshakes")
def test_sockets_closed_before_their_handshake_are_retried_by_the_event_stream() -> None:
    flaky = _FlakySocketServer()
    front = _DyingFront(flaky.server.socket.getsockname()[1], drops=2)
    with Client(front.url, "tok", reconnect_timeout=30) as client, client.events("ws1") as stream:
        ids = [stream.next(timeout=30).id for _ in range(8)]
    assert ids == list(range(1, 9)) and front.drops == 0
    flaky.server.shutdown()


@pytest.mark.usefixtures("slow_handshakes")
def test_sockets_closed_before_their_handshake_are_retried_by_the_async_event_stream() -> None:
    flaky = _FlakySocketServer()
    front = _DyingFront(flaky.server.socket.getsockname()[1], drops=2)

    async def follow() -> list[int]:
        async with (
            AsyncClient(front.url, "tok", reconnect_timeout=30) as client,
            client.events("ws1") as stream,
        ):
            return [(await stream.next(timeout=30)).id for _ in range(8)]

    assert run_apart(follow()) == list(range(1, 9)) and front.drops == 0
    flaky.server.shutdown()


def test_an_event_larger_than_a_mebibyte_arrives_whole() -> None:
    output = "x" * (3 * 1024 * 1024)

    def one_big_event(conn: ServerConnection) -> None:
        conn.send(json.dumps({"type": "tool_result", "id": 1, "turn_id": "t", "output": output}))
        conn.wait_closed()

    server = serve(one_big_event, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.socket.getsockname()[1]}"
    with Client(url, "tok") as client, client.events("ws1") as stream:
        assert stream.next(timeout=10).get("output") == output
    server.shutdown()


def _event(type_: str, id_: int, **data: Any) -> Event:
    return Event.from_json({"type": type_, "id": id_, "turn_id": data.pop("turn_id", "t"), **data})


def test_a_turn_adds_up_to_its_last_steps_text_its_results_and_each_ask_once() -> None:
    tracker = TurnTracker("t")
    item = {"call_id": "c1", "func_name": "bash", "header": "$ ls", "needs_approval": True}
    assert tracker.feed(_event("content", 1, step=0, text="Let me look.")) == []
    asks = tracker.feed(_event("approve_request", 2, step=0, items=[item]))
    assert [a.call_id for a in asks] == ["c1"]
    assert tracker.feed(_event("approve_request", 3, step=0, items=[item])) == []  # asked already
    tracker.feed(_event("tool_result", 4, call_id="c1", name="bash", output="a.txt", is_error=False))
    tracker.feed(_event("content", 5, step=1, text="Half"))
    tracker.feed(_event("stream_end", 6, step=1, discard=True))  # generated again
    tracker.feed(_event("content", 7, step=1, text="One file."))
    tracker.feed(_event("content", 8, step=0, text="ignored", turn_id="other"))
    assert not tracker.done
    tracker.feed(_event("state_change", 9, state="idle"))
    result = tracker.result()
    assert (result.ok, result.answer) == (True, "One file.")
    assert [r.output for r in result.tool_results] == ["a.txt"]


def test_a_turn_withdrawn_from_the_queue_ends_with_its_cancelled_event() -> None:
    running = TurnTracker("t")
    running.feed(_event("cancelled", 1))  # a running turn: its state_change ends it
    assert not running.done
    running.feed(_event("state_change", 2, state="idle"))
    assert running.done and running.result().state == "cancelled"
    withdrawn = TurnTracker("t")
    withdrawn.feed(_event("cancelled", 3, queued=True))  # never started: nothing else follows
    assert withdrawn.done
    assert (withdrawn.result().state, withdrawn.result().answer) == ("cancelled", "")


@pytest.mark.parametrize(
    ("text", "ready", "rest"),
    [
        ("one line", "", "one line"),
        ("para one\n\npara two", "para one\n\n", "para two"),
        ("```\ncode\n\nmore\n", "", "```\ncode\n\nmore\n"),  # a blank line inside a fence does not cut
        ("```\ncode\n```\n\nafter", "```\ncode\n```\n\n", "after"),
    ],
)
def test_answers_are_shown_by_complete_blocks(text: str, ready: str, rest: str) -> None:
    assert _complete_blocks(text) == (ready, rest)


def test_the_sync_and_async_clients_offer_the_same_calls() -> None:
    import inspect

    import turnstone_jobs
    from turnstone_jobs import AsyncClient

    def calls(cls: type) -> set[str]:
        return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}

    assert calls(Client) - {"close"} == calls(AsyncClient) - {"aclose"}
    assert all(hasattr(turnstone_jobs, name) for name in turnstone_jobs.__all__)


class _BrokenStream:
    closed = False

    def __iter__(self) -> Iterator[Event]:
        yield _event("content", 1, text="first")
        raise RuntimeError("the socket library failed in a way nobody foresaw")


def test_the_chat_reader_hands_on_any_failure_instead_of_dying_quietly() -> None:
    out: queue.Queue[Event | BaseException | str] = queue.Queue()
    _pump(_BrokenStream(), out)  # type: ignore[arg-type]
    assert out.get_nowait().get("text") == "first"
    failure = out.get_nowait()
    assert isinstance(failure, RuntimeError) and "nobody foresaw" in str(failure)


def test_async_runs_mirror_the_runs_of_the_synchronous_client():
    """AsyncClient.runs has every call of Client.runs, with the same parameters, awaited."""
    import inspect

    from turnstone_jobs.runs import AsyncRun, AsyncRuns, Run, Runs

    for sync_class, async_class in ((Runs, AsyncRuns), (Run, AsyncRun)):
        public = [n for n, v in vars(sync_class).items() if not n.startswith("_") and callable(v)]
        assert public
        for name in public:
            mirrored = getattr(async_class, name)
            assert inspect.iscoroutinefunction(mirrored), (async_class.__name__, name)
            assert list(inspect.signature(mirrored).parameters) == list(
                inspect.signature(getattr(sync_class, name)).parameters
            ), name
