"""DeepSeek's API (api.deepseek.com), OpenAI-compatible.

Sources: api-docs.deepseek.com: "Create Chat Completion" (the chunk and usage objects: usage
reports its context cache as `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`, beside the
counts), "Reasoning Model (deepseek-reasoner)" (thinking streams as `delta.reasoning_content`
while `content` is null, and a request whose messages carry `reasoning_content` is refused with
400), "Function Calling" (ids `call_0_<uuid>`), "Error Codes" (429 rate limit reached, 503
server overloaded) and the FAQ (while a request waits, a stream carries `: keep-alive` SSE
comments). An error inside a stream: the openai SDK's `data: {"error": ...}` shape, which
DeepSeek does not document otherwise.
"""

from tests.fakes.replay_server import http

MODEL = "deepseek-chat"
USAGE = {"input_tokens": 1200, "output_tokens": 6, "cache_read_input_tokens": 1024}
REASONING = "The user wants the answer."
REFUSAL = "I can't help with that."
RETRY_AFTER = None
ERROR_TEXT = "Server overloaded, please try again later."

_ENVELOPE = '"id":"5c7f0c1e-8a2b-4d3e-9f1a-2b3c4d5e6f70","object":"chat.completion.chunk","created":1764950000,"model":"deepseek-chat","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache"'
_SSE = "HTTP/1.1 200 OK\ncontent-type: text/event-stream; charset=utf-8\ncache-control: no-cache\nx-ds-trace-id: 9f1e2d3c\n\n: keep-alive\n\n"
_DONE = "data: [DONE]\n\n"
_FIRST = 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
_COUNTS = '"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206,"prompt_tokens_details":null,"prompt_cache_hit_tokens":1024,"prompt_cache_miss_tokens":176}'


def _delta(delta: str) -> str:
    return f'data: {{@,"choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":null}}]}}\n\n'


def _content(text: str) -> str:
    return _delta(f'{{"content":"{text}"}}')


def _end(reason: str) -> str:
    return f'data: {{@,"choices":[{{"index":0,"delta":{{"content":""}},"logprobs":null,"finish_reason":"{reason}"}}],{_COUNTS}}}\n\n'


def _call(index: int, call_id: str, command: str) -> str:
    return _delta(
        f'{{"tool_calls":[{{"index":{index},"id":"{call_id}","type":"function","function":{{"name":"bash","arguments":""}}}}]}}'
    ) + _delta(
        f'{{"tool_calls":[{{"index":{index},"function":{{"arguments":"{{\\"command\\": \\"{command}\\"}}"}}}}]}}'
    )


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.replace("{@", "{" + _ENVELOPE).encode())


_OVERLOADED = '{"error":{"message":"Server overloaded, please try again later.","type":"service_unavailable_error","param":null,"code":"server_overloaded"}}'
_JSON = "HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
_WHOLE = '{"id":"6d8a1d2f","object":"chat.completion","created":1764950001,"model":"deepseek-chat","choices":[{"index":0,"message":'
_WHOLE_END = (
    ',"logprobs":null,"finish_reason":"%s"}],'
    + _COUNTS
    + ',"system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache"}'
)

CASES = {
    "text": _recorded(_SSE + _FIRST + _content("The answer") + _content(" is 42.") + _end("stop") + _DONE),
    "tool_call": _recorded(
        _SSE
        + _FIRST
        + _call(0, "call_0_a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "echo one")
        + _end("tool_calls")
        + _DONE
    ),
    "parallel": _recorded(
        _SSE
        + _FIRST
        + _call(0, "call_0_b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e", "echo one")
        + _call(1, "call_1_c3d4e5f6-a7b8-4c9d-0e1f-2a3b4c5d6e7f", "echo two")
        + _end("tool_calls")
        + _DONE
    ),
    "text_then_tool": _recorded(
        _SSE
        + _FIRST
        + _content("Let me check.")
        + _call(0, "call_0_d4e5f6a7-b8c9-4d0e-1f2a-3b4c5d6e7f80", "echo one")
        + _end("tool_calls")
        + _DONE
    ),
    "reasoning": _recorded(
        _SSE
        + _delta('{"role":"assistant","content":null,"reasoning_content":""}')
        + _delta('{"content":null,"reasoning_content":"The user wants"}')
        + _delta('{"content":null,"reasoning_content":" the answer."}')
        + _delta('{"content":"The answer is 42.","reasoning_content":null}')
        + _end("stop")
        + _DONE
    ),
    "refusal": _recorded(
        _SSE + _FIRST + _content("I can't help") + _content(" with that.") + _end("stop") + _DONE
    ),
    "error_before": _recorded(
        "HTTP/1.1 503 Service Unavailable\ncontent-type: application/json\n\n" + _OVERLOADED
    ),
    "error_mid": _recorded(_SSE + _FIRST + _content("The ans") + "data: " + _OVERLOADED + "\n\n"),
    "rate_limit": _recorded(
        "HTTP/1.1 429 Too Many Requests\ncontent-type: application/json\n\n"
        '{"error":{"message":"Rate limit reached for requests","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}'
    ),
    "whole_text": _recorded(
        _JSON + _WHOLE + '{"role":"assistant","content":"The answer is 42."}' + _WHOLE_END % "stop"
    ),
    "whole_tool_call": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"call_0_e5f6a7b8","type":"function","function":{"name":"bash","arguments":"{\\"command\\": \\"echo one\\"}"}}]}'
        + _WHOLE_END % "tool_calls"
    ),
    "whole_parallel": _recorded(
        _JSON
        + _WHOLE
        + '{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"call_0_f6a7b8c9","type":"function","function":{"name":"bash","arguments":"{\\"command\\": \\"echo one\\"}"}},{"index":1,"id":"call_1_a7b8c9d0","type":"function","function":{"name":"bash","arguments":"{\\"command\\": \\"echo two\\"}"}}]}'
        + _WHOLE_END % "tool_calls"
    ),
    "whole_error": _recorded(_JSON + _OVERLOADED),
}
