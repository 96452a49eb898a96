"""Compaction in the web client (docs/compaction.md), in Chromium against the real service: a
summary shows as "N earlier messages summarised", live and from the history, and opens on the
summary and the messages it stands for, as text."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.model_server import Reply

pytestmark = pytest.mark.integration

HOSTILE = "<img src=x onerror=\"document.title='owned'\">"


def test_a_summary_shows_as_n_earlier_messages_and_opens_on_them(open_page, api, model, workdir):
    ws_id = api.create_workstream(name="compacted", working_dir=str(workdir))
    page = open_page(ws_id)
    for n in range(5):  # ten messages: the newest six (the default keep_last) stay whole
        model.enqueue(Reply(text=f"answer {n}"))
        page.locator("#message").fill(f"question {n} {HOSTILE}")
        page.locator("#message").press("Enter")
        expect(page.locator(".msg-assistant .md").nth(n)).to_have_text(f"answer {n}")
    expect(page.locator("#ws-state")).to_have_text("idle")
    model.enqueue(Reply(text=f"SUMMARY of two questions {HOSTILE}"), "Summarise this part")
    assert api.http.post(f"/v1/api/workstreams/{ws_id}/compact").status_code == 202
    marker = page.locator(".compaction-marker")
    expect(marker.locator("summary")).to_have_text("4 earlier messages summarised")  # live
    marker.locator("summary").click()
    expect(marker.locator(".compaction-summary")).to_have_text(f"SUMMARY of two questions {HOSTILE}")
    originals = marker.locator(".compaction-original")
    expect(originals).to_have_count(4)
    expect(originals.first).to_have_text(f"user: question 0 {HOSTILE}")
    assert page.locator(".compaction-marker img").count() == 0 and page.title() != "owned"
    page.reload()
    expect(page.locator(".compaction-marker summary")).to_have_text("4 earlier messages summarised")
