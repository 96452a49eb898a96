"""Hugging Face text-generation-inference's Messages API (`/v1/chat/completions`).

Sources: router/src/lib.rs and router/src/server.rs of huggingface/text-generation-inference
(ChatCompletionChunk, ChatCompletion, ToolCall, ErrorResponse and the status each InferError
maps to) and its issues: a chunk's `id` is empty; finish reasons are its own words
(`eos_token`, `length`, `stop_sequence`); calls are numbered `"0"`, `"1"` in every reply, so
ids repeat from one step to the next; a non-streamed call's `arguments` is a JSON object, not
the text of one (huggingface/text-generation-inference#2461); later pieces of a streamed call
repeat its id with `name: null`. Errors are `{"error": "<text>", "error_type": "<kind>"}`:
424 for a failed generation, 429 `overloaded` when its queue is full (no `retry-after`), and
the same body as a `data:` event inside a stream. TGI has no reasoning field.
"""

from tests.fakes.replay_server import http

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
USAGE = {"input_tokens": 1200, "output_tokens": 6}
REASONING = ""
REFUSAL = "I can't help with that."
RETRY_AFTER = None
ERROR_TEXT = "Request failed during generation: Server error: CUDA out of memory"

_ENVELOPE = '"object":"chat.completion.chunk","id":"","created":1764950000,"model":"meta-llama/Llama-3.1-8B-Instruct","system_fingerprint":"3.3.6-sha-a1b2c3d"'
_SSE = "HTTP/1.1 200 OK\ncontent-type: text/event-stream\nx-compute-type: gpu+optimized\n\n"
_USAGE = 'data: {@,"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206}}\n\n'
_DONE = "data: [DONE]\n\n"


def _delta(delta: str, finish: str = "null") -> str:
    return f'data: {{@,"choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}],"usage":null}}\n\n'


def _content(text: str) -> str:
    return _delta(f'{{"role":"assistant","content":"{text}"}}')


def _end(reason: str) -> str:
    return _delta('{"role":"assistant","content":""}', f'"{reason}"')


def _call(index: int, command: str) -> str:
    first = f'{{"role":"assistant","tool_calls":[{{"index":{index},"id":"{index}","type":"function","function":{{"name":"bash","arguments":""}}}}]}}'
    rest = f'{{"role":"assistant","tool_calls":[{{"index":{index},"id":"{index}","type":"function","function":{{"name":null,"arguments":"{{\\"command\\":\\"{command}\\"}}"}}}}]}}'
    return _delta(first) + _delta(rest)


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.replace("{@", "{" + _ENVELOPE).encode())


_ERROR = (
    '{"error":"Request failed during generation: Server error: CUDA out of memory","error_type":"generation"}'
)
_JSON = "HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
_WHOLE = '{"object":"chat.completion","id":"","created":1764950001,"model":"meta-llama/Llama-3.1-8B-Instruct","system_fingerprint":"3.3.6-sha-a1b2c3d","choices":[{"index":0,"message":'
_WHOLE_END = ',"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206}}'


def _object_call(index: int, command: str) -> str:
    return f'{{"id":"{index}","type":"function","function":{{"description":null,"name":"bash","arguments":{{"command":"{command}"}}}}}}'


CASES = {
    "text": _recorded(
        _SSE + _content("The answer") + _content(" is 42.") + _end("eos_token") + _USAGE + _DONE
    ),
    "tool_call": _recorded(_SSE + _call(0, "echo one") + _end("eos_token") + _USAGE + _DONE),
    "parallel": _recorded(
        _SSE + _call(0, "echo one") + _call(1, "echo two") + _end("eos_token") + _USAGE + _DONE
    ),
    "text_then_tool": _recorded(
        _SSE + _content("Let me check.") + _call(0, "echo one") + _end("eos_token") + _USAGE + _DONE
    ),
    # No reasoning field: a model's answer only.
    "reasoning": _recorded(_SSE + _content("The answer is 42.") + _end("eos_token") + _USAGE + _DONE),
    "refusal": _recorded(
        _SSE + _content("I can't help") + _content(" with that.") + _end("eos_token") + _USAGE + _DONE
    ),
    "error_before": _recorded("HTTP/1.1 424 Failed Dependency\ncontent-type: application/json\n\n" + _ERROR),
    "error_mid": _recorded(_SSE + _content("The ans") + "data: " + _ERROR + "\n\n"),
    "rate_limit": _recorded(
        'HTTP/1.1 429 Too Many Requests\ncontent-type: application/json\n\n{"error":"Model is overloaded","error_type":"overloaded"}'
    ),
    "whole_text": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","content":"The answer is 42."},"logprobs":null,"finish_reason":"eos_token"}]'
        + _WHOLE_END
    ),
    "whole_tool_call": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","tool_calls":['
        + _object_call(0, "echo one")
        + ']},"logprobs":null,"finish_reason":"eos_token"}]'
        + _WHOLE_END
    ),
    "whole_parallel": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","tool_calls":['
        + _object_call(0, "echo one")
        + ","
        + _object_call(1, "echo two")
        + ']},"logprobs":null,"finish_reason":"eos_token"}]'
        + _WHOLE_END
    ),
    "whole_error": _recorded(_JSON + _ERROR),
}
