"""Anthropic's Messages API (api.anthropic.com).

Sources: the docs' "Streaming Messages" (event names `message_start`, `content_block_start`,
`ping`, `content_block_delta` with `text_delta` / `input_json_delta` / `thinking_delta` /
`signature_delta`, `content_block_stop`, `message_delta` with the stop reason and cumulative
usage, `message_stop`; an `error` event such as `overloaded_error` inside a 200 stream), the
"Extended thinking" guide (thinking blocks carry a `signature` and must go back unchanged with
tool use; `redacted_thinking` blocks carry `data` and go back as they came), "Handling stop
reasons" (`refusal`), "Errors" (`{"type": "error", "error": {"type", "message"}}`; 529
`overloaded_error`, 429 `rate_limit_error` with `retry-after`) and "Rate limits" (the
`anthropic-ratelimit-*` headers). The whole-body cases are what an Anthropic-compatible proxy
that ignores `stream` sends: the API reference's Message object.
"""

from tests.fakes.replay_server import http

MODEL = "claude-sonnet-4-5"
USAGE = {"input_tokens": 1200, "output_tokens": 6, "cache_read_input_tokens": 1024}
REASONING = "The user wants the answer."
REFUSAL = "I can't help with that."
RETRY_AFTER = 1.0
ERROR_TEXT = "Overloaded"
SIGNATURE = (
    "EqQBCkgIBRABGAIiQL+3kXqv5Fq1bR9b0uGW7QzJt1hZ/t0X9z1rN0FjXvWnq8yB8cCk2mQ6m3gY7c5Zc4Q0gYk9b"
    "1wH2sV6wqf3uLoSDHtF3Yb0qK5pWcR1bBoMoXj9yq3ZtG1fWbqRIjBvV2Kx8z0/p7mQ5aN4cL1eT8gH6sJ2dF9kR3"
    "uY5wX0bA7nM4vC2zS1qP8oE6tU=="
)
REDACTED = (
    "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB4URj2pLmN3hLPa"
)
TOOL_USE_ID = "toolu_01A09q90qw90lq917835lq9"

_SSE = "HTTP/1.1 200 OK\ncontent-type: text/event-stream; charset=utf-8\ncache-control: no-cache\nrequest-id: req_011CVa\n\n"
_START = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL",'
    '"type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,'
    '"stop_sequence":null,"usage":{"input_tokens":1200,"cache_creation_input_tokens":0,'
    '"cache_read_input_tokens":1024,"output_tokens":1,"service_tier":"standard"}}}\n\n'
)
_PING = 'event: ping\ndata: {"type": "ping"}\n\n'
_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def _end(reason: str, output_tokens: int) -> str:
    return (
        f'event: message_delta\ndata: {{"type":"message_delta","delta":{{"stop_reason":"{reason}",'
        f'"stop_sequence":null}},"usage":{{"output_tokens":{output_tokens}}}}}\n\n' + _STOP
    )


def _text_block(index: int, *pieces: str) -> str:
    out = f'event: content_block_start\ndata: {{"type":"content_block_start","index":{index},"content_block":{{"type":"text","text":""}}}}\n\n'
    for piece in pieces:
        out += f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":"{piece}"}}}}\n\n'
    return out + f'event: content_block_stop\ndata: {{"type":"content_block_stop","index":{index}}}\n\n'


def _tool_block(index: int, call_id: str, *pieces: str) -> str:
    out = (
        f'event: content_block_start\ndata: {{"type":"content_block_start","index":{index},"content_block":'
        f'{{"type":"tool_use","id":"{call_id}","name":"bash","input":{{}}}}}}\n\n'
    )
    for piece in pieces:
        out += f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":"{piece}"}}}}\n\n'
    return out + f'event: content_block_stop\ndata: {{"type":"content_block_stop","index":{index}}}\n\n'


_THINKING = (
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants"}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" the answer."}}\n\n'
    f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":0,"delta":{{"type":"signature_delta","signature":"{SIGNATURE}"}}}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
)
_REDACTED = (
    f'event: content_block_start\ndata: {{"type":"content_block_start","index":1,"content_block":{{"type":"redacted_thinking","data":"{REDACTED}"}}}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n'
)
_JSON = "HTTP/1.1 200 OK\ncontent-type: application/json\nrequest-id: req_011CVb\n\n"
_MESSAGE = (
    '{"id":"msg_01Whole","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":'
)
_USAGE = ',"usage":{"input_tokens":1200,"cache_creation_input_tokens":0,"cache_read_input_tokens":1024,"output_tokens":6}}'


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.encode())


CASES = {
    "text": _recorded(_SSE + _START + _text_block(0, "The answer", " is 42.") + _PING + _end("end_turn", 6)),
    "tool_call": _recorded(
        _SSE
        + _START
        + _tool_block(0, TOOL_USE_ID, "", '{\\"command\\": \\"ec', 'ho one\\"}')
        + _end("tool_use", 30)
    ),
    "parallel": _recorded(
        _SSE
        + _START
        + _tool_block(0, "toolu_01Bq8ad7cVDXbJ2", '{\\"command\\": \\"echo one\\"}')
        + _tool_block(1, "toolu_01Cr9be8dWEYcK3", '{\\"command\\":', ' \\"echo two\\"}')
        + _end("tool_use", 60)
    ),
    # Extended thinking before a call: the thinking (signed) and redacted thinking must go back.
    "text_then_tool": _recorded(
        _SSE
        + _START
        + _THINKING
        + _REDACTED
        + _text_block(2, "Let me check.")
        + _tool_block(3, TOOL_USE_ID, '{\\"command\\": \\"echo one\\"}')
        + _end("tool_use", 90)
    ),
    "reasoning": _recorded(
        _SSE + _START + _THINKING + _text_block(1, "The answer is 42.") + _end("end_turn", 40)
    ),
    "refusal": _recorded(_SSE + _START + _text_block(0, "I can't help", " with that.") + _end("refusal", 8)),
    "error_before": http(
        b"HTTP/1.1 529 Site Overloaded\ncontent-type: application/json\nrequest-id: req_011CVc\nx-should-retry: true\n\n"
        b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CVc"}'
    ),
    "error_mid": _recorded(
        _SSE
        + _START
        + 'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The ans"}}\n\n'
        'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n'
    ),
    "rate_limit": http(
        b"HTTP/1.1 429 Too Many Requests\ncontent-type: application/json\nretry-after: 1\n"
        b"anthropic-ratelimit-requests-limit: 50\nanthropic-ratelimit-requests-remaining: 0\n"
        b"anthropic-ratelimit-requests-reset: 2026-12-05T21:00:01Z\n\n"
        b'{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit '
        b"for your organization of 50 requests per minute. For details, refer to: "
        b'https://docs.claude.com/en/api/rate-limits."},"request_id":"req_011CVd"}'
    ),
    "whole_text": _recorded(
        _JSON
        + _MESSAGE
        + '[{"type":"text","text":"The answer is 42."}],"stop_reason":"end_turn","stop_sequence":null'
        + _USAGE
    ),
    "whole_tool_call": _recorded(
        _JSON
        + _MESSAGE
        + f'[{{"type":"tool_use","id":"{TOOL_USE_ID}","name":"bash","input":{{"command":"echo one"}}}}],'
        '"stop_reason":"tool_use","stop_sequence":null' + _USAGE
    ),
    "whole_parallel": _recorded(
        _JSON
        + _MESSAGE
        + '[{"type":"tool_use","id":"toolu_01Dw1","name":"bash","input":{"command":"echo one"}},'
        '{"type":"tool_use","id":"toolu_01Ex2","name":"bash","input":{"command":"echo two"}}],'
        '"stop_reason":"tool_use","stop_sequence":null' + _USAGE
    ),
    "whole_error": http(
        b"HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
        b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    ),
}
