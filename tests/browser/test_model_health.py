"""A degraded model says so in the model picker (docs/providers.md#health)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.integration


def test_the_picker_marks_a_degraded_model_and_says_why(open_page, api, model):
    model.listing_status = 503  # both of this service's models are served here
    try:
        assert api.http.post("/v1/api/models/check").status_code == 200
        page = open_page()
        option = page.locator("#start-model option[value='claude_web']")
        expect(option).to_contain_text("claude_web — degraded · web search")
        expect(option).to_have_attribute("title", "generic: fake-claude (degraded: the server answered 503)")
    finally:
        model.listing_status = None
        assert api.http.post("/v1/api/models/check").status_code == 200
    page = open_page()
    expect(page.locator("#start-model option[value='claude_web']")).to_have_text("claude_web — web search")
