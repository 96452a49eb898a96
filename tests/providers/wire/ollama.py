"""Ollama's OpenAI-compatible endpoint (`http://localhost:11434/v1`).

Sources: docs/openai.md of ollama/ollama (supported fields, `stream_options.include_usage`) and
openai/openai.go (ChunkWithUsage, toChunk, toUsage, NewError): `id` `chatcmpl-<number>`,
`system_fingerprint` `fp_ollama`; a tool call comes whole in one delta (`id` `call_<8 chars>`),
several calls in one delta; before ollama/ollama#7963 a streamed answer with calls ends with
`finish_reason: "stop"`, and older releases sent calls without an `index`; thinking models
stream `delta.reasoning`. Errors are `{"error": {"message", "type": "api_error", "param",
"code"}}`, inside a stream too; a full queue (OLLAMA_MAX_QUEUE) answers 503 "server busy".
"""

from tests.fakes.replay_server import http

MODEL = "llama3.2"
USAGE = {"input_tokens": 1200, "output_tokens": 6}
REASONING = "The user wants the answer."
REFUSAL = "I can't help with that."
RETRY_AFTER = None
ERROR_TEXT = "llama runner process has terminated: signal: killed"

_ENVELOPE = '"id":"chatcmpl-742","object":"chat.completion.chunk","created":1764950000,"model":"llama3.2","system_fingerprint":"fp_ollama"'
_SSE = "HTTP/1.1 200 OK\nContent-Type: text/event-stream\nDate: Sat, 05 Dec 2026 21:00:00 GMT\n\n"
_USAGE = 'data: {@,"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206}}\n\n'
_DONE = "data: [DONE]\n\n"


def _delta(delta: str, finish: str = "null") -> str:
    return f'data: {{@,"choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}\n\n'


def _content(text: str) -> str:
    return _delta(f'{{"role":"assistant","content":"{text}"}}')


_STOP = _delta('{"role":"assistant","content":""}', '"stop"')


def _call(call_id: str, command: str, index: str = '"index":0,') -> str:
    return f'{{"id":"{call_id}",{index}"type":"function","function":{{"name":"bash","arguments":"{{\\"command\\":\\"{command}\\"}}"}}}}'


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.replace("{@", "{" + _ENVELOPE).encode())


def _error(message: str) -> str:
    return f'{{"error":{{"message":"{message}","type":"api_error","param":null,"code":null}}}}'


_JSON = "HTTP/1.1 200 OK\nContent-Type: application/json; charset=utf-8\n\n"
_WHOLE = '{"id":"chatcmpl-311","object":"chat.completion","created":1764950001,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":'
_WHOLE_END = ',"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206}}'

CASES = {
    "text": _recorded(_SSE + _content("The answer") + _content(" is 42.") + _STOP + _USAGE + _DONE),
    # The call whole in one delta, and the answer ended with "stop" all the same.
    "tool_call": _recorded(
        _SSE
        + _delta(
            '{"role":"assistant","content":"","tool_calls":[' + _call("call_ul3bkb6o", "echo one") + "]}"
        )
        + _STOP
        + _USAGE
        + _DONE
    ),
    # Two calls in one delta, from a release that sent no `index`.
    "parallel": _recorded(
        _SSE
        + _delta(
            '{"role":"assistant","content":"","tool_calls":['
            + _call("call_vm4clc7p", "echo one", "")
            + ","
            + _call("call_wn5dmd8q", "echo two", "")
            + "]}"
        )
        + _STOP
        + _USAGE
        + _DONE
    ),
    "text_then_tool": _recorded(
        _SSE
        + _content("Let me check.")
        + _delta(
            '{"role":"assistant","content":"","tool_calls":[' + _call("call_xo6ene9r", "echo one") + "]}"
        )
        + _delta('{"role":"assistant","content":""}', '"tool_calls"')
        + _USAGE
        + _DONE
    ),
    "reasoning": _recorded(
        _SSE
        + _delta('{"role":"assistant","content":"","reasoning":"The user wants"}')
        + _delta('{"role":"assistant","content":"","reasoning":" the answer."}')
        + _content("The answer is 42.")
        + _STOP
        + _USAGE
        + _DONE
    ),
    "refusal": _recorded(_SSE + _content("I can't help") + _content(" with that.") + _STOP + _USAGE + _DONE),
    "error_before": _recorded(
        "HTTP/1.1 500 Internal Server Error\nContent-Type: application/json; charset=utf-8\n\n"
        + _error(ERROR_TEXT)
    ),
    "error_mid": _recorded(_SSE + _content("The ans") + "data: " + _error(ERROR_TEXT) + "\n\n"),
    "rate_limit": _recorded(
        "HTTP/1.1 503 Service Unavailable\nContent-Type: application/json; charset=utf-8\n\n"
        + _error("server busy, please try again.  maximum pending requests exceeded")
    ),
    "whole_text": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","content":"The answer is 42."},"finish_reason":"stop"}]'
        + _WHOLE_END
    ),
    "whole_tool_call": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","content":"","tool_calls":['
        + _call("call_yp7fof0s", "echo one")
        + ']},"finish_reason":"tool_calls"}]'
        + _WHOLE_END
    ),
    "whole_parallel": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","content":"","tool_calls":['
        + _call("call_zq8gpg1t", "echo one")
        + ","
        + _call("call_ar9hqh2u", "echo two", '"index":1,')
        + ']},"finish_reason":"tool_calls"}]'
        + _WHOLE_END
    ),
    "whole_error": _recorded(_JSON + _error(ERROR_TEXT)),
}
