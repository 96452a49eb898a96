"""Neutral message content: a string, or a list of parts, `{"type": "text", "text": ...}`
and `{"type": "image", "media_type": ..., "data": <base64>}`; and which images a model is sent."""

from __future__ import annotations

from typing import Any

# The image types that both wire formats (OpenAI chat, Anthropic Messages) accept;
# sending another makes the request fail, and so every later turn of the workstream.
SENDABLE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
NO_VISION_NOTE = "not shown: the current model cannot view images"
UNSENDABLE_NOTE = "not shown: {media_type} images cannot be sent to the model"
# An assistant message's key for the blocks its provider ran itself (see ModelEvent "server_block").
SERVER_BLOCKS = "server_blocks"


def text_of(content: Any) -> str:
    """A message's text; of a list of parts, only the text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def split(content: Any, supports_vision: bool) -> tuple[str, list[dict[str, Any]]]:
    """The text to send and the image parts that go with it.

    An image held back (the model cannot see, or the type is not accepted)
    leaves a note in the text, so the model knows it was not shown.
    """
    if not isinstance(content, list):
        return text_of(content), []
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            texts.append(part.get("text", ""))
        elif part.get("type") == "image":
            note = _held_back(part, supports_vision)
            if note is None:
                images.append(part)
            else:
                texts.append(f" ({note})")
    return "".join(texts), images


def _held_back(image: dict[str, Any], supports_vision: bool) -> str | None:
    if not supports_vision:
        return NO_VISION_NOTE
    if image.get("media_type") not in SENDABLE_MEDIA_TYPES:
        return UNSENDABLE_NOTE.format(media_type=image.get("media_type"))
    return None
