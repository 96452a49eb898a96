"""Recorded answers of the model servers people run, one module per family, written from each
project's published API documentation and source (each module names its sources). Every
module holds the same cases, so that one test runs against them all:

    text, tool_call, parallel, text_then_tool, reasoning, refusal, error_before, error_mid,
    rate_limit (streamed answers), whole_text, whole_tool_call, whole_parallel, whole_error
    (one JSON body answering a streamed request: the non-streaming path)

and what a person should see from them: MODEL, USAGE (the text case's, as stored),
REASONING, REFUSAL, RETRY_AFTER, ERROR_TEXT. The shared words: the text cases answer
"The answer is 42.", calls run bash `echo one` (and `echo two`), text before a call is
"Let me check.".
"""

from __future__ import annotations

import importlib
from types import ModuleType

FAMILIES = ("openai", "anthropic", "vllm", "llamacpp", "ollama", "tgi", "deepseek", "litellm", "openrouter")
CASES = (
    "text",
    "tool_call",
    "parallel",
    "text_then_tool",
    "reasoning",
    "refusal",
    "error_before",
    "error_mid",
    "rate_limit",
    "whole_text",
    "whole_tool_call",
    "whole_parallel",
    "whole_error",
)
ANSWER = "The answer is 42."
BEFORE_CALL = "Let me check."


def family(name: str) -> ModuleType:
    return importlib.import_module(f"tests.providers.wire.{name}")
