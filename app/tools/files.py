"""Files as the file tools see them: paths resolved against the working directory,
the read-before-edit set, binary sniffing, and text loaded and saved byte for byte.
"""

from __future__ import annotations

import os
import secrets
import stat
from typing import Any

from app.storage.types import UNSTORABLE
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
    """The string argument `key`, or `FileToolError` naming what is wrong with it.

    An optional path given as "" counts as not given: models fill optional fields so.
    """
    value = args.get(key)
    if value in (None, "") and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise FileToolError(f"Error: {tool} needs a non-empty '{key}' string")
    if "\0" in value:
        raise FileToolError(f"Error: '{key}' contains a NUL character, which no path can hold")
    if found := UNSTORABLE.search(value):
        raise FileToolError(
            f"Error: '{key}' contains a lone surrogate (U+{ord(found.group()):04X}), which is not a "
            "character; send the path as text"
        )
    return value


def check_text(value: str, key: str, tool: str, where: str = "") -> None:
    """`FileToolError` if the text argument `key` holds a NUL (binary content) or a lone surrogate
    (no character at all): stored call arguments rewrite both (UNSTORABLE), so a call taking them
    would write one thing when it runs at once and another once approved."""
    found = UNSTORABLE.search(value)
    if found is None:
        return
    if found.group() == "\0":
        raise FileToolError(
            f"Error: {where}'{key}' contains a NUL character; {tool} handles text only, so write "
            "binary content with bash (printf with \\x escapes, or base64 -d)"
        )
    raise FileToolError(
        f"Error: {where}'{key}' contains a lone surrogate (U+{ord(found.group()):04X}), which is not "
        "a character and cannot be written as UTF-8; send the text itself (a character past U+FFFF "
        "as both halves of its surrogate pair)"
    )


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
    if not os.path.isfile(resolved):
        # A FIFO would block the reader forever, a device could stream without end.
        raise FileToolError(f"Error: {shown} is not a regular file (a pipe, socket or device)")


def check_target(resolved: str, shown: str) -> None:
    """`FileToolError` unless `resolved` may be written: a regular file, or nothing yet."""
    if os.path.isdir(resolved):
        raise FileToolError(f"Error: {shown} is a directory, not a file")
    if os.path.exists(resolved):
        check_file(resolved, shown)


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
    temp = os.path.join(folder, f".turnstone-{secrets.token_hex(8)}.tmp")
    kept = _mode_of(resolved)
    # A new file's mode is left to the kernel's umask: reading the umask means setting
    # it, and tools run on several threads. An existing file's temp starts private and
    # gets the file's bits before it takes its place.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if kept is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(text.encode(ENCODING, ROUND_TRIP))
            if kept is not None:
                os.fchmod(file.fileno(), kept)
        os.replace(temp, resolved)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _mode_of(resolved: str) -> int | None:
    """The permission bits of an existing file, or None when there is none yet."""
    try:
        return stat.S_IMODE(os.stat(resolved).st_mode)
    except FileNotFoundError:
        return None
