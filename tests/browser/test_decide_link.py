"""A pushed approval link opened in Chromium (docs/notify.md#approvals-pushed-out): with no
sign-in, the page shows the waiting calls as text with their verdicts, and Approve with
feedback decides them as the owner; a link that is not one says so and offers nothing."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.people import People

pytestmark = pytest.mark.integration


def test_a_pushed_link_opens_the_decision_without_signing_in(open_page, services, model, chat_platform):
    ann = People(services).user("linkpage")
    headers = {"Authorization": f"Bearer {ann.tokens['all']}"}
    r = httpx.post(
        f"{services.base_url}/v1/api/channels",
        json={"channel_type": "ntfy", "topic": "linkpage-1"},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    mine = ann.api(services)
    ws_id = mine.http.post(
        "/v1/api/workstreams", json={"name": "<i>ops</i>", "notify_approvals": True}
    ).json()["ws_id"]
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo '<b>hi</b>' > made.txt"}, id="l1")]))
    model.enqueue(Reply(text="made"))
    mine.send(ws_id, "make it")
    (pushed,) = chat_platform.wait_for(kind="ntfy", target="linkpage-1")
    path = pushed.body.split("Decide: ", 1)[1].strip()
    assert path.startswith("/#decide?")

    page = open_page(sign_in=False)
    page.goto(services.base_url + path)
    expect(page.locator("#decide")).to_be_visible()
    expect(page.locator("#login")).to_be_hidden()
    expect(page.locator("#decide-title")).to_have_text("<i>ops</i>: approval needed")
    card = page.locator('#decide-items .card[data-call-id="l1"]')
    expect(card.locator(".card-header")).to_have_text("$ echo '<b>hi</b>' > made.txt")
    expect(card.locator(".card-verdict")).to_contain_text("medium risk — writes a file")
    assert page.locator("#decide b, #decide i").count() == 0  # text, never markup
    page.locator("#decide-feedback").fill("fine, once")
    page.locator("#decide-approve").click()
    expect(page.locator("#decide-status")).to_have_text("Approved. The agent goes on.")
    expect(page.locator("#decide-approve")).to_be_disabled()

    def decided() -> dict:
        tools = [m for m in mine.history(ws_id) if m["role"] == "tool"]
        return tools[0]["decision"] if tools else {}

    deadline_tries = 100
    while not decided() and deadline_tries:
        page.wait_for_timeout(100)
        deadline_tries -= 1
    assert (
        decided()["by"] == ann.name and decided()["via"] == "link" and decided()["feedback"] == "fine, once"
    )

    page.reload()  # decided: the link shows nothing to decide
    expect(page.locator("#decide-status")).to_contain_text("This link cannot decide anything")
    expect(page.locator("#decide-approve")).to_be_disabled()

    forged = open_page(sign_in=False)
    forged.goto(services.base_url + path.replace("sig=", "sig=0"))
    expect(forged.locator("#decide-status")).to_contain_text("no such approval link")
