"""Everyday papercuts of the web client (issue 43), at desktop and phone widths: a workstream opens
at its newest message, the header keeps its name while a turn runs, the keyboard hint is for
keyboards, y/n/a decide from an empty message box, and the usage line sits under its answer in
words a person reads."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import DESKTOP, PHONE
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration

WIDTHS = {"desktop": DESKTOP, "phone": PHONE}


def bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command})


def send(page: Page, text: str) -> None:
    page.locator("#message").fill(text)
    page.locator("#message").press("Enter")


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_workstream_with_long_tool_output_opens_at_its_newest_message(
    open_page, api, model, workdir, width
):
    ws_id = api.create_workstream(name="long history", working_dir=str(workdir), auto_approve=True)
    for n in range(3):
        model.enqueue(Reply(text=f"Let me look ({n}).", tool_calls=[bash("seq 1 2000")]))
        model.enqueue(Reply(text=f"Answer number {n}."))
        api.send(ws_id, f"question {n}")
        api.wait_idle(ws_id)
    other = api.create_workstream(name="another", working_dir=str(workdir))
    page = open_page(other, viewport=width)
    for way in ("picked from the list", "loaded with the page"):
        if way == "loaded with the page":
            page.goto(page.url.split("#")[0] + f"#ws={ws_id}")
            page.reload()
        else:
            if width == PHONE:
                page.locator("#open-drawer").click()
            page.locator(f".ws-item[data-ws-id='{ws_id}']").click()
        last = page.locator(".msg-assistant .md", has_text="Answer number 2.")
        expect(last).to_be_in_viewport()
        page.wait_for_timeout(500)  # later paints (markdown, cards) must not leave it behind
        expect(last).to_be_in_viewport()
        expect(page.locator(".msg-assistant .md", has_text="Let me look (0).")).not_to_be_in_viewport()


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_header_keeps_the_name_while_a_turn_runs(open_page, api, model, workdir, width, screenshot):
    ws_id = api.create_workstream(name="a workstream with a name", working_dir=str(workdir))
    page = open_page(ws_id, viewport=width)
    model.enqueue(Reply(tool_calls=[bash("echo waiting")]))
    send(page, "start something")
    expect(page.locator("#cancel-turn")).to_be_visible()
    title = page.locator("#ws-title")
    box = title.bounding_box()
    assert box and box["width"] >= 100, box  # "a workstream…" at least, not squeezed to nothing
    expect(title).to_be_in_viewport(ratio=1)
    expect(page.locator("#cancel-turn")).to_be_in_viewport(ratio=1)
    screenshot(page, f"running-header-{'phone' if width == PHONE else 'desktop'}")
    page.locator("#cancel-turn").click()
    expect(page.locator("#ws-state")).to_have_text("idle")


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_keyboard_hint_is_for_desktops_only(open_page, api, workdir, width):
    ws_id = api.create_workstream(name="hints", working_dir=str(workdir))
    page = open_page(ws_id, viewport=width)
    hint = page.locator("#composer-hint .keys-hint")
    expect(hint).to_have_text("Enter to send · Shift+Enter for a new line · ? for shortcuts")
    if width == PHONE:
        expect(hint).to_be_hidden()
    else:
        expect(hint).to_be_visible()


@pytest.mark.parametrize("key, status", [("y", "done"), ("n", "error"), ("a", "done")])
def test_y_n_a_decide_a_new_call_from_the_empty_message_box(open_page, api, model, workdir, key, status):
    ws_id = api.create_workstream(name=f"keys {key}", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo from-the-box")]))
    model.enqueue(Reply(text="decided"))
    send(page, "run it")
    expect(page.locator(".card.is-pending")).to_have_count(1)
    expect(page.locator("#message")).to_be_focused()  # still in the box, as after any send
    expect(page.locator("#composer-hint")).to_contain_text("y approves")
    page.keyboard.press(key)
    expect(page.locator(".card").first).to_have_attribute("data-status", status)
    expect(page.locator("#message")).to_have_value("")  # the key decided, it typed nothing
    expect(page.locator(".msg-assistant .md").last).to_have_text("decided")


def test_with_text_in_the_box_y_types_and_decides_nothing(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="keys typed", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo not-yet")]))
    send(page, "run it")
    expect(page.locator(".card.is-pending")).to_have_count(1)
    page.locator("#message").fill("maybe ")
    page.locator("#message").press("y")
    expect(page.locator("#message")).to_have_value("maybe y")
    expect(page.locator(".card.is-pending")).to_have_count(1)
    page.locator(".card.is-pending .btn-deny").click()
    api.wait_idle(ws_id)


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_the_usage_line_is_under_the_answer_in_plain_words(open_page, api, model, workdir, width):
    ws_id = api.create_workstream(name="usage place", working_dir=str(workdir), auto_approve=True)
    page = open_page(ws_id, viewport=width)
    model.enqueue(Reply(tool_calls=[bash("echo step-one")]))
    model.enqueue(Reply(text="The final answer."))
    send(page, "two steps")
    final = page.locator(".msg-assistant .md", has_text="The final answer.")
    expect(final).to_be_visible()
    expect(page.locator("#ws-state")).to_have_text("idle")
    user = page.locator(".msg-user").last.bounding_box()
    lines = page.locator(".turn").last.locator(".usage:visible")
    expect(lines).to_have_count(2)
    answer_box = final.bounding_box()
    first, last = lines.first.bounding_box(), lines.last.bounding_box()
    assert user and answer_box and first and last
    # the first step had no text: its line sits below its tool card, not right under the question
    card = page.locator(".card").last.bounding_box()
    assert card and first["y"] >= card["y"] + card["height"] - 1
    assert last["y"] >= answer_box["y"] + answer_box["height"] - 1  # under the answer it paid for
    expect(lines.last).to_contain_text("tokens")
    # plain words in the header and on the card, the detail kept in a tooltip
    tools = page.locator("#ws-tools")
    if width == DESKTOP:
        expect(tools).to_have_text("16 tools")
    expect(tools).to_have_attribute("title", "all 16 tools are offered to the model")
    decision = page.locator(".card .card-decision").first
    expect(decision).not_to_contain_text("via")


def test_a_decision_says_how_it_was_taken_in_words(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="decision words", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[bash("echo decided")]))
    model.enqueue(Reply(text="ok"))
    send(page, "run it")
    page.locator(".card.is-pending .btn-approve").click()
    decision = page.locator(".card .card-decision")
    expect(decision).to_contain_text("Approved by operator")
    expect(decision).to_contain_text("in the web page or API")
    expect(decision).not_to_contain_text("via http")
    expect(decision.locator(".decision-via")).to_have_attribute("title", "decided through: http")


# The history answered 1.5 s late: the person is typing by the time it arrives.
SLOW_HISTORY = """
const realFetch = window.fetch;
window.fetch = async (url, init) => {
  const answer = await realFetch(url, init);
  if (/\\/history$/.test(String(url))) await new Promise((resolve) => setTimeout(resolve, 1500));
  return answer;
};
"""


def test_a_history_that_arrives_late_leaves_the_focus_where_the_person_types(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="late history", working_dir=str(workdir))
    model.enqueue(Reply(tool_calls=[bash("echo waits")]))
    api.send(ws_id, "start")
    deadline = time.monotonic() + 30
    while not api.workstream(ws_id)["pending_approvals"] and time.monotonic() < deadline:
        time.sleep(0.1)
    page = open_page(ws_id)
    page.add_init_script(SLOW_HISTORY)
    page.reload()
    expect(page.locator("#composer")).to_be_visible()
    page.locator("#message").click()
    page.keyboard.type("a note")
    expect(page.locator(".card.is-pending")).to_have_count(1)  # the history has arrived
    page.wait_for_timeout(300)
    expect(page.locator("#message")).to_be_focused()
    expect(page.locator("#message")).to_have_value("a note")
