"""Files as the file tools see them: paths resolved against the working directory,
the read-before-edit set, binary sniffing, and text loaded and saved byte for byte.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from app.tools.base import ToolContext

SNIFF_BYTES = 8192  # a NUL byte in this much of the head marks a file as binary
ENCODING = "utf-8"
# Undecodable bytes survive a load and save unchanged (edits never corrupt them).
ROUND_TRIP = "surrogateescape"


class FileToolError(Exception):
    """A file cannot be used as asked; the message is the model-facing error text."""


def resolve(path: str, ctx: ToolContext) -> str:
    """`path` as an absolute, canonical path: relative ones start at the working directory."""
    expanded = os.path.expanduser(path)
    return os.path.realpath(os.path.join(ctx.working_dir, expanded))


def path_argument(args: dict[str, Any], key: str, tool: str, required: bool = True) -> str | None:
    """The string argument `key`, or `FileToolError` naming what is wrong with it."""
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FileToolError(f"Error: {tool} needs a non-empty '{key}' string")
    return value


def mark_read(ctx: ToolContext, resolved: str) -> None:
    ctx.read_paths.add(resolved)


def has_read(ctx: ToolContext, resolved: str) -> bool:
    return resolved in ctx.read_paths


def is_binary(head: bytes) -> bool:
    return b"\x00" in head[:SNIFF_BYTES]


def check_file(resolved: str, shown: str) -> None:
    """`FileToolError` unless `resolved` is an existing regular file."""
    if os.path.isdir(resolved):
        raise FileToolError(f"Error: {shown} is a directory, not a file")
    if not os.path.exists(resolved):
        raise FileToolError(f"Error: file not found: {shown}")


def load_text(resolved: str, shown: str) -> str:
    """The whole file as text, line endings untouched; binary files refused."""
    check_file(resolved, shown)
    with open(resolved, "rb") as file:
        data = file.read()
    if is_binary(data):
        raise FileToolError(binary_refusal(shown))
    return data.decode(ENCODING, ROUND_TRIP)


def binary_refusal(shown: str) -> str:
    return (
        f"Error: {shown} is a binary file (it contains NUL bytes), so it cannot be shown as text; "
        f"inspect it with bash instead (for example `file {shown}` or `xxd {shown} | head`)"
    )


def save_text(resolved: str, text: str) -> None:
    """Replace the file's content in one step: readers see the old or the new, never half.

    The file keeps its permission bits; a new file gets the usual ones (umask).
    """
    folder = os.path.dirname(resolved)
    os.makedirs(folder, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".turnstone-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(text.encode(ENCODING, ROUND_TRIP))
        _copy_mode(resolved, temp)
        os.replace(temp, resolved)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _copy_mode(original: str, temp: str) -> None:
    try:
        mode = os.stat(original).st_mode
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)
        return
    os.chmod(temp, mode & 0o7777)
