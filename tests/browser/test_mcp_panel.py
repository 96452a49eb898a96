"""The MCP badge and panel in Chromium: a server added through the admin API shows up with its
state and counts, a broken one with its error, and the panel's refresh reaches the workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.integration.client import Api
from tests.integration.mcp_peers import FakeMCP

pytestmark = pytest.mark.integration


def test_badge_and_panel_show_servers_state_counts_and_errors(
    open_page, api: Api, tmp_path: Path, screenshot
):  # noqa: E501
    page = open_page()
    expect(page.locator("#mcp-badge")).to_be_hidden()  # no MCP server configured
    fake = FakeMCP(tmp_path / "fake")
    added = api.http.post("/v1/api/mcp/servers", json={"name": "browserfake", **fake.stdio()})
    broken = api.http.post("/v1/api/mcp/servers", json={"name": "broken", "command": "/nonexistent/srv"})
    try:
        assert added.status_code == 201 and broken.status_code == 201
        badge = page.locator("#mcp-badge")
        expect(badge).to_have_text("MCP 1", timeout=30_000)  # one of two connected
        # the fake lists two resources and two templates (`fake://files{/path*}` among them)
        expect(badge).to_have_attribute("title", "1 of 2 MCP servers connected · 4 resources · 1 prompts")
        badge.click()
        row = page.locator('.mcp-row[data-server="browserfake"]')
        expect(row.locator(".badge")).to_have_text("connected")
        expect(row.locator(".mcp-counts")).to_contain_text("1 prompts")
        bad = page.locator('.mcp-row[data-server="broken"]')
        expect(bad.locator(".badge")).to_have_text("error")
        expect(bad.locator(".mcp-error")).to_contain_text("No such file")
        with page.expect_response(lambda r: r.url.endswith("/v1/api/mcp/refresh")) as refreshed:
            bad.get_by_role("button", name="Refresh").click()
        assert refreshed.value.status == 202
        assert refreshed.value.request.post_data_json == {"server": "broken"}
        with page.expect_response(lambda r: r.url.endswith("/v1/api/mcp/refresh")) as reconnected:
            row.get_by_role("button", name="Reconnect").click()
        assert reconnected.value.status == 202
        assert reconnected.value.request.post_data_json == {"server": "browserfake", "reconnect": True}
        assert reconnected.value.json()["reconnect"] is True
        # a refresh says what it changed: here a tool the server now lists, then none again
        report = row.locator(".mcp-report")
        row.get_by_role("button", name="Refresh").click()
        fake.lists(tools=["added_tool"])
        expect(report).to_have_text("Refreshed: added mcp__browserfake__added_tool", timeout=30_000)
        fake.lists(tools=[])
        row.get_by_role("button", name="Refresh").click()
        expect(report).to_have_text("Refreshed: removed mcp__browserfake__added_tool", timeout=30_000)
        row.get_by_role("button", name="Refresh").click()
        expect(report).to_have_text("Refreshed: no tools added or removed", timeout=30_000)
        screenshot(page, "mcp-panel")
        page.keyboard.press("Escape")
    finally:
        api.http.delete("/v1/api/mcp/servers/browserfake")
        api.http.delete("/v1/api/mcp/servers/broken")
    expect(page.locator("#mcp-badge")).to_be_hidden(timeout=30_000)
