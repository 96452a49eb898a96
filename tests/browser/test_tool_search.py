"""Tool search in the web client: the header counts the tools the model sees of all it could
have, and a card of a tool that tool search found says so (live, and after a reload)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.fakes.model_server import Reply, ToolCall
from tests.fakes.tool_source import FakeTools
from tests.integration.services import Services
from tests.integration.test_tool_search import TARGET, many_tools

pytestmark = pytest.mark.integration


@pytest.fixture
def fake_tools(services: Services) -> Iterator[FakeTools]:
    tools = FakeTools(services.tmp / "fake-tools.json")
    yield tools
    tools.clear()


def test_the_header_counts_tools_and_a_found_tools_card_says_so(
    open_page, api, model, fake_tools, workdir, screenshot
):
    fake_tools.write(*many_tools())
    ws_id = api.create_workstream(name="tool search", working_dir=str(workdir))
    counts = api.workstream(ws_id)["tools"]
    page = open_page(ws_id)
    expect(page.locator("#ws-tools")).to_have_text(f"{counts['visible']} of {counts['total']} tools")

    model.enqueue(Reply(tool_calls=[ToolCall("tool_search", {"query": "rocket launch window"}, id="s1")]))
    model.enqueue(Reply(tool_calls=[ToolCall("orbital_launch_window", {"orbit": "LEO"}, id="c1")]))
    model.enqueue(Reply(text="The window opens at dawn."))
    page.locator("#message").fill("When can we launch?")
    page.locator("#message").press("Enter")
    expect(page.locator(".msg-assistant .md").last).to_contain_text("dawn")
    found = page.locator('.card[data-call-id="c1"]')
    expect(found.locator(".tool-name")).to_have_text(TARGET["name"])
    expect(found.locator(".found-badge")).to_have_text("found by tool search")
    expect(found.locator(".found-badge")).to_be_visible()
    expect(page.locator('.card[data-call-id="s1"] .found-badge')).to_be_hidden()
    expect(page.locator("#ws-tools")).to_have_text(f"{counts['visible'] + 1} of {counts['total']} tools")
    screenshot(page, "desktop-tool-search")

    page.reload()
    expect(page.locator('.card[data-call-id="c1"] .found-badge')).to_be_visible()
    expect(page.locator('.card[data-call-id="s1"] .found-badge')).to_be_hidden()
    expect(page.locator("#ws-tools")).to_have_text(f"{counts['visible'] + 1} of {counts['total']} tools")


def test_a_workstream_without_search_shows_all_its_tools(open_page, api, fake_tools, workdir):
    fake_tools.write(*many_tools(3))
    ws_id = api.create_workstream(name="few tools", working_dir=str(workdir))
    counts = api.workstream(ws_id)["tools"]
    assert counts["search"] is None and counts["visible"] == counts["total"]
    page = open_page(ws_id)
    expect(page.locator("#ws-tools")).to_have_text(f"{counts['total']} tools")
    expect(page.locator("#ws-tools")).to_have_attribute(
        "title", f"all {counts['total']} tools are offered to the model"
    )
