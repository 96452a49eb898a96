"""A fetched page as plain text: HTML through a real parser, text types as they are.

Scripts, styles and other non-content elements are dropped and block elements
become line breaks; PDFs and other binaries are refused with a hint.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from app.tools.web.fetch.errors import FetchError
from app.tools.web.fetch.fetcher import Page

if TYPE_CHECKING:
    # The parser is imported when a page is read, not with the tool: every process that builds
    # the tool registry (web and worker) would otherwise hold it, about 1.7 MB, fetching or not.
    from selectolax.lexbor import LexborNode

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_APPLICATION_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/sql",
        "application/x-sh",
    }
)
SNIFF_BYTES = 8192
DROPPED = frozenset(
    {"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object", "embed", "canvas"}
)
BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "caption", "details", "dialog", "div",
        "dl", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4",
        "h5", "h6", "header", "hgroup", "hr", "main", "nav", "ol", "p", "pre", "section",
        "summary", "table", "tbody", "thead", "tfoot", "ul", "body", "html",
    }
)  # fmt: skip
TIGHT_BLOCKS = frozenset({"li", "tr", "dt", "dd", "option"})  # a line each, no blank line between
CELLS = frozenset({"td", "th"})
_SPACES = re.compile(r"[ \t\r\n\f\v]+")  # HTML's own whitespace, not every Unicode space
_CLOSE = object()  # marks the end of an element on the walk's stack
_PRE_END = object()


def page_text(page: Page) -> str:
    """The readable text of a page; `FetchError` for a PDF or other binary content."""
    kind = _kind(page)
    if kind == "pdf":
        raise FetchError(
            f"Error: {page.url} is a PDF ({len(page.body):,} bytes); only web pages and text can be "
            "read this way. Download it with bash and extract its text (pdftotext), or ask the user "
            "for the part you need."
        )
    if kind == "binary":
        what = page.content_type or "binary data"
        raise FetchError(
            f"Error: {page.url} is {what} ({len(page.body):,} bytes), not a web page or text; "
            "only HTML and text types can be read this way."
        )
    text = _decode(page.body, page.charset)
    return html_to_text(text) if kind == "html" else text.strip()


def _kind(page: Page) -> str:
    head = page.body[:SNIFF_BYTES]
    if page.content_type == "application/pdf" or head.startswith(b"%PDF-"):
        return "pdf"
    if b"\x00" in head:
        return "binary"
    media = page.content_type
    if media in HTML_TYPES:
        return "html"
    if media.startswith("text/") or media in TEXT_APPLICATION_TYPES or media.endswith(("+json", "+xml")):
        return "text"
    if not media:  # no Content-Type: look at the bytes
        start = head.lstrip().lower()
        return "html" if start.startswith((b"<!doctype html", b"<html")) else "text"
    return "binary"


def _decode(body: bytes, charset: str | None) -> str:
    if charset:
        try:
            return body.decode(charset, errors="replace")
        except LookupError:
            pass  # a charset Python does not know: guess as if none were given
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace")  # the web's usual unlabelled legacy text


def html_to_text(html: str) -> str:
    """The text a reader sees: the title first, then the body, one line per block."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = _SPACES.sub(" ", title_node.text()).strip() if title_node is not None else ""
    root = tree.body or tree.root
    body = _walk(root) if root is not None else ""
    return "\n\n".join(part for part in (title, body) if part)


def _walk(root: LexborNode) -> str:
    """Depth-first without recursion (a page may nest thousands deep)."""
    from selectolax.lexbor import LexborNode

    out: list[str] = []
    pre = 0
    stack: list[object] = list(reversed(list(root.iter(include_text=True))))
    while stack:
        item = stack.pop()
        if item is _CLOSE:
            out.append("\n")
        elif item is _PRE_END:
            pre -= 1
        elif isinstance(item, str):
            out.append(item)
        elif isinstance(item, LexborNode):
            if item.tag == "-text":
                _add_text(out, item.text_content or "", pre > 0)
                continue
            tag = item.tag or ""
            if tag in DROPPED or tag.startswith("-"):  # comments and the like
                continue
            if tag == "br":
                out.append("\n")
                continue
            stack.extend(_open(out, item, tag))
            if tag == "pre":
                pre += 1
    return _tidy("".join(out))


def _open(out: list[str], node: LexborNode, tag: str) -> list[object]:
    """What goes on the stack for an element: its end marker, then its children, last first."""
    closing: list[object] = []
    if tag in TIGHT_BLOCKS:
        out.append("\n- " if tag == "li" else "\n")
    elif tag in BLOCKS:
        out.append("\n")
        closing.append(_CLOSE)
    elif tag in CELLS:
        closing.append(" ")
    if tag == "pre":
        closing.append(_PRE_END)
    return closing + list(reversed(list(node.iter(include_text=True))))


def _add_text(out: list[str], text: str, keep_spaces: bool) -> None:
    if keep_spaces:
        out.append(text)
        return
    text = _SPACES.sub(" ", text)
    if not out or out[-1].endswith(("\n", "- ")):
        text = text.lstrip(" ")
    if text:
        out.append(text)


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
