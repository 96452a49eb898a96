"""The browsable API page renders the service's own OpenAPI document in a real browser, from files
this service serves (no CDN), under its Content-Security-Policy, and can call the API."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.integration.services import API_TOKEN

pytestmark = pytest.mark.integration


def test_the_reference_page_shows_every_group_and_tries_a_call(browser, services, screenshot):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    outside: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("request", lambda r: None if r.url.startswith(services.base_url) else outside.append(r.url))
    try:
        page.goto(services.base_url + "/v1/api/docs")
        expect(page.locator(".information-container .title")).to_contain_text("turnstone-jobs API")
        for tag in ("workstreams", "branches", "accounts", "mcp", "skills", "memories"):
            expect(page.locator(f"#operations-tag-{tag}")).to_be_visible()
        # authorize with the token, then try GET /v1/api/me from the page
        page.get_by_role("button", name="Authorize").click()
        dialog = page.locator(".modal-ux")
        dialog.locator("input").first.fill(API_TOKEN)  # the bearer scheme, listed first
        dialog.locator("button.modal-btn.authorize").first.click()
        dialog.locator("button.btn-done").first.click()
        operation = page.locator("#operations-accounts-me")
        operation.locator(".opblock-summary").click()
        operation.get_by_role("button", name="Try it out").click()
        operation.get_by_role("button", name="Execute").click()
        expect(operation.locator(".live-responses-table td.response-col_status").nth(1)).to_have_text("200")
        expect(operation.locator(".live-responses-table")).to_contain_text('"name": "operator"')
        screenshot(page, "api-reference")
    finally:
        context.close()
    assert not errors, errors
    assert not outside, outside  # every file came from this service
