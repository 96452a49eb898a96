"""Branching in the web client (docs/branching.md), in Chromium against the real service:
edit a message and send it again, retry an answer, restore the version an edit replaced,
fork from a turn; model and tool text stays text."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PHONE
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration


def send(page: Page, text: str) -> None:
    page.locator("#message").fill(text)
    page.locator("#message").press("Enter")


def answers(page: Page):  # type: ignore[no-untyped-def]
    return page.locator(".msg-assistant .md")


def user_texts(request) -> list[str]:  # type: ignore[no-untyped-def]
    return [m["content"] for m in request.body["messages"] if m["role"] == "user"]


def test_edit_retry_restore_and_fork_from_the_page(open_page, api, model, workdir, screenshot):
    ws_id = api.create_workstream(name="branching", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(text="one"))
    send(page, "first")
    expect(answers(page)).to_have_text(["one"])
    model.enqueue(Reply(text="<b>two</b>"))
    send(page, "second")
    expect(answers(page)).to_have_text(["one", "<b>two</b>"])
    expect(page.locator("#ws-state")).to_have_text("idle")

    # Edit the second message: the page re-reads the conversation and marks the kept version.
    second = page.locator(".msg-user", has_text="second")
    second.hover()
    second.get_by_role("button", name="Edit").click()
    expect(page.locator(".edit-note")).to_contain_text("files the tools changed stay as they are")
    page.locator(".edit-box").fill("second, <i>better</i>")
    model.enqueue(Reply(text="two, better"))
    page.locator(".edit-form").get_by_role("button", name="Send").click()
    expect(answers(page)).to_have_text(["one", "two, better"])
    marker = page.locator(".branch-marker")
    expect(marker).to_have_count(1)
    expect(marker).to_contain_text('Another version continues here (edit, 2 messages): "second"')
    expect(page.locator(".msg-user .bubble")).to_have_text(["first", "second, <i>better</i>"])
    assert user_texts(model.history[-1]) == ["first", "second, <i>better</i>"]
    screenshot(page, "desktop-branching")

    # Retry shows on the last turn only, and keeps the answer it replaces.
    expect(page.locator(".turn").first.locator(".action-retry")).to_be_hidden()
    last = page.locator(".msg-user", has_text="better")
    last.hover()
    model.enqueue(Reply(text="two, retried"))
    last.get_by_role("button", name="Retry").click()
    expect(answers(page)).to_have_text(["one", "two, retried"])
    expect(page.locator(".branch-marker")).to_have_count(2)

    # Restore the version the edit replaced: the original second turn is back.
    page.locator(".branch-marker", has_text="(edit,").get_by_role("button", name="Restore").click()
    expect(answers(page)).to_have_text(["one", "<b>two</b>"])
    expect(page.locator(".msg-assistant b")).to_have_count(0)  # model text stays text

    # Fork from the first turn: the page moves to the new workstream with that much of it.
    first = page.locator(".msg-user", has_text="first")
    first.hover()
    first.get_by_role("button", name="Fork").click()
    expect(page.locator("#ws-title")).to_have_text("branching (fork)")
    expect(answers(page)).to_have_text(["one"])
    assert [m["content"] for m in api.history(ws_id)][-1] == "<b>two</b>"


def test_the_actions_are_reachable_without_hover_at_phone_width(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="phone branching", working_dir=str(workdir))
    model.enqueue(Reply(text="an answer"))
    api.send(ws_id, "a question")
    api.wait_idle(ws_id)
    page = open_page(ws_id, viewport=PHONE)
    expect(page.locator(".msg-user").get_by_role("button", name="Edit")).to_be_visible()
