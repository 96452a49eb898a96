"""A fake model server speaking the OpenAI chat completions and Anthropic Messages
wire formats over real HTTP (SSE streams included), scripted with `enqueue()`.

HTTP/1.1 with keep-alive, as the model servers it stands for answer: a stream is sent chunked
and its connection serves the next request, so a client's connection pool is used as it is in
production (and a request's arrival is not a TCP connect and a new server thread later).

Run `python -m tests.fakes.model_server --port N` to serve default replies forever.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "cookie"})
FAKE_MODEL_ID = "fake-model"
WINDOWED_MODEL_ID = "fake-windowed"  # listed by /models with its window while `context` is set
ARGUMENT_PIECES = 3  # tool-call arguments are streamed in this many pieces
STREAM_BREAK = "<break>"  # where a frame generator wants the stream broken (never sent)
BREAK_KINDS = ("close", "malformed", "error_event")
# What each wire says when the conversation does not fit (the real servers' phrasing).
CONTEXT_WINDOW_MESSAGES = {
    "openai": (
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9000 tokens. Please reduce the length of the messages."
    ),
    "anthropic": "prompt is too long: 210000 tokens > 200000 maximum",
}
# What a server that does not know `stream_options` answers (Azure OpenAI's phrasing).
STREAM_OPTIONS_REFUSAL = "Unrecognized request argument supplied: stream_options"
ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class ToolCall:
    """A tool call the fake model makes; a `str` argument is sent as is, unchecked."""

    name: str
    arguments: dict | str = field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class ServerToolSearch:
    """Anthropic's server-side tool search, as the fake runs it: the query it searched
    and the deferred tools it found (their references come back in the reply)."""

    query: str
    found: list[str] = field(default_factory=list)
    id: str | None = None


@dataclass(frozen=True)
class WebSearch:
    """The provider's own web search, as the fake runs it: what it searched, the pages it
    found (title, url), and the answer's parts after the search, each citing the page at
    that index (None: not cited). On the Anthropic wire: a server_tool_use block, a
    web_search_tool_result block, then one text block per part with its citation; on the
    OpenAI wire: the parts as text, and a last delta of url_citation annotations."""

    query: str
    pages: list[tuple[str, str]] = field(default_factory=list)
    parts: list[tuple[str, int | None]] = field(default_factory=list)
    id: str | None = None

    def text(self) -> str:
        return "".join(text for text, _page in self.parts)


@dataclass(frozen=True)
class Reply:
    """One scripted answer: text (in `chunks` if given), reasoning, tool calls, or an error.

    `break_after=N`: the stream breaks after N text deltas, as `break_how` says:
    "close" (the connection closes), "malformed" (a broken SSE line, then close)
    or "error_event" (the wire's own error event, then close). `error_code` and
    `error_type` replace the error body's `code`/`type`; `context_window_exceeded`
    answers 400 with the wire's own "conversation too long" error.
    `input_tokens`/`output_tokens` replace the usage counted from the request and
    reply; `cached_tokens` are reported as read from the prompt cache, besides them.
    `raw_event`: JSON text sent as one more event's data, after the stream's first event
    (what a broken or hostile server might send); on the Anthropic wire, under the event
    name its `type` gives (else content_block_delta).
    `hold_open`: seconds the stream's body stays open after its last event, before it ends
    (a server slow or unwilling to end its reply).
    """

    text: str = ""
    chunks: list[str] | None = None
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    chunk_delay: float = 0.0
    status: int | None = None
    error_message: str = ""
    error_code: str | None = None
    error_type: str | None = None
    context_window_exceeded: bool = False
    retry_after: float | None = None
    hang_seconds: float = 0.0
    break_after: int | None = None
    break_how: str = "close"
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int = 0
    tool_search: ServerToolSearch | None = None  # Anthropic wire only: its blocks come first
    web_search: WebSearch | None = None  # after `text`, before any tool call
    raw_event: str | None = None
    hold_open: float = 0.0

    def __post_init__(self) -> None:
        if self.break_how not in BREAK_KINDS:
            raise ValueError(f"break_how must be one of {BREAK_KINDS}")

    def text_pieces(self) -> list[str]:
        return list(self.chunks) if self.chunks is not None else _words(self.text)

    def sent_pieces(self) -> list[str]:
        """The text deltas that go out before the stream breaks (all, if it does not)."""
        return self.text_pieces()[: self.break_after]

    @property
    def is_error(self) -> bool:
        return self.status is not None or self.context_window_exceeded

    def full_text(self) -> str:
        return "".join(self.text_pieces())


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    body: Any
    headers: dict[str, str]  # names lower-cased, secrets removed
    time: float  # when the request arrived (its headers read, before its body was)
    peer: tuple[str, int] | None = None  # the client's end of the connection it came on


# How app/titles.py's side request begins (its system prompt): such a request is answered
# from the title script (`enqueue_title`) and recorded in `title_requests`, never in `history`,
# so a title asked after a turn takes no reply scripted for the turns and counts in no test's
# requests.
TITLE_REQUEST_MARKER = "You name conversations."
DEFAULT_TITLE = "Fake title"


@dataclass
class _Scripted:
    reply: Reply
    match: str | None


class FakeModelServer:
    """Real HTTP on 127.0.0.1 in a daemon thread; the test scripts it in-process."""

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._connections: set[socket.socket] = set()  # open ones: stop() closes them
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._changed = threading.Condition()
        self._queue: list[_Scripted] = []
        self.history: list[RecordedRequest] = []
        self.title_requests: list[RecordedRequest] = []  # app/titles.py's (TITLE_REQUEST_MARKER)
        self._titles: list[_Scripted] = []
        self.listings: list[str] = []  # GET paths (/models): what lists, not what asks the model
        self.listing_status: int | None = None  # set: GET /models answers this status
        # True: answer 400 to any OpenAI request that carries `stream_options`.
        self.refuses_stream_options = False
        # Seconds every unscripted answer waits before it starts (a model's latency, for benchmarks).
        self.default_delay = 0.0
        # The model's context window in tokens (`request_tokens`); a request past it is answered
        # with the wire's own "too long" error, whatever was scripted (None: no limit).
        self.context: int | None = None
        self.overflowed = 0  # requests refused so
        # Each chat request's (characters shared with the start of the request before it, its
        # length), measured on its tools, system prompt and messages as sent: what a prompt
        # cache could have served (bench/prompt_cache.py).
        self.prefixes: list[tuple[int, int]] = []
        self._last_prefix_text = ""
        # True: replies report the shared prefix as read from the prompt cache (OpenAI: always;
        # Anthropic: up to its request's last cache_control mark), the rest as written to it.
        self.prompt_cache = False

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> FakeModelServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", self._port), _Handler)
        httpd.daemon_threads = True
        httpd.fake = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers that hang or sleep between chunks
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        # A kept-alive connection would otherwise go on serving this server's script after it
        # stopped (to a client that pooled it), even once another server took its port.
        with self._changed:
            connections, self._connections = set(self._connections), set()
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start() the server first"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"  # the openai SDK appends /chat/completions

    @property
    def anthropic_base_url(self) -> str:
        return self.url  # the anthropic SDK appends /v1/messages

    # -- script ------------------------------------------------------------------

    def enqueue(self, reply: Reply, match: str | None = None) -> None:
        """Serve `reply` next (FIFO); with `match`, only to a request whose messages contain it."""
        with self._changed:
            self._queue.append(_Scripted(reply, match))

    def enqueue_title(self, reply: Reply, match: str | None = None) -> None:
        """Answer the next title request with `reply` (with `match`, one whose messages contain
        it); unscripted, a title request is answered DEFAULT_TITLE."""
        with self._changed:
            self._titles.append(_Scripted(reply, match))

    def wait_for_titles(self, n: int, timeout: float = 5.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self.title_requests) >= n, timeout)

    def reset(self) -> None:
        with self._changed:
            self._queue.clear()
            self._titles.clear()
            self.title_requests.clear()
            self.history.clear()
            self.refuses_stream_options = False
            self.default_delay = 0.0
            self.context = None
            self.overflowed = 0
            self.prefixes.clear()
            self._last_prefix_text = ""
            self.prompt_cache = False
            self.listing_status = None

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: len(self.history) >= n, timeout)

    def _record(
        self,
        path: str,
        body: Any,
        headers: dict[str, str],
        arrived: float,
        peer: tuple[str, int],
        titling: bool = False,
    ) -> None:
        kept = {k.lower(): v for k, v in headers.items() if k.lower() not in SECRET_HEADERS}
        with self._changed:
            (self.title_requests if titling else self.history).append(
                RecordedRequest(path, body, kept, arrived, peer)
            )
            self._changed.notify_all()

    def _next_reply(self, body: dict, titling: bool = False) -> Reply:
        conversation = json.dumps(
            {"system": body.get("system"), "messages": body.get("messages")}, ensure_ascii=False
        )
        with self._changed:
            if titling:
                return self._next_title(conversation)
            for scripted in self._queue:
                if scripted.match is None or scripted.match in conversation:
                    self._queue.remove(scripted)
                    return scripted.reply
        return Reply(
            text=f"ok: {_last_user_text(body.get('messages') or [])}", hang_seconds=self.default_delay
        )

    def _next_title(self, conversation: str) -> Reply:
        for scripted in self._titles:
            if scripted.match is None or scripted.match in conversation:
                self._titles.remove(scripted)
                return scripted.reply
        return Reply(text=DEFAULT_TITLE)

    def _measure_prefix(self, body: dict) -> int:
        """Characters of this request (`request_text`) shared with the start of the one before."""
        text = request_text(body)
        with self._changed:
            before, self._last_prefix_text = self._last_prefix_text, text
            shared = len(os.path.commonprefix([before, text]))
            self.prefixes.append((shared, len(text)))
        return shared

    def prefix_share(self) -> float:
        """Of every character sent, the share that started as the request before it did."""
        total = sum(length for _shared, length in self.prefixes)
        return sum(shared for shared, _length in self.prefixes) / total if total else 0.0

    def _pause(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True if it is still running."""
        return seconds <= 0 or not self._stopping.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeModelServer/1"
    protocol_version = "HTTP/1.1"  # keep-alive; a stream is chunked (`_stream`)
    # TCP_NODELAY, as servers that stream set it: on a kept-alive connection Nagle's algorithm
    # holds each small write until the client's delayed ACK (40 ms) of the one before.
    disable_nagle_algorithm = True

    @property
    def fake(self) -> FakeModelServer:
        return self.server.fake  # type: ignore[attr-defined]

    def handle(self) -> None:
        with contextlib.suppress(ConnectionResetError):  # a client dropped a kept-alive connection
            super().handle()

    def setup(self) -> None:
        super().setup()
        with self.fake._changed:
            self.fake._connections.add(self.connection)

    def finish(self) -> None:
        with self.fake._changed:
            self.fake._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        return None  # keep test output quiet

    def do_GET(self) -> None:
        path = _route(self.path)
        # a listing, not a model request: kept apart, so `history` holds only what asks the model
        self.fake.listings.append(self.path)
        if path != "/models":
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if self.fake.listing_status is not None:  # a server that is down (a health probe's view)
            self._send_json(self.fake.listing_status, {"error": {"message": "down for a test"}})
            return
        model = {"id": FAKE_MODEL_ID, "object": "model", "created": 0, "owned_by": "fake"}
        model |= {"type": "model", "display_name": "Fake model", "created_at": "2024-01-01T00:00:00Z"}
        listed = [model]
        if self.fake.context is not None:  # a second model that says its window, as vLLM does
            listed.append({**model, "id": WINDOWED_MODEL_ID, "max_model_len": self.fake.context})
        self._send_json(
            200,
            {
                "object": "list",
                "data": listed,
                "has_more": False,
                "first_id": FAKE_MODEL_ID,
                "last_id": FAKE_MODEL_ID,
            },
        )

    def do_POST(self) -> None:
        arrived = time.time()
        path = _route(self.path)
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._send_json(400, {"error": {"message": "body is not JSON"}})
            return
        titling = is_title_request(body)
        self.fake._record(self.path, body, dict(self.headers), arrived, self.client_address[:2], titling)
        if path not in ("/chat/completions", "/messages"):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        wire = "openai" if path == "/chat/completions" else "anthropic"
        if wire == "openai" and self.fake.refuses_stream_options and "stream_options" in body:
            self._send_error(wire, Reply(status=400, error_message=STREAM_OPTIONS_REFUSAL))
            return
        shared = 0 if titling else self.fake._measure_prefix(body)
        if self.fake.context is not None and request_tokens(body) > self.fake.context:
            with self.fake._changed:
                self.fake.overflowed += 1
            self._send_error(wire, Reply(context_window_exceeded=True))
            return
        reply = self.fake._next_reply(body, titling)
        if self.fake.prompt_cache and not reply.cached_tokens and _is_cached(wire, body):
            reply = dataclasses.replace(reply, cached_tokens=shared // 4)
        if not self.fake._pause(reply.hang_seconds):
            self.close_connection = True  # stopped with no answer sent: the client sees a close
            return
        if reply.is_error:
            self._send_error(wire, reply)
        elif body.get("stream"):
            self._stream(wire, reply, body)
        else:
            self._send_json(200, _whole(wire, reply, body))

    def _send_error(self, wire: str, reply: Reply) -> None:
        if reply.context_window_exceeded:
            code = "context_length_exceeded" if wire == "openai" else None
            reply = Reply(status=400, error_message=CONTEXT_WINDOW_MESSAGES[wire], error_code=code)
        status = reply.status or 500
        message = reply.error_message or f"fake error {status}"
        body = _error_body(wire, status, message, reply)
        headers = {} if reply.retry_after is None else {"retry-after": f"{reply.retry_after:g}"}
        self._send_json(status, body, headers)

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, wire: str, reply: Reply, body: dict) -> None:
        """Chunked SSE. A broken stream ends its body where it breaks, as a connection closing
        mid-reply ends it, and takes the connection with it; so does a server that stops."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        frames = _openai_sse(reply, body) if wire == "openai" else _anthropic_sse(reply, body)
        try:
            for number, frame in enumerate(frames):
                if number and not self.fake._pause(reply.chunk_delay):
                    self.close_connection = True
                    break
                if frame == STREAM_BREAK:
                    self._chunk(_break_frame(wire, reply.break_how))
                    self.close_connection = True
                    break
                self._chunk(frame)
            else:
                if not self.fake._pause(reply.hold_open):
                    self.close_connection = True
            self.wfile.write(b"0\r\n\r\n")  # the body's end
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client closed the stream: what a cancelled turn does

    def _chunk(self, text: str) -> None:
        if data := text.encode():
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()


# -- wire formats ------------------------------------------------------------------


def _openai_sse(reply: Reply, body: dict) -> Iterator[str]:
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", FAKE_MODEL_ID),
    }

    def chunk(delta: dict, finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _data({**base, "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    if reply.raw_event is not None:
        yield f"data: {reply.raw_event}\n\n"
    for piece in _words(reply.reasoning):
        yield chunk({"reasoning_content": piece})
    for piece in reply.sent_pieces():
        yield chunk({"content": piece})
    if reply.break_after is not None:
        yield STREAM_BREAK
        return
    if reply.web_search is not None:
        yield from (chunk(delta) for delta in _openai_search_deltas(reply.text_pieces(), reply.web_search))
    for index, call in enumerate(reply.tool_calls):
        opening = {
            "index": index,
            "id": _call_id(call, "call"),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [opening]})
        for piece in _split(call.arguments_text(), ARGUMENT_PIECES):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        yield _data({**base, "choices": [], "usage": _openai_usage(reply, body)})
    yield "data: [DONE]\n\n"


def _anthropic_sse(reply: Reply, body: dict) -> Iterator[str]:
    usage = _usage(reply, body)
    message = {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", FAKE_MODEL_ID),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage["input_tokens"],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": reply.cached_tokens,
            "output_tokens": 1,
        },
    }
    yield _event("message_start", {"type": "message_start", "message": message})
    if reply.raw_event is not None:
        yield f"event: {_raw_event_name(reply.raw_event)}\ndata: {reply.raw_event}\n\n"
    blocks = _anthropic_blocks(reply)
    for index, (block, deltas) in enumerate(blocks):
        yield _event(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
        )
        for delta in deltas:
            if delta is None:  # where the text stopped short
                yield STREAM_BREAK
                return
            yield _event(
                "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
            )
        yield _event("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield _event("message_stop", {"type": "message_stop"})


def _anthropic_blocks(reply: Reply) -> list[tuple[dict, list[dict | None]]]:
    """Each content block's opening and its deltas, in the order Anthropic sends them;
    a None delta marks where a breaking reply's stream breaks."""
    blocks: list[tuple[dict, list[dict | None]]] = []
    if reply.reasoning:
        deltas: list[dict | None] = [
            {"type": "thinking_delta", "thinking": p} for p in _words(reply.reasoning)
        ]
        deltas.append({"type": "signature_delta", "signature": "fake-signature"})
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
    if reply.tool_search is not None:
        blocks.extend(_tool_search_blocks(reply.tool_search))
    if reply.text_pieces():
        text: list[dict | None] = [{"type": "text_delta", "text": p} for p in reply.sent_pieces()]
        if reply.break_after is not None:
            text.append(None)
        blocks.append(({"type": "text", "text": ""}, text))
    if reply.web_search is not None:
        blocks.extend(_web_search_blocks(reply.web_search))
    for call in reply.tool_calls:
        opening = {"type": "tool_use", "id": _call_id(call, "toolu"), "name": call.name, "input": {}}
        pieces = _split(call.arguments_text(), ARGUMENT_PIECES)
        blocks.append((opening, [{"type": "input_json_delta", "partial_json": p} for p in pieces]))
    return blocks


def _tool_search_blocks(search: ServerToolSearch) -> list[tuple[dict, list[dict | None]]]:
    """The server tool's call (its input streamed like a tool_use's) and its result, whole."""
    use_id = search.id or f"srvtoolu_{uuid.uuid4().hex[:16]}"
    call = {"type": "server_tool_use", "id": use_id, "name": "tool_search_tool_bm25", "input": {}}
    pieces = _split(json.dumps({"query": search.query}), ARGUMENT_PIECES)
    result = {
        "type": "tool_search_tool_result",
        "tool_use_id": use_id,
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": name} for name in search.found],
        },
    }
    return [(call, [{"type": "input_json_delta", "partial_json": p} for p in pieces]), (result, [])]


def _web_search_blocks(search: WebSearch) -> list[tuple[dict, list[dict | None]]]:
    """The search's call and its result (whole), then a text block per part: a cited part's
    citation comes first, as a citations_delta, as Anthropic streams them."""
    use_id = search.id or f"srvtoolu_{uuid.uuid4().hex[:16]}"
    call = {"type": "server_tool_use", "id": use_id, "name": "web_search", "input": {}}
    pieces = _split(json.dumps({"query": search.query}), ARGUMENT_PIECES)
    found = [
        {
            "type": "web_search_result",
            "title": title,
            "url": url,
            "encrypted_content": f"enc-{n}-{uuid.uuid5(uuid.NAMESPACE_URL, url).hex[:12]}",
            "page_age": "April 30, 2025",
        }
        for n, (title, url) in enumerate(search.pages)
    ]
    result = {"type": "web_search_tool_result", "tool_use_id": use_id, "content": found}
    blocks: list[tuple[dict, list[dict | None]]] = [
        (call, [{"type": "input_json_delta", "partial_json": p} for p in pieces]),
        (result, []),
    ]
    for text, page in search.parts:
        deltas: list[dict | None] = []
        if page is not None:
            title, url = search.pages[page]
            citation = {
                "type": "web_search_result_location",
                "cited_text": text.strip()[:150],
                "url": url,
                "title": title,
                "encrypted_index": f"idx-{page}",
            }
            deltas.append({"type": "citations_delta", "citation": citation})
        deltas.extend({"type": "text_delta", "text": p} for p in _words(text))
        blocks.append(
            (
                {"type": "text", "text": "", "citations": []}
                if page is not None
                else {"type": "text", "text": ""},
                deltas,
            )
        )
    return blocks


def _openai_search_deltas(before: list[str], search: WebSearch) -> Iterator[dict]:
    """The parts as text deltas, then one delta with every cited part's url_citation."""
    offset = len("".join(before))
    annotations = []
    for text, page in search.parts:
        yield {"content": text}
        if page is not None:
            title, url = search.pages[page]
            span = {"start_index": offset, "end_index": offset + len(text), "url": url, "title": title}
            annotations.append({"type": "url_citation", "url_citation": span})
        offset += len(text)
    yield {"content": "", "annotations": annotations}


def _error_body(wire: str, status: int, message: str, reply: Reply) -> dict[str, Any]:
    if wire == "openai":
        kind = reply.error_type or "fake_error"
        return {"error": {"message": message, "type": kind, "code": reply.error_code or status}}
    kind = reply.error_type or ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _break_frame(wire: str, how: str) -> str:
    """The last thing a breaking stream sends before its connection closes."""
    if how == "malformed":
        prefix = "" if wire == "openai" else "event: content_block_delta\n"
        return prefix + 'data: {"type": "content_block_delta", "index": 0, "delta": {"te\n\n'
    if how == "error_event":
        if wire == "openai":
            return _data({"error": {"message": "Overloaded", "type": "server_error"}})
        overloaded = {"type": "overloaded_error", "message": "Overloaded"}
        return _event("error", {"type": "error", "error": overloaded})
    return ""


def _whole(wire: str, reply: Reply, body: dict) -> dict:
    """A non-streamed response in the given wire format."""
    model = body.get("model", FAKE_MODEL_ID)
    if wire == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": reply.full_text() or None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": _call_id(c, "call"),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_text()},
                }
                for c in reply.tool_calls
            ]
        finish = "tool_calls" if reply.tool_calls else "stop"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": _openai_usage(reply, body),
        }
    content: list[dict] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "fake-signature"})
    if reply.full_text():
        content.append({"type": "text", "text": reply.full_text()})
    for call in reply.tool_calls:
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        content.append(
            {"type": "tool_use", "id": _call_id(call, "toolu"), "name": call.name, "input": arguments}
        )
    return {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": _usage(reply, body),
    }


# -- small pieces ------------------------------------------------------------------


def _route(raw_path: str) -> str:
    """The endpoint, with or without the `/v1` prefix and any query string."""
    path = raw_path.split("?", 1)[0].rstrip("/")
    return path[3:] if path.startswith("/v1/") else path


def _data(payload: dict) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def _raw_event_name(raw: str) -> str:
    try:
        named = json.loads(raw).get("type")
    except (ValueError, AttributeError):
        named = None
    return named if isinstance(named, str) and named.isidentifier() else "content_block_delta"


def _event(name: str, payload: dict) -> str:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n"


def _words(text: str) -> list[str]:
    """`text` as several deltas: each word with the space after it."""
    return re.findall(r"\s*\S+\s*", text) if text.strip() else ([text] if text else [])


def _split(text: str, parts: int) -> list[str]:
    if not text:
        return [""]
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _call_id(call: ToolCall, prefix: str) -> str:
    return call.id or f"{prefix}_{uuid.uuid4().hex[:16]}"


def _usage(reply: Reply, body: dict) -> dict[str, int]:
    prompt = json.dumps(body.get("messages") or [])
    output = len(reply.text_pieces()) + len(_words(reply.reasoning)) + 4 * len(reply.tool_calls)
    return {
        "input_tokens": reply.input_tokens or max(1, len(prompt) // 4),
        "output_tokens": reply.output_tokens or max(1, output),
    }


def _is_cached(wire: str, body: dict) -> bool:
    """OpenAI caches every prefix on its own; Anthropic only up to a block marked for it."""
    return wire == "openai" or '"cache_control"' in json.dumps(body)


def request_text(body: dict) -> str:
    """A request's tools, system prompt and messages, in the order a prompt cache reads them,
    without the cache marks (they move as the conversation grows, and are not prompt)."""
    parts = {"tools": body.get("tools"), "system": body.get("system"), "messages": body.get("messages")}
    text = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return text.replace(',"cache_control":{"type":"ephemeral"}', "")


def request_tokens(body: dict) -> int:
    """A request's size in tokens as the fake counts them (a character count over four, as the
    service estimates it): its system prompt, messages and tools."""
    return len(request_text(body)) // 4


def _openai_usage(reply: Reply, body: dict) -> dict[str, Any]:
    usage = _usage(reply, body)
    return {
        "prompt_tokens": usage["input_tokens"] + reply.cached_tokens,  # OpenAI counts cached input in
        "completion_tokens": usage["output_tokens"],
        "total_tokens": usage["input_tokens"] + reply.cached_tokens + usage["output_tokens"],
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
    }


def _last_user_text(messages: list[dict]) -> str:
    """The newest user text of either wire format (tool results are skipped)."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [p.get("text", "") for p in content or [] if p.get("type") == "text"]
        if texts:
            return "".join(texts)
    return ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve default fake model replies forever.")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    server = FakeModelServer(port=args.port).start()
    print(
        f"fake model server: openai {server.openai_base_url}  anthropic {server.anthropic_base_url}",
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()


def is_title_request(body: Any) -> bool:
    """Whether a request is app/titles.py's: its system prompt (either wire) says so."""
    if not isinstance(body, dict):
        return False
    system = body.get("system")
    messages = body.get("messages") or []
    first = messages[0] if isinstance(messages, list) and messages and isinstance(messages[0], dict) else {}
    text = json.dumps([system, first.get("content") if first.get("role") == "system" else None])
    return TITLE_REQUEST_MARKER in text
