"""Run as a child (app/attachments/pdf_text.py): a PDF on stdin, `{"pages", "text", "note"}` as
JSON on stdout. It limits itself first, and imports nothing of the service."""

import io
import json
import resource
import sys


def main() -> int:
    cpu_seconds, memory_mb, max_chars = (int(a) for a in sys.argv[1:4])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
    data = sys.stdin.buffer.read()
    import pypdf  # after the limits: the parser's own imports count too

    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not _opened(reader):
            print(json.dumps({"pages": 0, "text": None, "note": "it is encrypted with a password"}))
            return 0
        texts, size, note = [], 0, None
        for number, page in enumerate(reader.pages, 1):
            text = page.extract_text() or ""
            texts.append(f"[page {number}]\n{text}")
            size += len(text)
            if size > max_chars:
                note = f"cut at page {number} of {len(reader.pages)}"
                break
        joined = "\n\n".join(texts)[:max_chars] if size else ""  # no text layer: no page markers
        print(json.dumps({"pages": len(reader.pages), "text": joined, "note": note}))
    except Exception:  # noqa: BLE001 - whatever a hostile file makes the parser raise: unreadable
        return 3
    return 0


def _opened(reader) -> bool:
    """An encrypted PDF with an empty user password opens (many are only copy-protected)."""
    try:
        return bool(reader.decrypt(""))
    except Exception:  # noqa: BLE001 - any failure means it stays closed
        return False


if __name__ == "__main__":
    sys.exit(main())
