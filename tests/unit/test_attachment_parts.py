"""What a message's attachments become for the model: by their bytes, in each wire format, and
a PDF's text read in a child process with limits."""

from __future__ import annotations

import base64
import io
import sys
import time

import pypdf
import pytest

from app import attachments
from app.attachments import pdf_text
from app.compaction.plan import IMAGE_TOKENS, estimate_tokens
from app.providers import anthropic_format, openai_format
from app.providers.content import NO_VISION_NOTE, split
from app.storage.models import Attachment
from tests.fakes.pdfs import text_pdf
from tests.integration.test_images import png

PNG = png()
GIF = b"GIF89a" + b"\x01\x00\x01\x00\x00\x00\x00;"
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 20
WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 20


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (PNG, "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (WEBP, "image/webp"),
        (b"%PDF-1.4\n...", "application/pdf"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", None),  # never an image part: it can carry script
        (b"<html>", None),
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", None),
        (b"", None),
        (b"\x89PN", None),
    ],
)
def test_the_type_is_what_the_bytes_say(data, kind):
    assert attachments.sniffed(data) == kind


def row(
    name: str, data: bytes, media_type: str = "application/octet-stream", **fields
) -> tuple[Attachment, bytes]:
    return Attachment(
        id=f"id-{name}", ws_id="w", filename=name, media_type=media_type, sha256="", size=len(data), **fields
    ), data


def parts_for(*files: tuple[Attachment, bytes], text: str = "look") -> list[dict]:
    found = {r.id: (r, d) for r, d in files}
    sent = [attachments.summary(r) for r, _ in files]
    return attachments.parts(text, sent + [{"attachment_id": "gone", "filename": "old.txt"}], found.get)


def test_each_kind_of_file_becomes_what_the_model_can_take():
    pdf = row("r.pdf", b"%PDF-1.4 x", text="[page 1]\nhello pdf", pages=1)
    unread = row("s.pdf", b"%PDF-1.4 y", text_note="its text was not read: it is encrypted with a password")
    big = row("big.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * (4 * 1024 * 1024))
    out = parts_for(
        row("a.txt", PNG, "text/plain"),  # a PNG whatever it claims
        row("notes.md", "# ship ✓\n".encode()),
        row("blob.bin", bytes(range(256))),
        row("nul.txt", b"a\x00b"),
        pdf,
        unread,
        big,
    )
    assert out[0] == {"type": "text", "text": "look"}
    assert out[1]["text"] == f"\n\n[attached a.txt (image/png, {len(PNG)} bytes): attachment:id-a.txt]"
    assert out[2] == {
        "type": "image",
        "media_type": "image/png",
        "data": base64.b64encode(PNG).decode(),
        "attachment_id": "id-a.txt",
        "filename": "a.txt",
    }
    texts = [p["text"] for p in out[3:]]
    assert texts[0].endswith("its text follows): attachment:id-notes.md]\n# ship ✓\n")
    assert "blob.bin (application/octet-stream, 256 bytes; not text: read_file reads it)" in texts[1]
    assert "nul.txt (application/octet-stream, 3 bytes; not text" in texts[2]
    assert texts[3].endswith(
        "[attached r.pdf (PDF, 1 page; its text follows): attachment:id-r.pdf]\n[page 1]\nhello pdf"
    )
    assert "s.pdf (PDF, 10 bytes; its text was not read: it is encrypted with a password)" in texts[4]
    assert "big.png (image/png, 4,194,312 bytes: too large to show, the limit is 4,194,304 bytes)" in texts[5]
    assert texts[6] == "\n\n[attached old.txt (deleted since: not shown): attachment:gone]"


def test_a_long_text_is_cut_with_a_word_on_the_rest():
    (_, text) = parts_for(row("long.txt", b"x" * (attachments.INLINE_TEXT_CHARS + 5)))[:2]
    assert text["text"].endswith("\n[… 5 more characters: read_file reads the rest]")


def test_the_wire_formats_put_the_image_after_the_text_or_say_it_was_not_shown():
    message = {"role": "user", "content": parts_for(row("p.png", PNG, "image/png"))}
    data = base64.b64encode(PNG).decode()
    (sent,) = openai_format.convert_messages([message], supports_vision=True)
    assert sent["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    assert sent["content"][0]["text"].startswith("look\n\n[attached p.png")
    (blind,) = openai_format.convert_messages([message], supports_vision=False)
    assert blind["content"].endswith(
        f" (p.png: {NO_VISION_NOTE})\n\n[attached old.txt (deleted since: not shown): attachment:gone]"
    )
    (turn,) = anthropic_format.convert_messages([message], supports_vision=True, web_search=False)
    assert turn["role"] == "user"
    assert turn["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": data},
    }


def test_a_description_stands_in_for_the_image_where_it_cannot_be_seen():
    image = {
        "type": "image",
        "media_type": "image/png",
        "data": "AAAA",
        "filename": "i.png",
        "description": "a cat",
    }
    text, images = split([{"type": "text", "text": "see"}, image], supports_vision=False)
    assert images == [] and text == (
        f"see\n[i.png: {NO_VISION_NOTE}; a model that can view it describes it:]\n"
        "a cat\n[end of the description]"
    )
    text, images = split([{"type": "text", "text": "see"}, image], supports_vision=True)
    assert images == [image] and text == "see"
    failed = {**image, "description": None, "note": "the perception model could not describe it"}
    assert (
        split([failed], supports_vision=False)[0]
        == f" (i.png: {NO_VISION_NOTE}; the perception model could not describe it)"
    )


def test_an_image_counts_its_tokens_not_its_base64():
    big = {"type": "image", "media_type": "image/png", "data": "A" * 4_000_000}
    plain = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    with_image = [{"role": "user", "content": [{"type": "text", "text": "hi"}, big]}]
    assert estimate_tokens(with_image, []) - estimate_tokens(plain, []) < IMAGE_TOKENS + 20


def encrypted(password: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(text_pdf(["Hidden words"]))))
    writer.encrypt(user_password=password, owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("data", "text", "pages", "note"),
    [
        (text_pdf(["First page", "Second page"]), "[page 1]\nFirst page\n\n[page 2]\nSecond page", 2, None),
        (encrypted(""), "[page 1]\nHidden words", 1, None),  # copy-protected only: readable
        (encrypted("secret"), None, None, "its text was not read: it is encrypted with a password"),
        (text_pdf([""]), None, 1, "it has no text layer (a scan?)"),
        (
            b"%PDF-1.7\n" + b"\x00garbage" * 100,
            None,
            None,
            "its text was not read: the file is not a readable PDF",
        ),
        (
            b"%PDF-1.4\n1 0 obj\n" + b"[" * 200_000 + b"\nendobj\n%%EOF",
            None,
            None,
            "its text was not read: the file is not a readable PDF",
        ),
        (b"\xff\xfe\x00\x00" * 1000, None, None, "its text was not read: the file is not a readable PDF"),
    ],
)
def test_a_pdfs_text_is_read_in_a_child_or_the_note_says_why_not(data, text, pages, note):
    read = pdf_text.extract(data)
    assert (read.text, read.pages, read.note) == (text, pages, note)


def test_the_child_is_held_to_its_limits(tmp_path, monkeypatch):
    # Too little memory to parse: the child fails, the service says so and goes on.
    read = pdf_text.extract(text_pdf(["x"]), memory_mb=16)
    assert read.text is None and read.note.startswith("its text was not read:")
    # A reader that never answers is stopped at the deadline.
    stuck = tmp_path / "stuck.py"
    stuck.write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(pdf_text, "READER", stuck)
    monkeypatch.setattr(pdf_text, "DEADLINE_SECONDS", 1)
    started = time.monotonic()
    read = pdf_text.extract(b"%PDF-1.4")
    assert time.monotonic() - started < 10
    assert read == pdf_text.PdfText(None, None, "its text was not read: reading took over 1 s")
    # One that spins past its CPU seconds is killed by the kernel (SIGXCPU).
    spin = tmp_path / "spin.py"
    spin.write_text(
        "import resource, sys\ncpu = int(sys.argv[1])\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))\nwhile True:\n    pass\n"
    )
    monkeypatch.setattr(pdf_text, "READER", spin)
    monkeypatch.setattr(pdf_text, "DEADLINE_SECONDS", 30)
    read = pdf_text.extract(b"%PDF-1.4", cpu_seconds=1)
    assert read.note == "its text was not read: it took too long or too much memory"
    assert sys.platform == "linux"


def test_a_pdf_goes_as_a_document_to_a_model_that_reads_them_and_as_text_to_others():
    pdf = text_pdf(["Quarterly numbers"])
    (document,) = attachments.parts(
        "",
        [attachments.summary(row("q.pdf", pdf)[0])],
        {"id-q.pdf": row("q.pdf", pdf, text="[page 1]\nQuarterly numbers", pages=1)}.get,
    )[1:]
    message = {"role": "user", "content": [{"type": "text", "text": "read"}, document]}
    data = base64.b64encode(pdf).decode()
    (plain,) = openai_format.convert_messages([message], supports_vision=True)
    assert plain["content"].endswith(
        "(PDF, 1 page; its text follows): attachment:id-q.pdf]\n[page 1]\nQuarterly numbers"
    )
    (reading,) = openai_format.convert_messages([message], supports_vision=True, supports_pdf=True)
    assert reading["content"] == [
        {"type": "text", "text": f"read\n\n[attached q.pdf (PDF, {len(pdf)} bytes): attachment:id-q.pdf]"},
        {"type": "file", "file": {"filename": "q.pdf", "file_data": f"data:application/pdf;base64,{data}"}},
    ]
    (turn,) = anthropic_format.convert_messages(
        [message], supports_vision=True, web_search=False, supports_pdf=True
    )
    assert turn["content"][1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
        "title": "q.pdf",
    }
    (turn,) = anthropic_format.convert_messages([message], supports_vision=True, web_search=False)
    assert [b["type"] for b in turn["content"]] == ["text"] and "Quarterly numbers" in turn["content"][0][
        "text"
    ]
    # Counted as its text and a picture a page, not as its base64.
    assert estimate_tokens([message], []) < len(document["text"]) // 4 + IMAGE_TOKENS + 200


def test_a_pdf_over_the_document_limits_goes_as_its_text(monkeypatch):
    monkeypatch.setattr(attachments, "DOCUMENT_MAX_PAGES", 1)
    many = row("long.pdf", b"%PDF-1.4 x", text="[page 1]\na\n\n[page 2]\nb", pages=2)
    (part,) = attachments.parts("", [attachments.summary(many[0])], {"id-long.pdf": many}.get)[1:2]
    assert part["type"] == "text" and part["text"].endswith("[page 2]\nb")
