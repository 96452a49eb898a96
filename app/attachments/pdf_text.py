"""A PDF's text, read in a child process with limits: a PDF is a program-like format from
anyone, and its parser (pypdf) runs on what a person uploaded. The child (`pdf_reader.py`,
which imports nothing of the service) sets its own limits before it reads a byte: CPU seconds,
address space, no files written, few open files; the parent gives it a wall-clock deadline too.
What it finds is kept on the attachment, so a PDF is read once, when it is attached."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

READER = Path(__file__).with_name("pdf_reader.py")
DEADLINE_SECONDS = 30  # wall clock, past the child's CPU limit (it waits on nothing)
MAX_TEXT_CHARS = 1_000_000  # kept per PDF; a message carries less (INLINE_TEXT_CHARS)
MAX_OUTPUT_BYTES = 4 * MAX_TEXT_CHARS + 4096  # the child's JSON answer, read whole


@dataclass(frozen=True)
class PdfText:
    text: str | None  # None: unread, `note` says why
    pages: int | None
    note: str | None


def extract(data: bytes, cpu_seconds: int = 20, memory_mb: int = 1024) -> PdfText:
    """The PDF's text and page count, or why there is none."""
    command = [sys.executable, "-I", str(READER), str(cpu_seconds), str(memory_mb), str(MAX_TEXT_CHARS)]
    try:
        done = subprocess.run(command, input=data, capture_output=True, timeout=DEADLINE_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return PdfText(None, None, f"its text was not read: reading took over {DEADLINE_SECONDS} s")
    except OSError as exc:
        return PdfText(None, None, f"its text was not read: the reader did not start ({exc.strerror})")
    if done.returncode != 0 or len(done.stdout) > MAX_OUTPUT_BYTES:
        why = (
            "it took too long or too much memory" if done.returncode < 0 else "the file is not a readable PDF"
        )
        return PdfText(None, None, f"its text was not read: {why}")
    try:
        answer = json.loads(done.stdout)
        text, pages, note = answer.get("text"), answer.get("pages"), answer.get("note")
    except (ValueError, AttributeError):
        return PdfText(None, None, "its text was not read: the reader's answer was garbled")
    if not isinstance(pages, int) or not (text is None or isinstance(text, str)):
        return PdfText(None, None, "its text was not read: the reader's answer was garbled")
    if text is None:
        return PdfText(None, None, f"its text was not read: {note if isinstance(note, str) else 'unknown'}")
    clean = text.replace("\x00", "").encode("utf-8", "replace").decode() if text is not None else None
    if clean is not None and not clean.strip():
        return PdfText(None, pages, "it has no text layer (a scan?)")
    return PdfText(clean, pages, note if isinstance(note, str) else None)
