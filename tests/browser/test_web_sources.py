"""A model that searches the web itself: the web client shows the pages its answer cited as
links (live and after a reload), and a hostile page title stays text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.model_server import Reply, WebSearch

pytestmark = pytest.mark.integration

PAGES = [
    ("Ruddy turnstone - Wikipedia", "https://en.wikipedia.org/wiki/Ruddy_turnstone"),
    ('<img src=x onerror="window.pwned=1">', "https://evil.example/page"),
]
SEARCH = WebSearch(
    "ruddy turnstone",
    PAGES,
    [("They breed on the tundra", 0), (" and winter on coasts.", 1)],
)


def test_cited_pages_show_as_links(open_page, api, model, screenshot):
    ws_id = api.create_workstream(name="web sources", model="claude_web")
    page = open_page(ws_id)
    model.enqueue(Reply(text="Here is what I found. ", web_search=SEARCH))
    page.locator("#message").fill("Where do ruddy turnstones breed?")
    page.locator("#message").press("Enter")
    answer = page.locator(".msg-assistant .md").last
    expect(answer).to_contain_text("They breed on the tundra and winter on coasts.")

    def check() -> None:
        links = answer.locator("a")
        expect(links).to_have_count(2)
        expect(links.nth(0)).to_have_text(PAGES[0][0])
        expect(links.nth(0)).to_have_attribute("href", PAGES[0][1])
        expect(links.nth(1)).to_have_text(PAGES[1][0])  # the markup is the link's text
        expect(links.nth(1)).to_have_attribute("href", PAGES[1][1])
        expect(answer.locator("img")).to_have_count(0)
        assert page.evaluate("window.pwned") is None

    check()
    screenshot(page, "desktop-web-sources")
    page.reload()
    answer = page.locator(".msg-assistant .md").last
    expect(answer).to_contain_text("Sources:")
    check()
