"""llama.cpp's `llama-server` (its OpenAI-compatible /v1/chat/completions).

Sources: tools/server/README.md and server.cpp / utils.hpp of ggml-org/llama.cpp: a chunk's
`choices[].delta`, `created`, `id`, `model` (the alias it was started with), `system_fingerprint`
(the build), `object`; the first delta `{"role": "assistant", "content": null}`; the last chunk
carries `usage` and llama.cpp's own `timings` whether or not `stream_options` asked; with
`--jinja` a tool call comes whole in one delta, its id a random 32-character string; `--reasoning-
format deepseek` streams thinking as `reasoning_content`. Errors are `{"error": {"code",
"message", "type"}}`; while the model loads every request gets 503 `unavailable_error` "Loading
model" (it has no rate limit: busy slots queue). An error inside a stream is written as an
`error:` line, which is no SSE field a client reads: the stream just ends without its finish.
"""

from tests.fakes.replay_server import http

MODEL = "smollm2-135m-instruct"
USAGE = {"input_tokens": 1200, "output_tokens": 6}
REASONING = "The user wants the answer."
REFUSAL = "I can't help with that."
RETRY_AFTER = None
ERROR_TEXT = "Loading model"

_TAIL = '"created":1764950000,"id":"chatcmpl-Xk3pR8vN2qT7wZ1m","model":"smollm2-135m-instruct","system_fingerprint":"b6412-a1b2c3d4","object":"chat.completion.chunk"'
_SSE = (
    "HTTP/1.1 200 OK\nServer: llama.cpp\nContent-Type: text/event-stream\nAccess-Control-Allow-Origin: \n\n"
)
_FIRST = (
    'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],@}\n\n'
)
_DONE = "data: [DONE]\n\n"
_TIMINGS = '"timings":{"prompt_n":1200,"prompt_ms":812.4,"prompt_per_token_ms":0.677,"prompt_per_second":1477.1,"predicted_n":6,"predicted_ms":61.2,"predicted_per_token_ms":10.2,"predicted_per_second":98.0}'


def _content(text: str) -> str:
    return f'data: {{"choices":[{{"finish_reason":null,"index":0,"delta":{{"content":"{text}"}}}}],@}}\n\n'


def _finish(reason: str) -> str:
    return (
        f'data: {{"choices":[{{"finish_reason":"{reason}","index":0,"delta":{{}}}}],@,'
        f'"usage":{{"completion_tokens":6,"prompt_tokens":1200,"total_tokens":1206}},{_TIMINGS}}}\n\n'
    )


def _call(index: int, call_id: str, command: str) -> str:
    return (
        f'data: {{"choices":[{{"finish_reason":null,"index":0,"delta":{{"content":null,"tool_calls":[{{"index":{index},'
        f'"id":"{call_id}","type":"function","function":{{"name":"bash","arguments":"{{\\"command\\":\\"{command}\\"}}"}}}}]}}}}],@}}\n\n'
    )


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.replace("@", _TAIL).encode())


_LOADING = '{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
_JSON = "HTTP/1.1 200 OK\nServer: llama.cpp\nContent-Type: application/json; charset=utf-8\n\n"
_WHOLE_END = ',"created":1764950001,"model":"smollm2-135m-instruct","system_fingerprint":"b6412-a1b2c3d4","object":"chat.completion","usage":{"completion_tokens":6,"prompt_tokens":1200,"total_tokens":1206},"id":"chatcmpl-Yl4qS9wO3rU8xA2n"}'

CASES = {
    "text": _recorded(_SSE + _FIRST + _content("The answer") + _content(" is 42.") + _finish("stop") + _DONE),
    "tool_call": _recorded(
        _SSE
        + _FIRST
        + _call(0, "b2mX9q8vT3kLw7rZ1cN5pY4hJ6dF0sAe", "echo one")
        + _finish("tool_calls")
        + _DONE
    ),
    "parallel": _recorded(
        _SSE
        + _FIRST
        + _call(0, "c3nY0r9wU4lMx8sA2dO6qZ5iK7eG1tBf", "echo one")
        + _call(1, "d4oZ1s0xV5mNy9tB3eP7rA6jL8fH2uCg", "echo two")
        + _finish("tool_calls")
        + _DONE
    ),
    "text_then_tool": _recorded(
        _SSE
        + _FIRST
        + _content("Let me check.")
        + _call(0, "e5pA2t1yW6nOz0uC4fQ8sB7kM9gI3vDh", "echo one")
        + _finish("tool_calls")
        + _DONE
    ),
    "reasoning": _recorded(
        _SSE
        + _FIRST
        + 'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":"The user wants"}}],@}\n\n'
        'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"reasoning_content":" the answer."}}],@}\n\n'
        + _content("The answer is 42.")
        + _finish("stop")
        + _DONE
    ),
    "refusal": _recorded(
        _SSE + _FIRST + _content("I can't help") + _content(" with that.") + _finish("stop") + _DONE
    ),
    "error_before": _recorded(
        "HTTP/1.1 503 Service Unavailable\nServer: llama.cpp\nContent-Type: application/json; charset=utf-8\n\n"
        + _LOADING
    ),
    "error_mid": _recorded(
        _SSE
        + _FIRST
        + _content("The ans")
        + 'error: {"code":500,"message":"Failed to decode the batch: KV cache is full","type":"server_error"}\n\n'
    ),
    "rate_limit": _recorded(
        "HTTP/1.1 503 Service Unavailable\nServer: llama.cpp\nContent-Type: application/json; charset=utf-8\n\n"
        + _LOADING
    ),
    "whole_text": _recorded(
        _JSON
        + '{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"The answer is 42."}}]'
        + _WHOLE_END
    ),
    "whole_tool_call": _recorded(
        _JSON
        + '{"choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"bash","arguments":"{\\"command\\":\\"echo one\\"}"},"id":"f6qB3u2zX7oPa1vD5gR9tC8lN0hJ4wEi"}]}}]'
        + _WHOLE_END
    ),
    "whole_parallel": _recorded(
        _JSON
        + '{"choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"bash","arguments":"{\\"command\\":\\"echo one\\"}"},"id":"g7rC4v3aY8pQb2wE6hS0uD9mO1iK5xFj"},{"type":"function","function":{"name":"bash","arguments":"{\\"command\\":\\"echo two\\"}"},"id":"h8sD5w4bZ9qRc3xF7iT1vE0nP2jL6yGk"}]}}]'
        + _WHOLE_END
    ),
    # A proxy that buffers passing llama-server's error on with a 200.
    "whole_error": _recorded(_JSON + _LOADING),
}
