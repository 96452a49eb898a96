"""Copy in the web client: every code block of an answer, the answer itself (as the Markdown the
model wrote) and a message the person sent each put their text on the clipboard, as text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_client import answer, send
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration

ANSWER = "Run this:\n\n```bash\necho '<b>one</b>'\nls -la\n```\n\nand then **that**."


def test_code_blocks_answers_and_messages_copy_their_text(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="copy", working_dir=str(workdir))
    page = open_page(ws_id)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    model.enqueue(Reply(text=ANSWER))
    send(page, "how do I <i>list</i>?")
    expect(answer(page).last).to_contain_text("and then that.")

    def clipboard() -> str:
        return str(page.evaluate("navigator.clipboard.readText()"))

    block = page.locator(".msg-assistant .md-code")
    copy = block.locator(".md-copy")
    copy.click()
    expect(copy).to_have_attribute("data-label", "Copied")
    expect(block).to_have_text("echo '<b>one</b>'\nls -la")  # the label is no text of the block
    assert clipboard() == "echo '<b>one</b>'\nls -la"  # the code only: not the button, not the language

    page.locator(".msg-assistant").last.hover()
    page.locator(".msg-assistant .msg-copy").last.click()
    assert clipboard() == ANSWER

    page.locator(".msg-user").last.hover()
    page.locator(".msg-user .action-copy").click()
    assert clipboard() == "how do I <i>list</i>?"
    expect(page.locator(".msg b, .msg i")).to_have_count(0)
