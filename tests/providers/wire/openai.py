"""OpenAI's chat completions API (api.openai.com).

Sources: the API reference's "Create chat completion", "The chat completion object" and "The
chat completion chunk object" (platform.openai.com/docs/api-reference/chat): chunk fields `id`,
`object`, `created`, `model`, `service_tier`, `system_fingerprint`, `choices[].delta`,
`logprobs`, `finish_reason`, and with `stream_options.include_usage` a last chunk whose
`choices` is empty and whose `usage` holds the counts (`usage: null` on every other chunk);
`delta.refusal`; a tool call's `id`, `type` and `function.name` only on its first delta,
`function.arguments` in pieces, pieces paired by `index`. Errors (the API reference's "Error
codes" and the openai-python SDK's stream, which raises on a `data:` event carrying `error`):
`{"error": {"message", "type", "param", "code"}}`; 429 `rate_limit_exceeded` with the
`retry-after` header the SDK honours.
"""

from tests.fakes.replay_server import http

MODEL = "gpt-4.1-mini"
USAGE = {"input_tokens": 1200, "output_tokens": 6, "cache_read_input_tokens": 1024}
REASONING = ""  # OpenAI's chat API never streams its models' reasoning, only counts it
REFUSAL = "I'm sorry, I can't help with that."
RETRY_AFTER = 1.0
ERROR_TEXT = "The server had an error while processing your request. Sorry about that!"

_ENVELOPE = (
    '"id":"chatcmpl-BZ7xj2mKq1","object":"chat.completion.chunk","created":1764950000,'
    '"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_6f2eabb9a5"'
)
_SSE = "HTTP/1.1 200 OK\ncontent-type: text/event-stream; charset=utf-8\nx-request-id: req_7f1c\n\n"


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.replace("{@", "{" + _ENVELOPE).encode())


_USAGE = (
    'data: {@,"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206,'
    '"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":'
    '{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}\n\n'
)

CASES = {
    "text": _recorded(
        _SSE
        + 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"content":"The answer"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"content":" is 42."},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\n'
        + _USAGE
        + "data: [DONE]\n\n"
    ),
    "tool_call": _recorded(
        _SSE
        + 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"bash","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\""}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"command"}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\":\\"echo one\\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}\n\n'
        + _USAGE
        + "data: [DONE]\n\n"
    ),
    # Two calls whose pieces arrive interleaved: only `index` says which call a piece extends.
    "parallel": _recorded(
        _SSE
        + 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_Q2a8sWbYk1nN0","type":"function","function":{"name":"bash","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_R7c3tXdZm4pP1","type":"function","function":{"name":"bash","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\\"command\\":"}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"command\\":"}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\"echo one\\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\\"echo two\\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}\n\n'
        + _USAGE
        + "data: [DONE]\n\n"
    ),
    "text_then_tool": _recorded(
        _SSE
        + 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"content":"Let me check."},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_T9e5vZfAo6rR2","type":"function","function":{"name":"bash","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"command\\":\\"echo one\\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}\n\n'
        + _USAGE
        + "data: [DONE]\n\n"
    ),
    # A reasoning model: the reasoning is only counted (completion_tokens_details).
    "reasoning": _recorded(
        _SSE
        + 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"content":"The answer is 42."},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\n'
        'data: {@,"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":198,"total_tokens":1398,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":192,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}\n\n'
        "data: [DONE]\n\n"
    ),
    "refusal": _recorded(
        _SSE
        + 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"refusal":"I\'m sorry, "},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"refusal":"I can\'t help with that."},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\n'
        + _USAGE
        + "data: [DONE]\n\n"
    ),
    "error_before": http(
        b"HTTP/1.1 500 Internal Server Error\ncontent-type: application/json\nx-request-id: req_e500\n\n"
        b'{\n  "error": {\n    "message": "The server had an error while processing your request. Sorry about that!",\n'
        b'    "type": "server_error",\n    "param": null,\n    "code": null\n  }\n}\n'
    ),
    "error_mid": _recorded(
        _SSE
        + 'data: {@,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {@,"choices":[{"index":0,"delta":{"content":"The ans"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
        'data: {"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}\n\n'
    ),
    "rate_limit": http(
        b"HTTP/1.1 429 Too Many Requests\ncontent-type: application/json\nretry-after: 1\n"
        b"x-ratelimit-limit-requests: 3\nx-ratelimit-remaining-requests: 0\nx-ratelimit-reset-requests: 1s\n\n"
        b'{\n  "error": {\n    "message": "Rate limit reached for gpt-4.1-mini in organization org-x on requests per min (RPM): '
        b'Limit 3, Used 3, Requested 1. Please try again in 1s.",\n    "type": "requests",\n    "param": null,\n'
        b'    "code": "rate_limit_exceeded"\n  }\n}\n'
    ),
    "whole_text": http(
        b"HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
        b'{"id":"chatcmpl-BZ7xk","object":"chat.completion","created":1764950001,"model":"gpt-4.1-mini-2025-04-14",'
        b'"choices":[{"index":0,"message":{"role":"assistant","content":"The answer is 42.","refusal":null,"annotations":[]},'
        b'"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1200,"completion_tokens":6,"total_tokens":1206,'
        b'"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,'
        b'"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default",'
        b'"system_fingerprint":"fp_6f2eabb9a5"}'
    ),
    "whole_tool_call": http(
        b"HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
        b'{"id":"chatcmpl-BZ7xl","object":"chat.completion","created":1764950002,"model":"gpt-4.1-mini-2025-04-14",'
        b'"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_W1h7yBgCq8tT3",'
        b'"type":"function","function":{"name":"bash","arguments":"{\\"command\\":\\"echo one\\"}"}}],"refusal":null,'
        b'"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1200,'
        b'"completion_tokens":17,"total_tokens":1217},"service_tier":"default","system_fingerprint":"fp_6f2eabb9a5"}'
    ),
    "whole_parallel": http(
        b"HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
        b'{"id":"chatcmpl-BZ7xm","object":"chat.completion","created":1764950003,"model":"gpt-4.1-mini-2025-04-14",'
        b'"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_X2i8zChDr9uU4",'
        b'"type":"function","function":{"name":"bash","arguments":"{\\"command\\":\\"echo one\\"}"}},'
        b'{"id":"call_Y3j9aDiEs0vV5","type":"function","function":{"name":"bash","arguments":"{\\"command\\":\\"echo two\\"}"}}],'
        b'"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1200,'
        b'"completion_tokens":34,"total_tokens":1234},"service_tier":"default","system_fingerprint":"fp_6f2eabb9a5"}'
    ),
    "whole_error": http(
        b"HTTP/1.1 200 OK\ncontent-type: application/json\n\n"
        b'{"error":{"message":"The server had an error while processing your request. Sorry about that!",'
        b'"type":"server_error","param":null,"code":null}}'
    ),
}
