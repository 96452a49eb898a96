"""OpenRouter's OpenAI-compatible API (openrouter.ai/api/v1), here routing to an Anthropic model.

Sources: openrouter.ai/docs: "Streaming" (SSE comments `: OPENROUTER PROCESSING` while a
request waits; an error after the stream began is a `data:` chunk with a top-level `error`
`{code, message}` and `finish_reason: "error"`, the status staying 200), "Errors" (`{"error":
{"code", "message", "metadata"}}`; the status is the code before a stream starts, 200 once the
model is producing, in the body or as an SSE event; 429 rate limits with the limit in
`metadata.headers`, no `retry-after`), "API reference" (chunks carry `provider` and
`native_finish_reason`; the last chunk carries `usage` with `cost`), "Reasoning tokens"
(`delta.reasoning` and `reasoning_details`).
"""

from tests.fakes.replay_server import http

MODEL = "anthropic/claude-sonnet-4.5"
USAGE = {"input_tokens": 1200, "output_tokens": 6, "cache_read_input_tokens": 1024}
REASONING = "The user wants the answer."
REFUSAL = "I can't help with that."
RETRY_AFTER = None
ERROR_TEXT = "Provider returned error"

_ENVELOPE = '"id":"gen-1764950000-AbCdEfGhIjKlMnOp","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion.chunk","created":1764950000'
_SSE = "HTTP/1.1 200 OK\ncontent-type: text/event-stream\ncache-control: no-cache\nx-generation-id: gen-1764950000-AbCdEfGhIjKlMnOp\n\n: OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n"
_DONE = "data: [DONE]\n\n"
_USAGE = (
    'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null,"native_finish_reason":null,"logprobs":null}],'
    '"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206,"cost":0.003762,"is_byok":false,"prompt_tokens_details":{"cached_tokens":1024},'
    '"cost_details":{"upstream_inference_cost":null},"completion_tokens_details":{"reasoning_tokens":0}}}\n\n'
)


def _delta(delta: str, finish: str = "null", native: str = "null") -> str:
    return f'data: {{@,"choices":[{{"index":0,"delta":{delta},"finish_reason":{finish},"native_finish_reason":{native},"logprobs":null}}]}}\n\n'


def _content(text: str) -> str:
    return _delta(f'{{"role":"assistant","content":"{text}"}}')


def _end(reason: str, native: str) -> str:
    return _delta('{"role":"assistant","content":""}', f'"{reason}"', f'"{native}"')


def _call(index: int, call_id: str, *pieces: str) -> str:
    out = _delta(
        f'{{"role":"assistant","content":"","tool_calls":[{{"index":{index},"id":"{call_id}","type":"function","function":{{"name":"bash","arguments":""}}}}]}}'
    )
    for piece in pieces:
        out += _delta(
            f'{{"role":"assistant","content":"","tool_calls":[{{"index":{index},"type":"function","function":{{"arguments":"{piece}"}}}}]}}'
        )
    return out


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.replace("{@", "{" + _ENVELOPE).encode())


_ERROR = '{"error":{"code":502,"message":"Provider returned error","metadata":{"raw":"{\\"type\\":\\"error\\",\\"error\\":{\\"type\\":\\"overloaded_error\\",\\"message\\":\\"Overloaded\\"}}","provider_name":"Anthropic"}}}'
_JSON = "HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
_WHOLE = '{"id":"gen-1764950001-QrStUvWxYz","provider":"Anthropic","model":"anthropic/claude-sonnet-4.5","object":"chat.completion","created":1764950001,"choices":[{"logprobs":null,"finish_reason":"%s","native_finish_reason":"%s","index":0,"message":'
_WHOLE_END = '}],"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206,"cost":0.003762,"prompt_tokens_details":{"cached_tokens":1024}}}'


def _whole_call(call_id: str, command: str) -> str:
    return f'{{"id":"{call_id}","index":0,"type":"function","function":{{"name":"bash","arguments":"{{\\"command\\": \\"{command}\\"}}"}}}}'


CASES = {
    "text": _recorded(
        _SSE + _content("The answer") + _content(" is 42.") + _end("stop", "end_turn") + _USAGE + _DONE
    ),
    "tool_call": _recorded(
        _SSE
        + _call(0, "toolu_vrtx_01Mx9il6", "", '{\\"command\\": \\"echo', ' one\\"}')
        + _end("tool_calls", "tool_use")
        + _USAGE
        + _DONE
    ),
    "parallel": _recorded(
        _SSE
        + _call(0, "toolu_vrtx_01Ny0jm7", '{\\"command\\": \\"echo one\\"}')
        + _call(1, "toolu_vrtx_01Oz1kn8", '{\\"command\\": \\"echo two\\"}')
        + _end("tool_calls", "tool_use")
        + _USAGE
        + _DONE
    ),
    "text_then_tool": _recorded(
        _SSE
        + _content("Let me check.")
        + _call(0, "toolu_vrtx_01Pa2lo9", '{\\"command\\": \\"echo one\\"}')
        + _end("tool_calls", "tool_use")
        + _USAGE
        + _DONE
    ),
    "reasoning": _recorded(
        _SSE
        + _delta(
            '{"role":"assistant","content":"","reasoning":"The user wants","reasoning_details":[{"type":"reasoning.text","text":"The user wants","format":"anthropic-claude-v1","index":0}]}'
        )
        + _delta(
            '{"role":"assistant","content":"","reasoning":" the answer.","reasoning_details":[{"type":"reasoning.text","text":" the answer.","format":"anthropic-claude-v1","index":0}]}'
        )
        + _delta(
            '{"role":"assistant","content":"","reasoning":null,"reasoning_details":[{"type":"reasoning.text","signature":"EqQBCkgIBRAB","format":"anthropic-claude-v1","index":0}]}'
        )
        + _content("The answer is 42.")
        + _end("stop", "end_turn")
        + _USAGE
        + _DONE
    ),
    "refusal": _recorded(
        _SSE + _content("I can't help") + _content(" with that.") + _end("stop", "refusal") + _USAGE + _DONE
    ),
    "error_before": _recorded("HTTP/1.1 502 Bad Gateway\ncontent-type: application/json\n\n" + _ERROR),
    "error_mid": _recorded(
        _SSE
        + _content("The ans")
        + 'data: {@,"error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}\n\n'
    ),
    "rate_limit": _recorded(
        "HTTP/1.1 429 Too Many Requests\ncontent-type: application/json\n\n"
        '{"error":{"code":429,"message":"Rate limit exceeded: free-models-per-min. ","metadata":{"headers":{"X-RateLimit-Limit":"20","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"1764950060000"}}}}'
    ),
    "whole_text": _recorded(
        _JSON
        + _WHOLE % ("stop", "end_turn")
        + '{"role":"assistant","content":"The answer is 42.","refusal":null,"reasoning":null}'
        + _WHOLE_END
    ),
    "whole_tool_call": _recorded(
        _JSON
        + _WHOLE % ("tool_calls", "tool_use")
        + '{"role":"assistant","content":"","refusal":null,"reasoning":null,"tool_calls":['
        + _whole_call("toolu_vrtx_01Qb3mp0", "echo one")
        + "]}"
        + _WHOLE_END
    ),
    "whole_parallel": _recorded(
        _JSON
        + _WHOLE % ("tool_calls", "tool_use")
        + '{"role":"assistant","content":"","refusal":null,"reasoning":null,"tool_calls":['
        + _whole_call("toolu_vrtx_01Rc4nq1", "echo one")
        + ","
        + _whole_call("toolu_vrtx_01Sd5or2", "echo two").replace('"index":0', '"index":1')
        + "]}"
        + _WHOLE_END
    ),
    # Once the model is producing, an error comes in the body with status 200.
    "whole_error": _recorded(_JSON + _ERROR),
}
