"""The web client's channels panel, in Chromium: a signed-in user links a Discord webhook and an
ntfy topic, sees them listed with their targets shortened, reads a refusal, and removes one.
Whatever the user typed comes back as text, never as markup."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import DESKTOP
from tests.integration.people import People


@pytest.fixture
def people(services) -> People:  # type: ignore[no-untyped-def]
    return People(services)


def test_a_user_links_lists_and_removes_channels(browser, services, people, screenshot):
    carol = people.user("carol")
    context = browser.new_context(viewport=DESKTOP)
    errors: list[str] = []
    try:
        context.add_init_script(
            f"if (window.top === window) sessionStorage.setItem('turnstone.token', {carol.tokens['all']!r})"
        )
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(services.base_url + "/")
        expect(page.locator("#app")).to_be_visible()
        page.locator("#show-channels").click()
        panel = page.locator("#channels")
        expect(panel.locator(".memory-none")).to_have_text("No channels linked yet.")

        page.locator("#channel-kind").select_option("discord-webhook")
        page.locator("#channel-target").fill("https://discord.com/api/webhooks/31337/very-secret-token")
        page.locator("#channel-label").fill("<b>ops</b>")
        page.locator("#channel-add").click()
        item = panel.locator(".channel")
        expect(item).to_have_count(1)
        expect(item.locator(".memory-name")).to_have_text("<b>ops</b>")  # text, not markup
        expect(item.locator(".channel-target")).to_have_text("webhook 31337/…")
        assert "very-secret-token" not in page.content()

        page.locator("#channel-kind").select_option("ntfy")
        page.locator("#channel-target").fill("<img src=x onerror=alert(1)>")
        page.locator("#channel-add").click()
        expect(page.locator("#channel-error")).to_have_text("topic: 1-64 letters, digits, '-' or '_'")
        page.locator("#channel-target").fill("carol-alerts")
        page.locator("#channel-add").click()
        expect(item).to_have_count(2)
        expect(item.nth(1).locator(".channel-target")).to_have_text("topic ca…")
        expect(page.locator("#channel-error")).to_have_text("")
        screenshot(page, "channels-panel")

        item.first.locator("button").click()
        expect(item).to_have_count(1)
        expect(item.locator(".memory-tag")).to_have_text("ntfy")
        api = people.user("dave")  # someone else's list stays empty
        assert api.api(services).http.get("/v1/api/channels").json() == {"channels": []}
    finally:
        context.close()
    assert not errors, errors
