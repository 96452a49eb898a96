"""Sub-agents in the web client: a panel under the task_agent card with the child's live answer
and tool cards, whose calls are approved from the parent's page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_client import answer, send
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def test_a_sub_agent_is_followed_and_approved_from_the_parent_page(
    open_page, api, model, workdir, screenshot
):
    ws_id = api.create_workstream(name="delegating", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(
        Reply(
            text="I'll hand this to a helper.",
            tool_calls=[ToolCall("task_agent", {"prompt": "CHILD-PAGE: make notes.txt"}, id="t1")],
        )
    )
    model.enqueue(
        Reply(
            text="Writing the file.",
            tool_calls=[ToolCall("bash", {"command": "echo noted > notes.txt"}, id="c1")],
        ),
        match="CHILD-PAGE",
    )
    words = [f"part{i} " for i in range(12)]
    model.enqueue(
        Reply(chunks=["notes.txt ", "is ", "written: ", *words], chunk_delay=0.1), match="CHILD-PAGE"
    )
    model.enqueue(Reply(text="The helper wrote **notes.txt**."))
    send(page, "delegate the notes")

    parent_card = page.locator('.card[data-call-id="t1"]')
    expect(parent_card).to_have_class(re.compile("is-pending"))
    expect(parent_card.locator(".tool-name")).to_have_text("task_agent")
    parent_card.get_by_role("button", name=re.compile("^Approve")).first.click()

    panel = parent_card.locator(".subagent")
    expect(panel).to_be_visible()
    child_card = panel.locator('.card[data-call-id="c1"]')
    expect(child_card).to_have_class(re.compile("is-pending"))
    expect(child_card.locator(".card-header")).to_have_text("$ echo noted > notes.txt")
    expect(panel.locator(".msg-assistant").first).to_have_text("Writing the file.")
    expect(page.locator("#pending-bar")).to_be_visible()
    expect(page.locator("#pending-count")).to_have_text("1 call awaits a decision")
    # the parent needs attention: its header, and its entry in the list (polled from the API)
    expect(page.locator("#ws-state")).to_have_text("attention")
    expect(page.locator(f".ws-item[data-ws-id='{ws_id}'] .badge")).to_have_text("attention", timeout=10_000)
    screenshot(page, "desktop-subagent-approval")
    assert not (workdir / "notes.txt").exists()

    child_card.locator(".feedback").fill("keep it short")
    child_card.get_by_role("button", name=re.compile("^Approve")).click()
    expect(child_card).to_have_attribute("data-status", "done")
    expect(child_card.locator(".card-decision")).to_contain_text("keep it short")
    live = panel.locator(".msg-assistant").nth(1)
    expect(live).to_contain_text("part2")
    expect(page.locator("#ws-state")).to_have_text("running")  # decided: the sub-agent works on
    assert "part11" not in live.inner_text()  # the child's answer shows while it streams
    expect(live).to_contain_text("part11")
    expect(panel.locator("summary .badge")).to_have_text("idle")
    expect(parent_card).to_have_attribute("data-status", "done")
    expect(parent_card.locator(":scope > .card-output")).to_contain_text("notes.txt is written")
    expect(answer(page).last).to_have_text("The helper wrote notes.txt.")
    expect(page.locator("#ws-state")).to_have_text("idle")
    expect(page.locator("#pending-bar")).to_be_hidden()
    assert (workdir / "notes.txt").read_text() == "noted\n"
    # the sub-agent is not a workstream of the list: it lives under its parent
    expect(page.locator(".ws-item")).not_to_contain_text(["sub-agent"])

    # a reload rebuilds the panel from the child's history
    page.reload()
    panel = page.locator('.card[data-call-id="t1"] .subagent')
    expect(panel.locator('.card[data-call-id="c1"]')).to_have_attribute("data-status", "done")
    expect(panel.locator(".msg-assistant").nth(1)).to_contain_text("part11")
    panel.locator("summary").click()  # collapsible
    expect(panel.locator(".subagent-body")).to_be_hidden()


def test_a_pending_sub_agent_call_survives_a_reload_and_is_denied_by_key(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="reload pending", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("task_agent", {"prompt": "CHILD-KEY: try"}, id="t1")]))
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "touch nope"}, id="c1")]), match="CHILD-KEY")
    model.enqueue(Reply(text="I was told no."), match="CHILD-KEY")
    model.enqueue(Reply(text="the helper was refused"))
    send(page, "try a helper")
    page.locator('.card[data-call-id="t1"]').get_by_role("button", name=re.compile("^Approve")).first.click()
    expect(page.locator('.subagent .card[data-call-id="c1"]')).to_have_class(re.compile("is-pending"))
    page.reload()
    child_card = page.locator('.subagent .card[data-call-id="c1"]')
    expect(child_card).to_have_class(re.compile("is-pending"))
    page.locator("body").press("n")
    expect(child_card).to_have_attribute("data-status", "error")
    expect(child_card.locator(".card-output")).to_have_text("Denied by user")
    expect(answer(page).last).to_have_text("the helper was refused")
    assert not (workdir / "nope").exists()
