"""Image content in a tool result: the marker read_file returns to a model with vision.

A `ToolOutcome` carries text only, so an image travels as one JSON object,
`{"type": "image", "media_type": ..., "path": ..., "size": ..., "data": <base64>}`.
`image_content()` recognises it (the conversation turns it into image parts for
the providers); `summary()` is the short line to show wherever megabytes of
base64 would do harm (events sent to browsers, logs).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Any

MAX_IMAGE_BYTES = 4 * 1024 * 1024  # 4 MiB, larger images are refused
MAX_DATA_CHARS = 4 * -(-MAX_IMAGE_BYTES // 3)  # the base64 of the largest image
MAX_MARKER_CHARS = MAX_DATA_CHARS + 64 * 1024  # room for the other fields, a long path included
MARKER_TYPE = "image"
MARKER_PREFIX = '{"type": "image"'  # what json.dumps writes first, so most text is rejected cheaply
MARKER_KEYS = frozenset({"type", "media_type", "path", "size", "data"})
MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".tiff": "image/tiff",
    ".tif": "image/tiff",
    ".ico": "image/vnd.microsoft.icon",
}


def media_type(path: str) -> str | None:
    """The image type its extension names (any case), or None for every other file (SVG too)."""
    return MEDIA_TYPES.get(os.path.splitext(path)[1].lower())


def marker(path: str, media: str, data: bytes) -> str:
    return json.dumps(
        {
            "type": MARKER_TYPE,
            "media_type": media,
            "path": path,
            "size": len(data),
            "data": base64.b64encode(data).decode("ascii"),
        }
    )


def image_content(output: str) -> dict[str, Any] | None:
    """The image a tool result carries, or None when it is ordinary text.

    Only a well-formed marker within the size cap counts: whatever passes is sent
    to a model whole, so a forged or broken one must stay text.
    """
    if not output.startswith(MARKER_PREFIX) or len(output) > MAX_MARKER_CHARS:
        return None
    try:
        value = json.loads(output)
    except json.JSONDecodeError:
        return None
    return value if _is_well_formed(value) else None


def summary(text: str) -> str:
    """One short line for an image marker (`[image: a.png, image/png, 12,345 bytes]`);
    any other text unchanged."""
    image = image_content(text)
    return text if image is None else describe(image)


def describe(image: dict[str, Any]) -> str:
    return f"[image: {image['path']}, {image['media_type']}, {image['size']:,} bytes]"


def _is_well_formed(value: Any) -> bool:
    if not (isinstance(value, dict) and set(value) == MARKER_KEYS and value["type"] == MARKER_TYPE):
        return False
    size, data = value["size"], value["data"]
    if value["media_type"] not in MEDIA_TYPES.values() or not isinstance(value["path"], str):
        return False
    if isinstance(size, bool) or not isinstance(size, int) or not isinstance(data, str):
        return False
    if len(data) > MAX_DATA_CHARS:
        return False
    try:
        return len(base64.b64decode(data, validate=True)) == size
    except (binascii.Error, ValueError):
        return False
