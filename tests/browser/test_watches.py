"""Watches in the web client: the list above the conversation (name, command, interval, polls,
next poll) with cancel, and a watch's result shown as the watch's message, live and on reload."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.storage.database import Database
from app.storage.models import Message
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def create(name: str, command: str, stop_on: str, every: str = "1h") -> ToolCall:
    args = {"action": "create", "name": name, "command": command, "stop_on": stop_on, "poll_every": every}
    return ToolCall("watch", args)


def test_the_watch_list_shows_each_watch_and_cancels_one(open_page, api, model, workdir, screenshot):
    ws_id = api.create_workstream(name="watch list", working_dir=str(workdir), auto_approve=True)
    page = open_page(ws_id)
    ci_call = create("ci", "echo pending", "'passed' in output")
    deploy_call = create("deploy", "echo '<b>not html</b>'", "False", every="30s")
    model.enqueue(Reply(tool_calls=[ci_call, deploy_call]))
    model.enqueue(Reply(text="Watching CI and the deploy."))
    page.locator("#message").fill("watch ci and the deploy")
    page.locator("#message").press("Enter")
    rows = page.locator("#watches .watch")
    expect(rows).to_have_count(2)
    ci = page.locator(".watch", has_text="ci")
    expect(page.locator("#watch-count")).to_have_text("2 active watches")
    expect(ci.locator(".watch-command")).to_have_text("echo pending")
    expect(ci.locator(".watch-every")).to_have_text("every 1h")
    expect(ci.locator(".watch-polls")).to_have_text("1/100 polls")  # polled at once by beat's pass
    expect(ci.locator(".watch-next")).to_have_text(re.compile(r"^next poll in 59m \d+s$"))
    deploy = page.locator(".watch", has_text="deploy")
    expect(deploy.locator(".watch-command")).to_have_text("echo '<b>not html</b>'")
    assert deploy.locator("b").count() == 0  # text, never markup
    screenshot(page, "desktop-watches")

    ci.get_by_role("button", name="Cancel").click()
    expect(rows).to_have_count(1)
    expect(page.locator("#watch-count")).to_have_text("1 active watch")
    listed = api.http.get(f"/v1/api/workstreams/{ws_id}/watches").json()["watches"]
    assert {w["name"]: w["status"] for w in listed} == {"ci": "cancelled", "deploy": "active"}
    page.reload()
    expect(page.locator("#watches .watch")).to_have_count(1)
    expect(page.locator("#watches .watch-name")).to_have_text("deploy")


def test_a_fired_watch_shows_as_the_watchs_message_and_its_turn_follows(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="watch fires", working_dir=str(workdir), auto_approve=True)
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[create("tests", "echo all green", "'green' in output")]))
    model.enqueue(Reply(text="I will tell you."))
    model.enqueue(Reply(text="The tests are green."), match="[watch 'tests' fired")
    page.locator("#message").fill("tell me when the tests pass")
    page.locator("#message").press("Enter")
    watch_message = page.locator(".msg-watch")
    expect(watch_message.locator(".bubble")).to_contain_text("[watch 'tests' fired")
    expect(watch_message.locator(".origin-tag")).to_have_text("from a watch")
    expect(page.locator(".msg-assistant .md").last).to_have_text("The tests are green.")
    expect(page.locator("#watches")).to_be_hidden()  # nothing active any more
    page.reload()
    expect(page.locator(".msg-watch .origin-tag")).to_have_text("from a watch")
    expect(page.locator(".msg-user:not(.msg-watch) .bubble")).to_have_text("tell me when the tests pass")


def test_a_held_watch_result_is_shown_apart_and_once(open_page, api, model, workdir, services):
    """What the depth guard stores without a turn (see test_watch_polling for the guard itself)."""
    ws_id = api.create_workstream(name="held", working_dir=str(workdir))
    model.enqueue(Reply(text="Hello."))
    api.send(ws_id, "hi")
    api.wait_idle(ws_id)
    held = "[watch 'loop' fired: the command's output changed (poll 2, every 10s)]\n$ date\n<i>x</i>"
    db = Database(services.db.url)
    with db.session() as s:
        s.add(Message(ws_id=ws_id, turn_id=None, role="user", content=held, origin="watch"))
    db.dispose()
    page = open_page(ws_id)
    note = page.locator(".msg-watch.is-held")
    expect(note).to_have_count(1)
    expect(note.locator(".bubble")).to_have_text(held)
    expect(note.locator(".origin-tag")).to_contain_text("started no turn")
    assert note.locator("i").count() == 0
    expect(page.locator(".msg-user:not(.msg-watch) .bubble")).to_have_text("hi")
