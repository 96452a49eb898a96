"""Editing a pending call in its card before it runs: bash's command as text, any other tool's
arguments as JSON; the service's refusal of a wrong edit shows in the card and decides nothing;
the approved card shows what ran, as text, and says it was edited (after a reload too)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import DESKTOP, PHONE
from tests.browser.test_client import answer, send
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_bash_command_edited_in_its_card_runs_as_edited(
    open_page, api, model, workdir, screenshot, viewport
):
    ws_id = api.create_workstream(name="edit a call", working_dir=str(workdir))
    page = open_page(ws_id, viewport=viewport)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "rm -rf build"}, id="e1")]))
    model.enqueue(Reply(text="ran the edited one"))
    send(page, "clean up")
    card = page.locator('.card.is-pending[data-call-id="e1"]')
    expect(card).to_have_count(1)
    card.get_by_role("button", name="Edit").click()
    editor = card.locator(".card-edit-text")
    expect(editor).to_have_value("rm -rf build")
    editor.fill("echo '<b>edited</b>' > kept.txt")
    if viewport is DESKTOP:
        screenshot(page, "desktop-call-edit")
    card.get_by_role("button", name="Approve as edited").click()

    done = page.locator('.card[data-call-id="e1"]')
    expect(done.locator(".card-decision")).to_contain_text("Approved as edited")
    expect(done.locator(".card-header")).to_have_text("$ echo '<b>edited</b>' > kept.txt")  # text, not markup
    expect(answer(page).last).to_have_text("ran the edited one")
    assert (workdir / "kept.txt").read_text() == "<b>edited</b>\n"
    expect(page.locator(".card b")).to_have_count(0)

    page.reload()  # from the history: what ran, and that it was edited
    stored = page.locator('.card[data-call-id="e1"]')
    expect(stored.locator(".card-decision")).to_contain_text("Approved as edited")
    expect(stored.locator(".card-header")).to_have_text("$ echo '<b>edited</b>' > kept.txt")


def test_a_wrong_json_edit_is_refused_in_the_card_and_the_call_still_waits(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="edit json", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "model's"}, id="w1")])
    )
    model.enqueue(Reply(text="written"))
    send(page, "write it")
    card = page.locator('.card.is-pending[data-call-id="w1"]')
    expect(card).to_have_count(1)
    card.locator(".card-preview").click()  # the focus on the card: `e` opens its editor
    page.keyboard.press("e")
    editor = card.locator(".card-edit-text")
    expect(editor).to_be_focused()
    editor.fill("{not json")
    card.get_by_role("button", name="Approve as edited").click()
    expect(card.locator(".card-problem")).to_contain_text("Not JSON")

    editor.fill('{"path": 5, "content": "x"}')  # JSON, but not what write_file takes: the service says so
    card.get_by_role("button", name="Approve as edited").click()
    expect(card.locator(".card-problem")).to_contain_text("path: 5 is not of type 'string'")
    expect(page.locator('.card.is-pending[data-call-id="w1"]')).to_have_count(1)

    editor.fill('{"path": "a.txt", "content": "the person\'s"}')
    editor.press("Control+Enter")
    expect(answer(page).last).to_have_text("written")
    assert (workdir / "a.txt").read_text() == "the person's"
