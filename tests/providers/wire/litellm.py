"""The LiteLLM proxy's OpenAI-compatible endpoint, here in front of an Anthropic model.

Sources: BerriAI/litellm, litellm/types/utils.py (ModelResponseStream, Delta with its
`function_call`, `audio` and `provider_specific_fields`, StreamingChoices, Usage) and
proxy/proxy_server.py (async_data_generator: an exception mid-stream is sent as `data:
{"error": {...}}`, its `code` a string), the proxy's rate limiter (429 with a `retry-after`
header) and its error bodies (`{"error": {"message", "type", "param", "code"}}`, the backend's
exception named in the message). Usage comes on a last chunk whose delta is empty; calls from an
Anthropic backend keep Anthropic's `toolu_` ids; thinking is translated to `reasoning_content`.
"""

from tests.fakes.replay_server import http

MODEL = "claude-sonnet"
USAGE = {"input_tokens": 1200, "output_tokens": 6}
REASONING = "The user wants the answer."
REFUSAL = "I can't help with that."
RETRY_AFTER = 1.0
ERROR_TEXT = "litellm.InternalServerError: AnthropicException - Overloaded."

_ENVELOPE = '"id":"chatcmpl-2a9c0f3e-7b1d-4e8a-9c2f-3d4e5f6a7b8c","created":1764950000,"model":"claude-sonnet","object":"chat.completion.chunk","system_fingerprint":null'
_SSE = "HTTP/1.1 200 OK\ndate: Sat, 05 Dec 2026 21:00:00 GMT\nserver: uvicorn\ncontent-type: text/event-stream; charset=utf-8\nx-litellm-call-id: 0c1d2e3f\nx-litellm-model-api-base: https://api.anthropic.com/v1/messages\n\n"
_DONE = "data: [DONE]\n\n"
_USAGE = 'data: {@,"choices":[{"index":0,"delta":{}}],"usage":{"completion_tokens":6,"prompt_tokens":1200,"total_tokens":1206,"completion_tokens_details":null,"prompt_tokens_details":{"audio_tokens":null,"cached_tokens":0}}}\n\n'


def _delta(delta: str, finish: str = "null") -> str:
    return f'data: {{@,"choices":[{{"finish_reason":{finish},"index":0,"delta":{delta}}}]}}\n\n'


def _content(text: str) -> str:
    return _delta(
        f'{{"provider_specific_fields":null,"content":"{text}","role":"assistant","function_call":null,"tool_calls":null,"audio":null}}'
    )


def _end(reason: str) -> str:
    return _delta(
        '{"provider_specific_fields":null,"content":null,"role":null,"function_call":null,"tool_calls":null,"audio":null}',
        f'"{reason}"',
    )


def _call(index: int, call_id: str, *pieces: str) -> str:
    out = _delta(
        f'{{"content":null,"role":"assistant","function_call":null,"tool_calls":[{{"id":"{call_id}","function":{{"arguments":"","name":"bash"}},"type":"function","index":{index}}}],"audio":null}}'
    )
    for piece in pieces:
        out += _delta(
            f'{{"content":null,"role":null,"function_call":null,"tool_calls":[{{"id":null,"function":{{"arguments":"{piece}","name":null}},"type":"function","index":{index}}}],"audio":null}}'
        )
    return out


def _recorded(raw: str):  # type: ignore[no-untyped-def]
    return http(raw.replace("{@", "{" + _ENVELOPE).encode())


_ERROR = '{"error":{"message":"litellm.InternalServerError: AnthropicException - Overloaded. Handle with `litellm.InternalServerError`.","type":null,"param":null,"code":"500"}}'
_JSON = "HTTP/1.1 200 OK\nserver: uvicorn\ncontent-type: application/json\n\n"
_WHOLE = '{"id":"chatcmpl-3b0d","created":1764950001,"model":"claude-sonnet","object":"chat.completion","system_fingerprint":null,"choices":[{"finish_reason":"%s","index":0,"message":'
_WHOLE_END = '}],"usage":{"completion_tokens":6,"prompt_tokens":1200,"total_tokens":1206}}'


def _whole_call(call_id: str, command: str, index: int = 0) -> str:  # index: the Anthropic block's
    return f'{{"index":{index},"function":{{"arguments":"{{\\"command\\": \\"{command}\\"}}","name":"bash"}},"id":"{call_id}","type":"function"}}'


CASES = {
    "text": _recorded(_SSE + _content("The answer") + _content(" is 42.") + _end("stop") + _USAGE + _DONE),
    "tool_call": _recorded(
        _SSE
        + _call(0, "toolu_01Fq2be9eXFZdL4", "", '{\\"command\\": \\"echo', ' one\\"}')
        + _end("tool_calls")
        + _USAGE
        + _DONE
    ),
    "parallel": _recorded(
        _SSE
        + _call(0, "toolu_01Gr3cf0fYGAeM5", '{\\"command\\": \\"echo one\\"}')
        + _call(1, "toolu_01Hs4dg1gZHBfN6", '{\\"command\\": \\"echo two\\"}')
        + _end("tool_calls")
        + _USAGE
        + _DONE
    ),
    "text_then_tool": _recorded(
        _SSE
        + _content("Let me check.")
        + _call(1, "toolu_01It5eh2hAICgO7", '{\\"command\\": \\"echo one\\"}')
        + _end("tool_calls")
        + _USAGE
        + _DONE
    ),
    "reasoning": _recorded(
        _SSE
        + _delta(
            '{"reasoning_content":"The user wants","thinking_blocks":[{"type":"thinking","thinking":"The user wants","signature":null}],"content":"","role":"assistant"}'
        )
        + _delta(
            '{"reasoning_content":" the answer.","thinking_blocks":[{"type":"thinking","thinking":" the answer.","signature":null}],"content":""}'
        )
        + _content("The answer is 42.")
        + _end("stop")
        + _USAGE
        + _DONE
    ),
    "refusal": _recorded(
        _SSE + _content("I can't help") + _content(" with that.") + _end("stop") + _USAGE + _DONE
    ),
    "error_before": _recorded(
        "HTTP/1.1 500 Internal Server Error\nserver: uvicorn\ncontent-type: application/json\n\n" + _ERROR
    ),
    "error_mid": _recorded(_SSE + _content("The ans") + "data: " + _ERROR + "\n\n"),
    "rate_limit": _recorded(
        "HTTP/1.1 429 Too Many Requests\nserver: uvicorn\ncontent-type: application/json\nretry-after: 1\n\n"
        '{"error":{"message":"Max parallel request limit reached. Hit limit for api_key: 88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b. current max_parallel_requests: 1","type":"None","param":"None","code":"429"}}'
    ),
    "whole_text": _recorded(
        _JSON
        + _WHOLE % "stop"
        + '{"content":"The answer is 42.","role":"assistant","tool_calls":null,"function_call":null}'
        + _WHOLE_END
    ),
    "whole_tool_call": _recorded(
        _JSON
        + _WHOLE % "tool_calls"
        + '{"content":null,"role":"assistant","tool_calls":['
        + _whole_call("toolu_01Ju6fi3", "echo one")
        + '],"function_call":null}'
        + _WHOLE_END
    ),
    "whole_parallel": _recorded(
        _JSON
        + _WHOLE % "tool_calls"
        + '{"content":null,"role":"assistant","tool_calls":['
        + _whole_call("toolu_01Kv7gj4", "echo one")
        + ","
        + _whole_call("toolu_01Lw8hk5", "echo two", 1)
        + '],"function_call":null}'
        + _WHOLE_END
    ),
    "whole_error": _recorded(_JSON + _ERROR),
}
