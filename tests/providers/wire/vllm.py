"""vLLM's OpenAI-compatible server (`vllm serve`).

Sources: vllm/entrypoints/openai/protocol.py (ChatCompletionStreamResponse, DeltaMessage,
DeltaToolCall, UsageInfo, ErrorResponse) and serving_chat.py (chat_completion_stream_generator):
fields left unset are not sent (`exclude_unset`), so chunks carry no `usage` unless
`stream_options.include_usage` asks, and then one last chunk with empty `choices` does; a
choice carries vLLM's own `stop_reason`; a tool parser (hermes) sends a call's `id`
(`chatcmpl-tool-...`), `type` and `function.name` first, then its arguments in pieces, calls one
after another by `index`; `--reasoning-parser` streams thinking as `delta.reasoning_content`; an
error inside the stream is a `data:` event holding the ErrorResponse (`object: "error"`,
`message`, `type`, `param`, `code` at the top level) followed by `data: [DONE]`. vLLM has no rate
limit of its own: the 429 is what the nginx in front of a deployment sends (`limit_req`: an HTML
body, no `retry-after`).
"""

from tests.fakes.replay_server import http

MODEL = "Qwen/Qwen2.5-7B-Instruct"
USAGE = {"input_tokens": 1200, "output_tokens": 6}
REASONING = "The user wants the answer."
REFUSAL = "I can't help with that."
RETRY_AFTER = None
ERROR_TEXT = "EngineCore encountered an issue. See stack trace (above) for the root cause."

_ENVELOPE = '"id":"chatcmpl-8f2c1a9e0b7d4e6a","object":"chat.completion.chunk","created":1764950000,"model":"Qwen/Qwen2.5-7B-Instruct"'
_SSE = "HTTP/1.1 200 OK\ndate: Sat, 05 Dec 2026 21:00:00 GMT\nserver: uvicorn\ncontent-type: text/event-stream; charset=utf-8\n\n"
_FIRST = 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
_USAGE = 'data: {@,"choices":[],"usage":{"prompt_tokens":1200,"total_tokens":1206,"completion_tokens":6}}\n\n'
_DONE = "data: [DONE]\n\n"


def _content(text: str) -> str:
    return f'data: {{@,"choices":[{{"index":0,"delta":{{"content":"{text}"}},"logprobs":null,"finish_reason":null}}]}}\n\n'


def _finish(reason: str) -> str:
    return f'data: {{@,"choices":[{{"index":0,"delta":{{"content":""}},"logprobs":null,"finish_reason":"{reason}","stop_reason":null}}]}}\n\n'


def _call(index: int, call_id: str, *pieces: str) -> str:
    out = f'data: {{@,"choices":[{{"index":0,"delta":{{"tool_calls":[{{"id":"{call_id}","type":"function","index":{index},"function":{{"name":"bash"}}}}]}},"logprobs":null,"finish_reason":null}}]}}\n\n'
    for piece in pieces:
        out += f'data: {{@,"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},"function":{{"arguments":"{piece}"}}}}]}},"logprobs":null,"finish_reason":null}}]}}\n\n'
    return out


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.replace("{@", "{" + _ENVELOPE).encode())


_JSON = "HTTP/1.1 200 OK\nserver: uvicorn\ncontent-type: application/json\n\n"
_WHOLE = '{"id":"chatcmpl-9a1b","object":"chat.completion","created":1764950001,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"message":'
_WHOLE_END = '"logprobs":null,"finish_reason":"%s","stop_reason":null}],"usage":{"prompt_tokens":1200,"total_tokens":1206,"completion_tokens":6,"prompt_tokens_details":null},"prompt_logprobs":null}'
_ERROR = '{"object":"error","message":"EngineCore encountered an issue. See stack trace (above) for the root cause.","type":"InternalServerError","param":null,"code":500}'

CASES = {
    "text": _recorded(
        _SSE + _FIRST + _content("The answer") + _content(" is 42.") + _finish("stop") + _USAGE + _DONE
    ),
    "tool_call": _recorded(
        _SSE
        + _FIRST
        + _call(0, "chatcmpl-tool-4e8c2f1a9b3d", '{\\"command\\": \\"', "echo one", '\\"}')
        + _finish("tool_calls")
        + _USAGE
        + _DONE
    ),
    "parallel": _recorded(
        _SSE
        + _FIRST
        + _call(0, "chatcmpl-tool-5f9d3a2b0c4e", '{\\"command\\": \\"echo one\\"}')
        + _call(1, "chatcmpl-tool-6a0e4b3c1d5f", '{\\"command\\": \\"echo two\\"}')
        + _finish("tool_calls")
        + _USAGE
        + _DONE
    ),
    "text_then_tool": _recorded(
        _SSE
        + _FIRST
        + _content("Let me check.")
        + _call(0, "chatcmpl-tool-7b1f5c4d2e6a", '{\\"command\\": \\"echo one\\"}')
        + _finish("tool_calls")
        + _USAGE
        + _DONE
    ),
    "reasoning": _recorded(
        _SSE
        + 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"reasoning_content":"The user wants"},"logprobs":null,"finish_reason":null}]}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"reasoning_content":" the answer."},"logprobs":null,"finish_reason":null}]}\n\n'
        + _content("The answer is 42.")
        + _finish("stop")
        + _USAGE
        + _DONE
    ),
    "refusal": _recorded(
        _SSE + _FIRST + _content("I can't help") + _content(" with that.") + _finish("stop") + _USAGE + _DONE
    ),
    "error_before": _recorded(
        "HTTP/1.1 500 Internal Server Error\nserver: uvicorn\ncontent-type: application/json\n\n" + _ERROR
    ),
    "error_mid": _recorded(_SSE + _FIRST + _content("The ans") + f"data: {_ERROR}\n\n" + _DONE),
    "rate_limit": _recorded(
        "HTTP/1.1 429 Too Many Requests\nserver: nginx/1.27.3\ncontent-type: text/html\n\n"
        "<html>\r\n<head><title>429 Too Many Requests</title></head>\r\n<body>\r\n"
        "<center><h1>429 Too Many Requests</h1></center>\r\n<hr><center>nginx/1.27.3</center>\r\n</body>\r\n</html>\r\n"
    ),
    "whole_text": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","reasoning_content":null,"content":"The answer is 42.","tool_calls":[]},'
        + _WHOLE_END % "stop"
    ),
    "whole_tool_call": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","reasoning_content":null,"content":null,"tool_calls":[{"id":"chatcmpl-tool-8c2a","type":"function","function":{"name":"bash","arguments":"{\\"command\\": \\"echo one\\"}"}}]},'
        + _WHOLE_END % "tool_calls"
    ),
    "whole_parallel": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","reasoning_content":null,"content":null,"tool_calls":[{"id":"chatcmpl-tool-9d3b","type":"function","function":{"name":"bash","arguments":"{\\"command\\": \\"echo one\\"}"}},{"id":"chatcmpl-tool-0e4c","type":"function","function":{"name":"bash","arguments":"{\\"command\\": \\"echo two\\"}"}}]},'
        + _WHOLE_END % "tool_calls"
    ),
    # A buffering proxy in front passing vLLM's error on with the status it began with.
    "whole_error": _recorded(_JSON + _ERROR),
}
