"""Model providers: stream one reply from an OpenAI-compatible or Anthropic model
as neutral `ModelEvent`s. `stream_reply` is the entry point."""

from app.providers.errors import (
    ContextWindowError,
    ModelError,
    ModelNotConfiguredError,
    ModelRequestError,
    ModelUnavailableError,
)
from app.providers.reply import Text, reply_text, stream_reply
from app.providers.reply_parts import ModelEvent, ToolCallRequest

__all__ = [
    "ContextWindowError",
    "ModelError",
    "ModelEvent",
    "ModelNotConfiguredError",
    "ModelRequestError",
    "ModelUnavailableError",
    "Text",
    "ToolCallRequest",
    "reply_text",
    "stream_reply",
]
