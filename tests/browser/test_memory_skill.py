"""The web client's memories panel and the workstream header's active skill, in Chromium
against the real service."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration


def send(page: Page, text: str) -> None:
    page.locator("#message").fill(text)
    page.locator("#message").press("Enter")


def save(page: Page, model, **args: str) -> None:
    model.enqueue(Reply(tool_calls=[ToolCall("memory", {"action": "save", **args})]))
    model.enqueue(Reply(text="Saved."))
    done = page.locator(".msg-assistant .md", has_text="Saved.")
    before = done.count()
    send(page, f"remember {args['name']}")
    expect(done).to_have_count(before + 1)
    expect(page.locator("#ws-state")).to_have_text("idle")


def test_the_memories_panel_lists_searches_and_deletes(open_page, api, model, workdir, screenshot):
    ws_id = api.create_workstream(name="memories demo", working_dir=str(workdir))
    page = open_page(ws_id)
    save(page, model, name="release_day", content="We release on Tuesdays <b>never</b> Fridays",
         description="when we ship")  # fmt: skip
    save(page, model, name="editor", content="The user writes in Helix", type="user", scope="workstream")

    page.locator("#show-memories").click()
    panel = page.locator("#memories")
    expect(panel).to_be_visible()
    items = panel.locator(".memory")
    expect(items).to_have_count(2)
    expect(items.first.locator(".memory-name")).to_have_text("editor")  # newest first
    release = panel.locator('.memory[data-name="release_day"]')
    expect(release.locator(".memory-content")).to_have_text("We release on Tuesdays <b>never</b> Fridays")
    expect(release.locator(".memory-desc")).to_have_text("when we ship")
    expect(panel.locator('.memory[data-name="editor"] .memory-tag').nth(1)).to_have_text(
        f"workstream {ws_id[:6]}"
    )
    screenshot(page, "memories-panel")

    page.locator("#memories-search").fill("tuesdays")
    expect(items).to_have_count(1)
    expect(items.first.locator(".memory-name")).to_have_text("release_day")
    release.get_by_role("button", name=re.compile("Delete")).click()
    expect(panel.locator(".memory-none")).to_have_text("No memory matches.")
    page.locator("#memories-search").fill("")
    expect(items).to_have_count(1)
    assert [m["name"] for m in api.http.get("/v1/api/memories").json()["memories"]] == ["editor"]
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    for memory in api.http.get("/v1/api/memories").json()["memories"]:
        api.http.delete(f"/v1/api/memories/{memory['id']}")


def test_the_header_shows_the_active_skill_and_follows_a_load(open_page, api, model, workdir):
    for name in ("triage", "release-notes"):
        body = {"name": name, "description": f"{name} work", "content": f"You do {name}."}
        assert api.http.post("/v1/api/skills", json=body).status_code == 201
    try:
        r = api.http.post(
            "/v1/api/workstreams", json={"name": "skilled", "skill": "triage", "working_dir": str(workdir)}
        )
        page = open_page(r.json()["ws_id"])
        badge = page.locator("#ws-skill")
        expect(badge).to_have_text("skill: triage")

        model.enqueue(Reply(tool_calls=[ToolCall("skill", {"action": "load", "name": "release-notes"})]))
        model.enqueue(Reply(text="Switched."))
        send(page, "switch to release notes")
        card = page.locator(".card.is-pending")
        expect(card).to_have_count(1)
        expect(badge).to_have_text("skill: triage")  # not before a person approves
        card.get_by_role("button", name=re.compile("^Approve")).click()
        expect(badge).to_have_text("skill: release-notes")
        page.reload()
        expect(page.locator("#ws-skill")).to_have_text("skill: release-notes")

        plain = open_page(api.create_workstream(name="plain", working_dir=str(workdir)))
        expect(plain.locator("#ws-title")).to_have_text("plain")
        expect(plain.locator("#ws-skill")).to_be_hidden()
    finally:
        for name in ("triage", "release-notes"):
            api.http.delete(f"/v1/api/skills/{name}")
