"""The web client's skills page in Chromium: every skill with its origin, risk and state, an
admin turns one off and on, a filter, and a hostile description shown as text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.integration


def test_the_skills_page_lists_filters_and_toggles(open_page, api, screenshot):
    made = api.http.post(
        "/v1/api/skills",
        json={
            "name": "page-reviewer",
            "content": "Review the diff.",
            "description": "<img src=x onerror=alert(1)> reviews diffs",
            "tags": ["review"],
            "risk_level": "high",
        },
    )
    assert made.status_code in (201, 409), made.text
    api.http.put("/v1/api/skills/page-reviewer", json={"enabled": True})
    try:
        page = open_page()
        page.locator("#show-skills").click()
        panel = page.locator("#skills")
        expect(panel).to_be_visible()
        row = panel.locator('[data-skill="page-reviewer"]')
        expect(row.locator(".skill-origin")).to_have_text("written here")
        expect(row).to_contain_text("high risk")
        # the description is text: the markup shows, nothing runs
        expect(row.locator(".memory-desc")).to_have_text("<img src=x onerror=alert(1)> reviews diffs")
        assert panel.locator("img").count() == 0
        row.get_by_role("button", name="Disable").click()
        expect(row).to_have_attribute("data-enabled", "false")
        assert api.http.get("/v1/api/skills/page-reviewer").json()["enabled"] is False
        row.get_by_role("button", name="Enable").click()
        expect(row).to_have_attribute("data-enabled", "true")
        page.locator("#skills-search").fill("no such skill at all")
        expect(panel.locator(".memory-none")).to_have_text("No skill matches.")
        page.locator("#skills-search").fill("review")
        expect(row).to_be_visible()
        screenshot(page, "skills-page")
    finally:
        api.http.delete("/v1/api/skills/page-reviewer")
