"""Model and tool output are text: markup in them is shown, never run (live and from history)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_client import answer, bash, send
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration

SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
LINK = "[click me](javascript:window.__pwned=1)"


def assert_inert(page: Page) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    transcript = page.locator("#transcript")
    for tag in ("script", "img", "iframe", "object", "svg"):
        assert transcript.locator(tag).count() == 0, f"a <{tag}> was created from output"
    assert page.locator("#transcript a[href^='javascript']").count() == 0
    expect(answer(page).first).to_contain_text(SCRIPT)
    expect(answer(page).first).to_contain_text(IMG)
    expect(answer(page).first).to_contain_text(LINK)
    expect(page.locator(".card-output")).to_contain_text(SCRIPT)
    expect(page.locator(".card-output")).to_contain_text(IMG)
    expect(page.locator(".card-header")).to_contain_text("<b>")
    expect(page.locator(".msg-user .bubble").first).to_contain_text(IMG)


def test_markup_in_model_and_tool_output_stays_inert(open_page, api, model, workdir, screenshot):
    ws_id = api.create_workstream(name="injection", working_dir=str(workdir), auto_approve=True)
    page = open_page(ws_id)
    text = f"Here: {SCRIPT} and {IMG} and **{IMG}** and `{SCRIPT}` and {LINK}\n\n```html\n{SCRIPT}\n```"
    model.enqueue(
        Reply(
            chunks=[text[i : i + 7] for i in range(0, len(text), 7)],  # tags split across deltas
            chunk_delay=0.01,
            tool_calls=[bash(f"echo '<b>bold</b>'; printf '%s\\n' '{SCRIPT}' '{IMG}'")],
        )
    )
    model.enqueue(Reply(text=f"The tool printed {IMG}"))
    send(page, f"say {IMG}")
    expect(answer(page).last).to_have_text("The tool printed " + IMG, timeout=20_000)
    expect(page.locator(".card")).to_have_attribute("data-status", "done")
    assert_inert(page)
    screenshot(page, "desktop-injection-inert")
    page.reload()  # the same text, rendered from the history this time
    expect(page.locator(".card")).to_have_attribute("data-status", "done")
    assert_inert(page)
