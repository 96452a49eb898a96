"""The web client when Redis loses a workstream's events while the page stays open (no web
restart, no reconnect): the server's `replay_truncated` makes the page re-read the history,
and the transcript ends whole, nothing doubled."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app import redis_keys
from tests.browser.test_client import answer, send
from tests.browser.test_recovery import transcript_texts
from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration


def test_an_open_page_rebuilds_from_the_history_when_redis_lost_the_events(
    open_page, api, model, services, workdir
):
    ws_id = api.create_workstream(name="wiped while open", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(text="Kept in the database."))
    send(page, "remember this")
    expect(answer(page)).to_have_text("Kept in the database.")
    expect(page.locator("#ws-state")).to_have_text("idle")
    # Redis restarted empty (or evicted these keys): the next event starts a new id counter.
    services.redis.delete(
        redis_keys.event_seq(ws_id), redis_keys.event_meta(ws_id), redis_keys.event_log(ws_id)
    )
    model.enqueue(Reply(text="And this is new."))
    send(page, "more")
    expect(answer(page).last).to_have_text("And this is new.")
    expect(page.locator("#ws-state")).to_have_text("idle")
    users, answers = transcript_texts(page)
    assert users == ["remember this", "more"]
    assert answers == ["Kept in the database.", "And this is new."]
    model.enqueue(Reply(text="Live again."))
    send(page, "and after")  # the page's cursor is the new counter's: live events flow as before
    expect(answer(page).last).to_have_text("Live again.")
    assert transcript_texts(page)[1] == ["Kept in the database.", "And this is new.", "Live again."]
