"""Neutral messages turned into the OpenAI chat wire format. They already are it,
except for images: a `tool` message takes text only, so the images of a run of
tool results follow it in one `user` message; a user message's own images (its
attachments) are `image_url` parts after its text."""

from __future__ import annotations

from typing import Any

from app.providers.content import SERVER_BLOCKS, SharedMessage, split


def convert_messages(
    messages: list[dict], *, supports_vision: bool, supports_pdf: bool = False
) -> list[dict]:
    converted: list[dict] = []
    images: list[dict[str, Any]] = []  # parts for the user message after this run of tool results
    for message in messages:
        if message["role"] != "tool" and images:
            converted.append({"role": "user", "content": images})
            images = []
        if message["role"] == "tool" and isinstance(message.get("content"), list):
            text, parts = split(message["content"], supports_vision)
            converted.append({**message, "content": text})
            images.extend(_image_parts(message["tool_call_id"], text, parts))
        elif message["role"] == "user" and isinstance(message.get("content"), list):
            converted.append(_user(message, supports_vision, supports_pdf))
        elif SERVER_BLOCKS in message:  # another provider's server blocks mean nothing here
            converted.append({k: v for k, v in message.items() if k != SERVER_BLOCKS})
        else:  # already the wire format: sent as it is (read, never changed)
            converted.append(message)
    if images:
        converted.append({"role": "user", "content": images})
    return converted


def _user(message: dict, supports_vision: bool, supports_pdf: bool) -> dict:
    """A user message with parts (its attachments): its text, then its images as data URLs and
    its PDFs as `file` parts where the model takes them (made once for a message many steps send)."""
    if isinstance(message, SharedMessage):
        key = ("openai-user", supports_vision, supports_pdf)
        return message.derived(key, lambda m: _user_parts(m, supports_vision, supports_pdf))
    return _user_parts(message, supports_vision, supports_pdf)


def _user_parts(message: dict, supports_vision: bool, supports_pdf: bool) -> dict:
    text, media = split(message["content"], supports_vision, supports_pdf)
    if not media:
        return {"role": "user", "content": text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for part in media:
        url = f"data:{part['media_type']};base64,{part['data']}"
        if part["type"] == "document":
            parts.append(
                {
                    "type": "file",
                    "file": {"filename": part.get("filename") or "document.pdf", "file_data": url},
                }
            )
        else:
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts}


def _image_parts(call_id: str, text: str, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        url = f"data:{part['media_type']};base64,{part['data']}"
        out.append({"type": "text", "text": f"Image from {call_id}: {text}"})
        out.append({"type": "image_url", "image_url": {"url": url}})
    return out
