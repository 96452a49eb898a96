"""The client survives what a network and a deployment do to it: the web process restarted
mid-turn, and a page reloaded mid-stream; the transcript ends up whole, nothing doubled."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_client import answer, bash, send
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration


def transcript_texts(page: Page) -> tuple[list[str], list[str]]:
    users = [t.strip() for t in page.locator(".msg-user .bubble").all_inner_texts()]
    answers = [t.strip() for t in answer(page).all_inner_texts()]
    return users, answers


def test_web_restart_mid_turn_then_reload_keeps_the_full_transcript(open_page, api, model, services, workdir):
    ws_id = api.create_workstream(name="restart", working_dir=str(workdir))
    page = open_page(ws_id)
    words = [f"w{i} " for i in range(40)]
    model.enqueue(Reply(chunks=words, chunk_delay=0.1))
    send(page, "stream through a restart")
    expect(answer(page)).to_contain_text("w5")
    services.restart_web()  # every websocket drops; the stream goes on in the worker
    expect(page.locator("#ws-state")).to_have_text("idle", timeout=20_000)
    expect(page.locator("#conn")).to_have_attribute("data-conn", "live", timeout=20_000)
    full = "".join(words).strip()
    assert transcript_texts(page) == (["stream through a restart"], [full])

    page.reload()  # rebuilt from the history plus the replay
    expect(page.locator("#conn")).to_have_attribute("data-conn", "live")
    expect(answer(page)).to_have_text(full)
    assert transcript_texts(page) == (["stream through a restart"], [full])


def test_reload_mid_stream_and_mid_tool_output_misses_nothing(open_page, api, model, workdir, screenshot):
    ws_id = api.create_workstream(name="reload", working_dir=str(workdir), auto_approve=True)
    page = open_page(ws_id, color_scheme="dark")
    model.enqueue(Reply(text="First answer."), match="one")
    send(page, "one")
    expect(answer(page)).to_have_text("First answer.")

    words = [f"v{i} " for i in range(30)]
    slow_output = bash("for i in 1 2 3 4; do echo out$i; sleep 0.5; done")
    model.enqueue(Reply(chunks=words, chunk_delay=0.08, tool_calls=[slow_output]), match="two")
    model.enqueue(Reply(text="All done."))
    send(page, "two")
    expect(answer(page).nth(1)).to_contain_text("v5")
    page.reload()  # mid-stream: the streamed part is not stored yet
    expect(answer(page).nth(1)).to_contain_text("v29")
    expect(page.locator(".card-output")).to_contain_text("out1")
    page.reload()  # mid-output: the call's result is not stored yet
    expect(page.locator(".card")).to_have_attribute("data-status", "done", timeout=10_000)
    expect(answer(page).nth(2)).to_have_text("All done.")
    users, answers = transcript_texts(page)
    assert users == ["one", "two"]
    assert answers == ["First answer.", "".join(words).strip(), "All done."]
    assert page.locator(".card-output").inner_text().split() == ["out1", "out2", "out3", "out4"]
    assert page.locator(".card").count() == 1
    screenshot(page, "desktop-dark-tool-output")


def test_replay_truncated_rebuilds_from_the_history(open_page, api, model, services, workdir):
    from app import redis_keys

    ws_id = api.create_workstream(name="truncated", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(text="Kept in the database."))
    send(page, "remember this")
    expect(answer(page)).to_have_text("Kept in the database.")
    expect(page.locator("#ws-state")).to_have_text("idle")
    # Redis loses the log and the counter: the page's cursor is now ahead of the log and new
    # events start again from id 1, which the page would drop unless it re-reads the history.
    services.redis.delete(redis_keys.event_log(ws_id), redis_keys.event_seq(ws_id))
    services.restart_web()
    expect(page.locator("#conn")).to_have_attribute("data-conn", "live")
    model.enqueue(Reply(text="And this is new."))
    send(page, "more")
    expect(answer(page).last).to_have_text("And this is new.")
    users, answers = transcript_texts(page)
    assert users == ["remember this", "more"]
    assert answers == ["Kept in the database.", "And this is new."]


def test_a_page_refused_at_a_socket_cap_waits_and_connects_once_a_place_frees(open_page, services, model):
    """A user may hold one socket here: the page's socket is refused (429, close 1013), and the
    page neither gives up nor hammers; once the other socket closes it connects and shows the
    workstream's events."""
    from tests.integration.client import EventSocket
    from tests.integration.people import People
    from tests.integration.services import free_port

    env = {"TURNSTONE_SOCKETS_PER_PRINCIPAL": "1"}
    base_url = services.start_web(name="web-capped", port=free_port(), env=env)
    try:
        person = People(services).user("capped")  # the operator's sockets add up across tests
        token = person.tokens["all"]
        api = person.api(services)
        ws_id = api.create_workstream(name="capped")
        model.enqueue(Reply(text="The first answer."))
        api.send(ws_id, "first")
        held = EventSocket(base_url, token, ws_id)
        held.wait_type("content")  # the one place is taken
        page = open_page(ws_id, base_url=base_url, token=token)
        expect(answer(page)).to_have_text("The first answer.")  # the history, over HTTP
        model.enqueue(Reply(text="The second answer."))
        api.send(ws_id, "second")
        held.wait_type("state_change")
        page.wait_for_timeout(2500)  # refused (and waiting to try again) meanwhile
        expect(page.locator("#conn")).not_to_have_attribute("data-conn", "live")
        expect(answer(page)).to_have_count(1)
        held.close()
        expect(answer(page).last).to_have_text("The second answer.", timeout=30_000)
        expect(page.locator("#conn")).to_have_attribute("data-conn", "live")
    finally:
        services.kill("web-capped")
