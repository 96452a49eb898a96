"""The web client in Chromium against the real service: streaming, tool cards, approvals."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PHONE
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command})


def send(page: Page, text: str) -> None:
    page.locator("#message").fill(text)
    page.locator("#message").press("Enter")


def answer(page: Page):  # type: ignore[no-untyped-def]
    return page.locator(".msg-assistant .md")


def test_sign_in_create_and_a_plain_turn_streams(open_page, model, workdir, screenshot):
    page = open_page(sign_in=False)
    expect(page.locator("#login")).to_be_visible()
    page.locator("#token-entry summary").click()  # pasting a token, under the password form
    page.locator("#token").fill("wrong-token")
    page.locator("#token").press("Enter")
    expect(page.locator("#login-error")).to_contain_text("refused")
    from tests.integration.services import API_TOKEN

    page.locator("#token").fill(API_TOKEN)
    page.locator("#token").press("Enter")
    expect(page.locator("#app")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('turnstone.token')") == API_TOKEN

    page.locator("#new-ws").click()
    page.locator("#c-name").fill("streaming demo")
    page.locator("#c-dir").fill(str(workdir))
    page.locator("#create-form button[type=submit]").click()
    expect(page.locator("#ws-title")).to_have_text("streaming demo")
    expect(page.locator(".ws-item.is-active .ws-name")).to_have_text("streaming demo")

    words = [f"word{i} " for i in range(25)]
    model.enqueue(Reply(chunks=["## Plan\n\n", "Here is **bold** and `code`:\n\n", *words], chunk_delay=0.12))
    send(page, "stream please")
    expect(page.locator(".msg-user .bubble")).to_have_text("stream please")
    expect(page.locator("#ws-state")).to_have_text("thinking")
    expect(answer(page)).to_contain_text("word3")
    partial = answer(page).inner_text()
    assert "word24" not in partial  # seen while still streaming
    expect(answer(page)).to_contain_text("word24")
    expect(page.locator("#ws-state")).to_have_text("idle")
    expect(answer(page).locator("h3")).to_have_text("Plan")
    expect(answer(page).locator("strong")).to_have_text("bold")
    expect(answer(page).locator("code")).to_have_text("code")
    screenshot(page, "desktop-conversation")


def test_a_workstream_made_with_the_host_network_says_so_in_its_header(open_page, workdir):
    page = open_page()
    page.locator("#new-ws").click()
    page.locator("#c-name").fill("on the host")
    page.locator("#c-dir").fill(str(workdir))
    page.locator("#c-network").select_option("host")
    page.locator("#create-form button[type=submit]").click()
    expect(page.locator("#ws-title")).to_have_text("on the host")
    expect(page.locator("#ws-meta")).to_contain_text("network: host (the host's own network)")


def test_bash_approved_by_click_streams_its_output_line_by_line(open_page, api, model, workdir, screenshot):
    ws_id = api.create_workstream(name="approve by click", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(
        Reply(text="I'll count.", tool_calls=[bash("for i in 1 2 3 4 5; do echo line$i; sleep 0.6; done")])
    )
    model.enqueue(Reply(text="Counted to **five**."))
    send(page, "count to five slowly")
    card = page.locator(".card.is-pending")
    expect(card).to_have_count(1)
    expect(card.locator(".card-header")).to_contain_text("$ for i in 1 2 3 4 5")
    expect(page.locator("#ws-state")).to_have_text("attention")
    expect(page.locator("#pending-bar")).to_be_visible()
    expect(page.locator(".ws-item.is-active .badge")).to_have_text("attention")
    screenshot(page, "desktop-approval")

    card.get_by_role("button", name=re.compile("^Approve")).click()
    card = page.locator(".card").first
    output = card.locator(".card-output")
    expect(output).to_contain_text("line1")
    assert "line5" not in output.inner_text()  # the first line shows while the command still runs
    expect(card).to_have_attribute("data-status", "running")
    expect(output).to_contain_text("line5")
    expect(card).to_have_attribute("data-status", "done")
    assert output.inner_text().split() == ["line1", "line2", "line3", "line4", "line5"]
    expect(card.locator(".card-decision")).to_contain_text("Approved by")
    expect(answer(page).last).to_have_text("Counted to five.")
    expect(page.locator("#ws-state")).to_have_text("idle")
    expect(page.locator("#pending-bar")).to_be_hidden()


def test_deny_with_feedback_reaches_the_model(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="deny", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[bash("touch denied-marker")]))
    model.enqueue(Reply(text="Understood, I will not."))
    send(page, "make a file")
    card = page.locator(".card.is-pending")
    card.locator(".feedback").fill("use the tmp folder instead")
    card.get_by_role("button", name=re.compile("^Deny")).click()
    card = page.locator(".card").first
    expect(card).to_have_attribute("data-status", "error")
    expect(card.locator(".card-output")).to_have_text("Denied by user: use the tmp folder instead")
    expect(card.locator(".card-decision")).to_contain_text("Denied by")
    expect(card.locator(".card-decision")).to_contain_text("use the tmp folder instead")
    expect(answer(page).last).to_have_text("Understood, I will not.")
    api.wait_idle(ws_id)
    sent = model.history[-1].body["messages"]
    assert sent[-1]["role"] == "tool"
    assert sent[-1]["content"] == "Denied by user: use the tmp folder instead"
    assert not (workdir / "denied-marker").exists()


def test_approve_one_of_three_by_click_key_and_another_client(open_page, api, model, workdir, screenshot):
    ws_id = api.create_workstream(name="three calls", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[bash("touch a"), bash("touch b"), bash("touch c")]))
    model.enqueue(Reply(text="Made b only."))
    send(page, "three files")
    cards = page.locator(".card")
    expect(page.locator(".card.is-pending")).to_have_count(3)
    expect(page.locator("#pending-count")).to_have_text("3 calls await a decision")
    screenshot(page, "desktop-three-pending")
    cards.nth(1).get_by_role("button", name=re.compile("^Approve")).click()
    expect(page.locator(".card.is-pending")).to_have_count(2)
    page.locator("#ws-title").click()  # nothing focused: `n` denies the first pending card
    page.keyboard.press("n")
    expect(page.locator(".card.is-pending")).to_have_count(1)
    call_c = cards.nth(2).get_attribute("data-call-id")
    assert api.approve(ws_id, approved=False, call_id=call_c, feedback="not from here").status_code == 200
    expect(cards.nth(2).locator(".card-decision")).to_contain_text("not from here")  # another client decided
    expect(answer(page).last).to_have_text("Made b only.")
    assert [cards.nth(i).get_attribute("data-status") for i in range(3)] == ["error", "done", "error"]
    assert (workdir / "b").exists() and not (workdir / "a").exists() and not (workdir / "c").exists()


def test_cancel_and_a_message_queued_while_busy(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="cancel", working_dir=str(workdir), auto_approve=True)
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo started; sleep 60")]), match="long job")
    model.enqueue(Reply(text="the queued one ran"), match="after that")
    send(page, "long job")
    expect(page.locator(".card-output")).to_contain_text("started")
    expect(page.locator("#send")).to_have_text("Queue")
    send(page, "never mind this")
    send(page, "after that")
    expect(page.locator(".msg-user.is-queued")).to_have_count(2)
    # A queued message is cancelled on its own, before it runs; the running turn goes on.
    page.locator(".msg-user.is-queued", has_text="never mind this").get_by_role(
        "button", name="Cancel"
    ).click()
    withdrawn = page.locator(".msg-user.is-withdrawn")
    expect(withdrawn).to_contain_text("never mind this")
    expect(withdrawn.locator(".queued-tag")).to_have_text("cancelled before it ran")
    expect(page.locator(".msg-user.is-queued")).to_have_count(1)
    expect(page.locator("#ws-state")).to_have_text("running")
    page.locator("#cancel-turn").click()
    expect(page.locator(".note-warn")).to_contain_text("cancelled")
    expect(page.locator(".card").first).to_have_attribute("data-status", "error")
    expect(page.locator(".msg-user.is-queued")).to_have_count(0)
    expect(answer(page).last).to_have_text("the queued one ran")
    expect(page.locator("#ws-state")).to_have_text("idle")
    expect(page.locator("#cancel-turn")).to_be_hidden()
    assert all("never mind" not in str(r.body["messages"]) for r in model.history)


def test_phone_width_drawer_and_other_workstreams_states(open_page, api, model, workdir, screenshot):
    quiet = api.create_workstream(name="quiet one", working_dir=str(workdir))
    busy = api.create_workstream(name="needs me", working_dir=str(workdir))
    page = open_page(quiet, viewport=PHONE, color_scheme="dark")
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    model.enqueue(Reply(tool_calls=[bash("echo hi")]))
    api.send(busy, "do something")  # another workstream: the list shows it needs attention
    page.locator("#open-drawer").click()
    expect(page.locator("#sidebar")).to_be_in_viewport()
    other = page.locator(f".ws-item[data-ws-id='{busy}'] .badge")
    expect(other).to_have_text("attention", timeout=10_000)
    screenshot(page, "phone-drawer")
    page.locator(f".ws-item[data-ws-id='{busy}']").click()
    expect(page.locator("#sidebar")).not_to_be_in_viewport()
    expect(page.locator("#ws-title")).to_have_text("needs me")
    expect(page.locator(".card.is-pending")).to_have_count(1)
    screenshot(page, "phone-approval")
    page.keyboard.press("y")
    expect(page.locator(".card").first).to_have_attribute("data-status", "done")
    api.wait_idle(busy)


def test_long_output_is_capped_and_scrolls_inside_its_card(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="long output", working_dir=str(workdir), auto_approve=True)
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[bash("seq 1 300000")]))
    model.enqueue(Reply(text="That was long."))
    send(page, "print a lot")
    expect(answer(page).last).to_have_text("That was long.")
    output = page.locator(".card-output")
    expect(page.locator(".card-clipped")).to_contain_text("earlier output not shown")
    text = output.inner_text()
    assert len(text) <= 80 * 1024 and "\n1\n" not in text  # only the tail is in the page
    box = output.bounding_box()
    assert box is not None and box["height"] <= 330  # it scrolls inside the card
    assert page.evaluate("1 + 1") == 2  # and the page still answers


def test_shift_y_approves_every_pending_call(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="approve all", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo one"), bash("echo two")]))
    model.enqueue(Reply(text="Both ran."))
    send(page, "two commands")
    expect(page.locator(".card.is-pending")).to_have_count(2)
    page.locator("#ws-title").click()
    page.keyboard.press("Shift+Y")
    expect(answer(page).last).to_have_text("Both ran.")
    assert page.locator(".card-output").all_inner_texts() == ["one", "two"]
    expect(page.locator(".card-decision").first).to_contain_text("Approved by")


def test_reasoning_is_shown_collapsed_above_the_answer(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="reasoning", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(reasoning="First I weigh <b>both</b> options.", text="Take the second."))
    send(page, "which one?")
    expect(answer(page).last).to_have_text("Take the second.")
    details = page.locator("details.reasoning").last
    expect(details).to_be_visible()
    assert details.get_attribute("open") is None  # collapsed until asked
    expect(details.locator(".reasoning-text")).to_be_hidden()
    details.locator("summary").click()
    expect(details.locator(".reasoning-text")).to_have_text("First I weigh <b>both</b> options.")
    page.reload()  # rebuilt from the history: the reasoning is stored with the answer
    expect(answer(page).last).to_have_text("Take the second.")
    details = page.locator("details.reasoning").last
    assert details.get_attribute("open") is None
    details.locator("summary").click()
    expect(details.locator(".reasoning-text")).to_have_text("First I weigh <b>both</b> options.")


def test_each_answer_shows_the_tokens_it_cost_live_and_after_a_reload(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="usage", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(text="a short answer"))
    send(page, "how much?")
    expect(answer(page)).to_have_text("a short answer")
    expect(page.locator("#ws-state")).to_have_text("idle")
    (stored,) = [m["usage"] for m in api.history(ws_id) if m["role"] == "assistant"]
    shown = f"{stored['input_tokens']:,} in · {stored['output_tokens']:,} out tokens"
    assert stored["input_tokens"] > 0 and stored["output_tokens"] > 0
    expect(page.locator(".step .usage")).to_have_text(shown)  # from the live stream_end
    assert api.workstream(ws_id)["usage"]["output_tokens"] == stored["output_tokens"]
    page.reload()
    expect(page.locator(".step .usage")).to_have_text(shown)  # from the stored history
