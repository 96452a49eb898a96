"""The web client's page is well-formed: every element it opens it closes, in order, and no
dialog sits inside another (a dialog inside a hidden one can never be seen: a merge once left
the policies dialog open, and Account, Runs and the shortcuts vanished with it)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "app" / "web" / "static" / "index.html"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Structure(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[tuple[str, str | None, str]] = []
        self.problems: list[str] = []
        self.overlays: list[tuple[str | None, list[str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if "overlay" in classes:
            self.overlays.append((found.get("id"), [i for _, i, c in self.open if "overlay" in c.split()]))
        self.open.append((tag, found.get("id"), found.get("class") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.open or self.open[-1][0] != tag:
            where = self.open[-1] if self.open else None
            self.problems.append(f"</{tag}> at line {self.getpos()[0]} closes {where}")
            return
        self.open.pop()


def test_the_page_closes_what_it_opens_and_no_dialog_is_inside_another() -> None:
    page = Structure()
    page.feed(PAGE.read_text(encoding="utf-8"))
    page.close()
    assert not page.problems, page.problems
    assert not page.open, f"left open: {page.open}"
    nested = [(overlay, inside) for overlay, inside in page.overlays if inside]
    assert not nested, nested
    assert len(page.overlays) >= 8  # the dialogs are there to check
