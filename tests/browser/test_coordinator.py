"""A coordinator in the web client: made from the create dialog, its panel lists the children it
spawned with their state, shows a child's call awaiting a decision and decides it there, shows
its task list as the tasks tool keeps it, and closes it with its children."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_client import answer, send
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration

COORD = "COORD-PAGE"


# Answers to a workstream's description arrive late: a child's change lands while the panel's
# read of it is under way, and the panel must read again rather than keep what it read.
SLOW_DESCRIBE = """
const realFetch = window.fetch;
window.fetch = async (url, init) => {
  const answer = await realFetch(url, init);
  const method = (init && init.method) || "GET";
  if (method === "GET" && /\\/v1\\/api\\/workstreams\\/[0-9a-f]+$/.test(String(url))) {
    await new Promise((resolve) => setTimeout(resolve, 1500));
  }
  return answer;
};
"""


@pytest.mark.parametrize("reads", ["prompt", "slow"])
def test_a_coordinator_page_shows_children_tasks_and_decides_a_childs_call(
    open_page, api, model, workdir, screenshot, reads
):
    page = open_page()
    if reads == "slow":
        page.add_init_script(SLOW_DESCRIBE)
        page.reload()
        expect(page.locator("#app")).to_be_visible()
    page.locator("#new-ws").click()
    page.locator("#c-name").fill("lead")
    page.locator("#c-dir").fill(str(workdir))
    page.locator("#c-coordinator").check()
    page.locator("#create-form button[type=submit]").click()
    expect(page.locator("#ws-title")).to_have_text("lead")
    panel = page.locator("#coordinator")
    expect(panel).to_be_visible()

    spawn = {"prompt": "CHILD-UI: notes", "name": "<i>scribe</i>", "folder": "shared"}
    task = {"action": "add", "title": "<b>write</b> notes"}
    calls = [ToolCall("tasks", task, id="t1"), ToolCall("spawn_workstream", spawn, id="s1")]
    model.enqueue(Reply(tool_calls=calls), match=COORD)
    model.enqueue(Reply(tool_calls=[ToolCall("wait_for_workstream", {}, id="w1")]), match=COORD)
    model.enqueue(Reply(text="The scribe wrote the notes."), match=COORD)
    model.enqueue(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo noted > notes.txt"}, id="c1")]), match="CHILD-UI"
    )
    model.enqueue(Reply(text="notes written"), match="CHILD-UI")
    send(page, f"{COORD} get notes written")

    child = panel.locator(".coord-child")
    expect(child).to_have_count(1)
    expect(child.locator(".coord-child-name")).to_have_text("<i>scribe</i>")  # text, never markup
    expect(panel.locator(".coord-task-title")).to_have_text("<b>write</b> notes")
    call = child.locator('.coord-call[data-call-id="c1"]')
    expect(call).to_contain_text("echo noted > notes.txt")
    expect(page.locator("#ws-state")).to_have_text("attention", timeout=15_000)
    if reads == "prompt":
        screenshot(page, "desktop-coordinator")
    assert not (workdir / "notes.txt").exists()
    call.get_by_role("button", name="Approve").click()
    expect(answer(page).last).to_have_text("The scribe wrote the notes.", timeout=30_000)
    expect(call).to_have_count(0)
    expect(child).to_have_attribute("data-state", "idle")
    assert (workdir / "notes.txt").read_text() == "noted\n"

    page.once("dialog", lambda d: d.accept())
    panel.get_by_role("button", name="Close all").click()
    expect(child).to_have_attribute("data-state", "closed")
    expect(page.locator("#coord-close")).to_be_hidden()
    # the child is an ordinary workstream of the list: opened from the panel
    page.locator("#coordinator").get_by_role("button", name="Open").click()
    expect(page.locator("#ws-title")).to_have_text("<i>scribe</i>")
    expect(page.locator("#coordinator")).to_be_hidden()
    expect(answer(page).last).to_have_text(re.compile("notes written"))


def test_background_shells_show_with_their_tail_and_stop(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="server", working_dir=str(workdir), auto_approve=True)
    page = open_page(ws_id)
    command = "for i in $(seq 1 600); do echo '<b>tick</b>'$i; sleep 0.05; done"
    call = ToolCall("bash", {"command": command, "run_in_background": True}, id="b1")
    model.enqueue(Reply(tool_calls=[call]))
    model.enqueue(Reply(text="started"))
    send(page, "start the ticker")
    shell = page.locator("#shells .shell")
    expect(shell).to_have_count(1)
    expect(shell).to_have_attribute("data-status", "running")
    # Its tail as text, not markup (which lines it shows depends on when it is read: it moves on)
    expect(shell.locator(".shell-tail")).to_contain_text(re.compile(r"<b>tick</b>\d+"), timeout=20_000)
    expect(page.locator("#shells b")).to_have_count(0)
    shell_id = shell.get_attribute("data-shell-id")
    model.enqueue(Reply(tool_calls=[ToolCall("kill_shell", {"shell_id": shell_id}, id="k1")]))
    model.enqueue(Reply(text="stopped"))
    send(page, "stop it")
    expect(shell).to_have_attribute("data-status", "killed", timeout=20_000)
    expect(page.locator("#shell-count")).to_have_text("Background shells · 0 running of 1")
