"""Everyday use of the web client, in Chromium against the real service, at desktop and phone
width: typing at once starts a workstream that the model titles; the model picker; the
sidebar's search, day groups, pin, archive and rename."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy
from playwright.sync_api import Page, expect

from app.storage.models import Workstream
from tests.browser.conftest import DESKTOP, PHONE
from tests.fakes.model_server import Reply, ToolCall

pytestmark = pytest.mark.integration

WIDTHS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
HOSTILE = "<img src=x onerror=window.__pwned=1>"


def sidebar(page: Page, viewport: dict) -> None:
    """On a phone the list is a drawer: open it."""
    if viewport is PHONE and "drawer-open" not in (page.locator("body").get_attribute("class") or ""):
        page.locator("#open-drawer").click()


def item(page: Page, ws_id: str):  # type: ignore[no-untyped-def]
    return page.locator(f".ws-item[data-ws-id='{ws_id}']")


@pytest.mark.parametrize("viewport", WIDTHS)
def test_typing_at_once_starts_a_workstream_on_the_chosen_model_and_it_gets_a_title(
    open_page, api, model, viewport, screenshot
):
    page = open_page(viewport=viewport)
    expect(page.locator("#start")).to_be_visible()
    expect(page.locator("#message")).to_be_visible()
    if viewport is DESKTOP:
        expect(page.locator("#message")).to_be_focused()  # typing at once means at once
    expect(page.locator("#start-model option[value='claude_web']")).to_contain_text("web search")
    screenshot(page, f"start-{'phone' if viewport is PHONE else 'desktop'}")
    page.locator("#start-model").select_option("claude_web")
    title = f"{HOSTILE} greetings" if viewport is PHONE else "Greetings exchanged"
    model.enqueue_title(Reply(text=title), match="hello there")
    model.enqueue(Reply(text="Hello to you."))
    page.locator("#message").fill("hello there")
    page.locator("#message").press("Enter")
    expect(page.locator(".msg-assistant .md")).to_have_text("Hello to you.")
    expect(page.locator("#start")).to_be_hidden()
    expect(page.locator("#ws-title")).to_have_text(title)  # the title arrives as an event
    ws_id = page.evaluate("location.hash").removeprefix("#ws=")
    ws = api.workstream(ws_id)
    assert (ws["name"], ws["model"]) == (title, "claude_web")
    expect(page.locator("#ws-model")).to_have_value("claude_web")
    sidebar(page, viewport)
    expect(item(page, ws_id).locator(".ws-name")).to_have_text(title)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert [m["content"] for m in api.history(ws_id)] == ["hello there", "Hello to you."]


@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_header_picker_changes_the_model_between_turns_only(
    open_page, api, model, workdir, viewport, screenshot
):
    ws_id = api.create_workstream(name="picker", working_dir=str(workdir))
    page = open_page(ws_id, viewport=viewport)
    picker = page.locator("#ws-model")
    expect(picker).to_have_value("")
    picker.select_option("claude_web")
    expect(page.locator("#composer-hint")).to_contain_text("The next turn uses claude_web")
    assert api.workstream(ws_id)["model"] == "claude_web"

    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "true"})]))
    model.enqueue(Reply(text="ran"))
    page.locator("#message").fill("run it")
    page.locator("#message").press("Enter")
    expect(page.locator("#pending-bar")).to_be_visible()
    picker.select_option("")
    expect(page.locator("#composer-hint")).to_contain_text("once the running turn has ended")
    expect(picker).to_have_value("claude_web")  # put back: nothing changed
    screenshot(page, f"model-picker-{'phone' if viewport is PHONE else 'desktop'}")
    assert api.workstream(ws_id)["model"] == "claude_web"
    page.locator("#approve-all").click()
    expect(page.locator("#ws-state")).to_have_text("idle")
    picker.select_option("")
    expect(page.locator("#composer-hint")).to_contain_text("the default model")
    assert api.workstream(ws_id)["model"] is None


def test_the_create_dialog_offers_the_configured_models(open_page, api):
    page = open_page()
    page.locator("#new-ws").click()
    expect(page.locator("#c-model option[value='claude_web']")).to_have_count(1)
    page.locator("#c-name").fill("made with a model")
    page.locator("#c-model").select_option("claude_web")
    page.locator("#create-form button[type=submit]").click()
    expect(page.locator("#ws-title")).to_have_text("made with a model")
    expect(page.locator("#ws-model")).to_have_value("claude_web")


def backdate(services, ws_id: str, days: float) -> None:  # type: ignore[no-untyped-def]
    """Its last activity `days` ago (no API moves time): written where the service reads it."""
    engine = sqlalchemy.create_engine(services.db.url)
    when = datetime.now(UTC) - timedelta(days=days)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.update(Workstream).where(Workstream.id == ws_id).values(updated_at=when))
    engine.dispose()


@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_sidebar_searches_groups_pins_archives_and_renames(
    open_page, api, services, viewport, screenshot
):
    # Unique to this test: the service is shared, and other tests' names say "phone" too.
    width = "desk" if viewport is DESKTOP else "phone"
    stamp = f"{width}-{uuid.uuid4().hex[:6]}"
    today = api.create_workstream(name=f"alpha release {stamp}")
    yesterday = api.create_workstream(name=f"{HOSTILE} beta {stamp}")
    earlier = api.create_workstream(name=f"gamma notes {stamp}")
    backdate(services, yesterday, 1)  # a day ago is always yesterday
    backdate(services, earlier, 10)
    page = open_page(viewport=viewport)
    sidebar(page, viewport)
    page.locator("#ws-search").fill(stamp)
    names = page.locator(".ws-item .ws-name")
    expect(names).to_have_count(3)
    groups = page.locator(".ws-group")
    expect(groups).to_have_text(["Today", "Yesterday", "Earlier"])
    expect(item(page, yesterday).locator(".ws-name")).to_have_text(f"{HOSTILE} beta {stamp}")  # as text
    expect(item(page, today).locator(".ws-when")).to_have_text("just now")

    page.locator("#ws-search").fill(f"ALPHA RELEASE {stamp}")  # by name, at once, any case
    expect(names).to_have_text([f"alpha release {stamp}"])
    page.locator("#ws-search").fill(f"nothing like it {stamp}")
    expect(page.locator(".ws-none")).to_have_text("No workstream matches.")
    page.locator("#ws-search").fill(stamp)

    item(page, earlier).locator(".ws-pin").click()
    expect(groups.first).to_have_text("Pinned")
    expect(names.first).to_have_text(f"gamma notes {stamp}")
    assert api.workstream(earlier)["pinned"] is True

    item(page, yesterday).locator(".ws-archive").click()
    expect(item(page, yesterday)).to_have_count(0)
    assert api.workstream(yesterday)["archived"] is True
    page.locator("#ws-show-archived").check()
    expect(item(page, yesterday)).to_have_class(re.compile(r"\bis-archived\b"))
    item(page, yesterday).locator(".ws-archive").click()  # unarchive
    page.locator("#ws-show-archived").uncheck()
    expect(item(page, yesterday)).to_have_count(1)

    item(page, today).locator(".ws-rename").click()
    box = page.locator(".ws-item .name-edit")
    with page.expect_response(lambda r: r.url.endswith("/v1/api/workstreams") and r.request.method == "GET"):
        pass  # the list's poll comes and goes: the box being typed in stays
    box.fill(f"renamed <b>{stamp}</b>")
    box.press("Enter")
    expect(item(page, today).locator(".ws-name")).to_have_text(f"renamed <b>{stamp}</b>")
    assert api.workstream(today)["name"] == f"renamed <b>{stamp}</b>"
    screenshot(page, f"sidebar-{width}")

    item(page, today).locator(".ws-name").click()
    expect(page.locator("#ws-title")).to_have_text(f"renamed <b>{stamp}</b>")
    expect(page.locator("#message")).to_be_focused()  # opened
    page.locator("#rename-ws").click()
    page.locator(".topbar .name-edit").fill("from the header")
    page.locator(".topbar .name-edit").press("y")  # a letter in the box, not a decision
    page.locator(".topbar .name-edit").press("Enter")
    expect(page.locator("#ws-title")).to_have_text("from the headery")
    assert api.workstream(today)["name"] == "from the headery"
    page.locator("#rename-ws").click()
    page.locator(".topbar .name-edit").fill("never mind")
    page.locator(".topbar .name-edit").press("Escape")
    expect(page.locator("#ws-title")).to_have_text("from the headery")
    assert page.evaluate("typeof window.__pwned") == "undefined"
