"""Previews alone: what kind some bytes make, the per-kind caps, signed links and the headers
that keep content inert, and open_preview's checks before anything is read or fetched."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from app.previews import kinds, links
from app.previews.kinds import KindError, classify
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.models import Preview, Workstream
from app.tools import open_preview
from app.tools.core.base import ToolContext
from app.tools.web.fetch import Fetcher
from tests.unit.test_fetcher import PUBLIC_IP, FakeInternet, FakeResolver, Site, page

TSV = "text/tab-separated-values; charset=utf-8"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


def row(kind: str = "web", media_type: str = "text/html; charset=utf-8") -> Preview:
    return Preview(
        id="p1", ws_id="w", kind=kind, title="Shore birds", media_type=media_type, source="s",
        sha256="0" * 64, size=1, signing_key="k" * 64,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("data", "name", "declared", "kind", "media_type"),
    [
        (b"%PDF-1.7\n...", "x.bin", "", "pdf", "application/pdf"),
        (PNG, "photo", "", "image", "image/png"),
        (b"\xff\xd8\xff\xe0rest", "", "", "image", "image/jpeg"),
        (b"RIFF\0\0\0\0WEBPVP8 ", "", "", "image", "image/webp"),
        (b"  <!DOCTYPE html><p>x", "page.txt", "text/plain", "web", "text/html; charset=utf-8"),
        (b"a,b\n1,2\n", "t.csv", "", "table", "text/csv; charset=utf-8"),
        (
            b"a\tb\n1\t2\n",
            "t.txt",
            "text/tab-separated-values",
            "table",
            "text/tab-separated-values; charset=utf-8",
        ),
        (json.dumps([{"a": 1}]).encode(), "rows.json", "", "table", "application/json"),
        (json.dumps({"a": 1}).encode(), "obj.json", "", "text", "text/plain; charset=utf-8"),
        (b"[" * 100_000, "deep.json", "", "text", "text/plain; charset=utf-8"),
        (b"# Title\n", "README.md", "", "markdown", "text/plain; charset=utf-8"),
        (b"# Title\n", "", "TEXT/MARKDOWN", "markdown", "text/plain; charset=utf-8"),
        (b"<svg onload=alert(1)>", "x.svg", "image/svg+xml", "text", "text/plain; charset=utf-8"),
        (b"plain words", "", "", "text", "text/plain; charset=utf-8"),
    ],
)
def test_kinds_are_detected_from_content_then_type_then_name(data, name, declared, kind, media_type):
    assert classify(data, name, declared) == kinds.Classified(kind, media_type)


def test_the_kind_asked_for_wins_when_the_bytes_allow_it():
    assert classify(b"<!doctype html><b>x</b>", "p.html", "", "text").kind == "text"
    assert classify(b"a,b\n", "x.txt", "", "table").media_type == "text/csv; charset=utf-8"
    with pytest.raises(KindError, match="not a PDF"):
        classify(b"hello", kind="pdf")
    with pytest.raises(KindError, match="not an image this pane shows"):
        classify(b"hello", kind="image")


def test_a_page_in_its_own_encoding_is_served_as_the_site_said():
    found = classify("<html><p>café".encode("latin-1"), "", "text/html", charset='latin-1"\r\nX: y')
    assert found == kinds.Classified("web", "text/html; charset=latin-1X:y")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x01\x02binary", "cannot preview binary data"),
        (b"\xff\xfe\x00t", "cannot preview binary data"),
        (b"a" * (512 * 1024 + 1), "too large to preview as text: 524,289 bytes, the limit is 524,288"),
        (PNG + b"\0" * (4 * 1024 * 1024), "too large to preview as image"),
    ],
)
def test_what_cannot_be_shown_is_refused_with_the_reason(data, message):
    with pytest.raises(KindError, match=message):
        classify(data)


def test_caps_follow_the_spec():
    mib = 1024 * 1024
    assert {
        "web": 4 * mib, "pdf": 32 * mib, "image": 4 * mib, "table": 2 * mib, "text": mib // 2,
        "markdown": mib // 2,
    } == kinds.MAX_BYTES  # fmt: skip


# -- links and headers -------------------------------------------------------------------------


def parts(link: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in link.split("?", 1)[1].split("&"))


def test_a_link_opens_its_preview_until_it_expires():
    preview = row()
    link = links.content_link(preview, remote=True, now=1000)
    q = parts(link)
    assert link.startswith("/v1/api/previews/p1/content?") and q["exp"] == str(1000 + links.LINK_SECONDS)
    assert links.is_valid(preview, q["exp"], q["remote"], q["sig"], now=1000)
    assert not links.is_valid(preview, q["exp"], q["remote"], q["sig"], now=1000 + links.LINK_SECONDS + 1)
    assert not links.is_valid(preview, q["exp"], "0", q["sig"], now=1000)
    other = row()
    other.signing_key = "j" * 64
    assert not links.is_valid(other, q["exp"], q["remote"], q["sig"], now=1000)
    for exp, remote, sig in (
        ("-1", "1", q["sig"]),
        ("1e9", "1", q["sig"]),
        (q["exp"], "2", q["sig"]),
        ("9" * 40, "1", ""),
    ):
        assert not links.is_valid(preview, exp, remote, sig, now=1000)


def test_pages_are_sandboxed_and_load_nothing_remote_unless_asked():
    off = links.headers(row(), remote=False)["Content-Security-Policy"]
    on = links.headers(row(), remote=True)["Content-Security-Policy"]
    for policy in (off, on):
        assert policy.startswith("sandbox; default-src 'none';") and "frame-ancestors 'self'" in policy
        assert "script-src" not in policy
    assert "img-src data:;" in off and "style-src 'unsafe-inline';" in off and "*" not in off
    assert "img-src * data: blob:" in on and "style-src * 'unsafe-inline'" in on


def test_other_kinds_are_sandboxed_and_pdfs_framed_only_by_us():
    table = links.headers(row("table", "text/csv; charset=utf-8"), remote=False)
    assert table["Content-Security-Policy"] == "sandbox; default-src 'none'; frame-ancestors 'self'"
    assert table["Content-Disposition"] == "inline; filename*=UTF-8''Shore_birds.csv"
    assert table["X-Content-Type-Options"] == "nosniff" and table["Referrer-Policy"] == "no-referrer"
    assert (
        links.headers(row("pdf", "application/pdf"), False)["Content-Security-Policy"]
        == "frame-ancestors 'self'"
    )


def test_remote_content_resolves_against_the_pages_own_site():
    page = b"<!doctype html><HTML><Head lang=en><title>t</title></head>"
    based = links.with_base(page, 'https://birds.example/a?b="c"')
    assert based == (
        b'<!doctype html><HTML><Head lang=en><base href="https://birds.example/a?b=&quot;c&quot;">'
        b"<title>t</title></head>"
    )
    assert links.with_base(b"<p>no head", "https://x.example/").startswith(
        b'<base href="https://x.example/">'
    )


# -- open_preview's checks ---------------------------------------------------------------------


def ctx(tmp_path, allow_private: bool = False) -> ToolContext:
    return ToolContext("ws", str(tmp_path), fetcher=Fetcher(allow_private=allow_private))


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({}, "Error: open_preview needs a non-empty 'target' string"),
        ({"target": "  "}, "Error: open_preview needs a non-empty 'target' string"),
        ({"target": 5}, "Error: open_preview needs a non-empty 'target' string"),
        ({"target": "a\0b"}, "Error: 'target' contains a NUL character"),
        (
            {"target": "a", "kind": "video"},
            "Error: kind must be one of web, pdf, image, table, text, markdown",
        ),
        ({"target": "a", "kind": ["web"]}, "Error: kind must be one of"),
        ({"target": "a", "title": 3}, "Error: title must be a string of at most 200 characters"),
        ({"target": "a", "title": "x" * 201}, "Error: title must be a string of at most 200 characters"),
        ({"target": "a", "title": "a\0"}, "Error: title must be a string"),
        ({"target": "/etc/passwd"}, "Error: /etc/passwd is outside the workstream's folder"),
        ({"target": "http://169.254.169.254/latest"}, "Refused: 169.254.169.254 is a cloud metadata address"),
        ({"target": "http://127.0.0.1:9/"}, "Refused: 127.0.0.1 is a loopback address"),
    ],
)
def test_bad_arguments_are_an_error_before_anyone_is_asked(tmp_path, args, error):
    prep = open_preview.prepare(args, ctx(tmp_path))
    assert prep.error is not None and prep.error.startswith(error), prep.error
    assert prep.needs_approval is False


def test_only_urls_need_approval(tmp_path):
    (tmp_path / "a.md").write_text("# hi")
    assert open_preview.prepare({"target": "a.md"}, ctx(tmp_path)).needs_approval is False
    assert open_preview.prepare({"target": "attachment:abc"}, ctx(tmp_path)).needs_approval is False
    web = open_preview.prepare({"target": "http://127.0.0.1:9/x", "title": " A  title "}, ctx(tmp_path, True))
    assert web.needs_approval is True and web.error is None and web.args["title"] == "A title"
    assert "allowed because tools.allow_private_network is on" in web.preview


def test_without_storage_it_says_so(tmp_path):
    (tmp_path / "a.md").write_text("# hi")
    outcome = open_preview.execute({"target": "a.md"}, ctx(tmp_path))
    assert outcome.is_error and outcome.output == open_preview.NO_STORAGE


@pytest.fixture
def db(tmp_path) -> Iterator[Database]:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    database = Database(url)
    with database.session() as s:
        s.add(Workstream(id="ws", name="w", working_dir=str(tmp_path)))
    yield database
    database.dispose()


def test_a_url_that_turns_private_after_approval_is_not_fetched(tmp_path, db):
    public, private = Site({"/": page("<title>public</title>")}), Site({"/": page("<title>admin</title>")})
    try:
        # Public when the call is prepared, private from then on.
        resolver = FakeResolver(svc_test=[[PUBLIC_IP], ["127.0.0.1"]])
        fetcher = Fetcher(
            resolver=resolver, dialer=FakeInternet({PUBLIC_IP: public.port}), allow_private=True
        )
        context = ToolContext("ws", str(tmp_path), fetcher=fetcher, db=db)
        url = private.url("/", host="svc.test")
        prep = open_preview.prepare({"target": url}, context)
        assert prep.needs_approval and prep.error is None and "Private network" not in prep.preview
        outcome = open_preview.execute(json.loads(json.dumps(prep.args)), context)  # as stored, approved
        assert outcome.is_error and outcome.output == (
            "Refused: svc.test resolves to 127.0.0.1, a loopback address, but it was public when "
            "this call was prepared, so its approval did not cover a private target; "
            "make the call again to ask for it as one"
        )
        assert private.hits == [] and public.hits == []
        again = open_preview.prepare({"target": url}, context)
        assert "Private network: svc.test resolves to 127.0.0.1" in again.preview
        assert again.args["prepared_network"] == "private"
    finally:
        public.close()
        private.close()
