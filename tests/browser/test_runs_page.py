"""The Runs and Schedules page, at desktop and phone widths: runs with their status and prompt,
opened in their workstream or cancelled; schedules made with a form that shows the API's message
for a bad cron expression, then paused, resumed and deleted."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import DESKTOP, PHONE
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.client import wait_until
from tests.integration.people import People

pytestmark = pytest.mark.integration

WIDTHS = {"desktop": DESKTOP, "phone": PHONE}


@pytest.fixture
def people(services) -> People:  # type: ignore[no-untyped-def]
    return People(services)


def open_runs(page: Page, phone: bool) -> None:
    if phone:
        page.locator("#open-drawer").click()
    expect(page.locator("#show-runs")).to_be_in_viewport(ratio=1)
    page.locator("#show-runs").click()
    expect(page.locator("#runs")).to_be_visible()


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_runs_are_listed_opened_and_cancelled(open_page, people, services, model, width, screenshot):
    person = people.user("runner")
    http = person.api(services).http
    model.enqueue(Reply(text="the report is done"))
    done = http.post("/v1/api/runs", json={"prompt": "write the <b>nightly</b> report"}).json()
    wait_until(lambda: http.get(f"/v1/api/runs/{done['run_id']}").json()["status"] == "succeeded", 60)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo waits"})]))
    waiting = http.post("/v1/api/runs", json={"prompt": "a run that waits for a person"}).json()
    wait_until(
        lambda: http.get(f"/v1/api/runs/{waiting['run_id']}").json()["status"] == "awaiting_approval", 60
    )

    phone = width == PHONE
    page = open_page(viewport=width, token=person.tokens["all"])
    open_runs(page, phone)
    finished = page.locator(f'.run-row[data-run-id="{done["run_id"]}"]')
    expect(finished.locator(".run-status")).to_have_text("succeeded")
    expect(finished.locator(".run-prompt")).to_have_text("write the <b>nightly</b> report")  # as text
    expect(finished.get_by_role("button", name="Cancel")).to_have_count(0)  # it has ended
    pending = page.locator(f'.run-row[data-run-id="{waiting["run_id"]}"]')
    expect(pending.locator(".run-status")).to_have_text("waiting for approval")
    screenshot(page, f"runs-{'phone' if phone else 'desktop'}")
    pending.get_by_role("button", name="Cancel").click()
    wait_until(lambda: http.get(f"/v1/api/runs/{waiting['run_id']}").json()["status"] == "cancelled", 60)
    page.locator("#runs-refresh").click()
    expect(pending.locator(".run-status")).to_have_text("cancelled")

    finished.get_by_role("button", name="Open").click()
    expect(page.locator("#runs")).to_be_hidden()
    expect(page.locator(".msg-assistant").last).to_have_text("the report is done")
    assert page.evaluate("location.hash") == f"#ws={done['ws_id']}"


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_schedule_is_made_paused_resumed_and_deleted(open_page, people, services, width):
    person = people.user("scheduler")
    phone = width == PHONE
    page = open_page(viewport=width, token=person.tokens["all"])
    page.on("dialog", lambda d: d.accept())
    open_runs(page, phone)
    expect(page.locator("#schedules-list")).to_contain_text("No schedules.")

    page.locator("#schedule-when").fill("61 * * * *")
    page.locator("#schedule-tz").fill("Europe/Berlin")
    page.locator("#schedule-prompt").fill("check the <i>queue</i>")
    page.locator("#schedule-form button[type=submit]").click()
    expect(page.locator("#schedule-error")).to_contain_text("cron")  # the API's 422, in its words
    expect(page.locator(".schedule-row")).to_have_count(0)
    page.locator("#schedule-tz").fill("Mars/Olympus")
    page.locator("#schedule-when").fill("30 9 * * 1-5")
    page.locator("#schedule-form button[type=submit]").click()
    expect(page.locator("#schedule-error")).to_contain_text("timezone")

    page.locator("#schedule-tz").fill("Europe/Berlin")
    page.locator("#schedule-form button[type=submit]").click()
    row = page.locator(".schedule-row")
    expect(row).to_have_count(1)
    expect(page.locator("#schedule-error")).to_have_text("")
    expect(row).to_contain_text("cron 30 9 * * 1-5")
    expect(row).to_contain_text("Europe/Berlin")
    expect(row).to_contain_text("check the <i>queue</i>")
    expect(row.locator(".schedule-next")).to_contain_text("next: ")

    row.get_by_role("button", name="Pause").first.click()
    expect(row.locator(".schedule-next")).to_have_text("paused: fires no more until resumed")
    (schedule,) = person.api(services).http.get("/v1/api/schedules").json()["schedules"]
    assert schedule["paused"] is True and schedule["next_fire_times"] == []
    row.get_by_role("button", name="Resume").first.click()
    expect(row.locator(".schedule-next")).to_contain_text("next: ")

    page.locator("#schedule-kind").select_option("every")
    page.locator("#schedule-when").fill("0")
    page.locator("#schedule-prompt").fill("tidy up")  # the form was cleared once it made one
    page.locator("#schedule-form button[type=submit]").click()
    expect(page.locator("#schedule-error")).to_contain_text("every")  # not a positive number: the API says so
    page.locator("#schedule-when").fill("3600")
    page.locator("#schedule-form button[type=submit]").click()
    expect(row).to_have_count(2)
    expect(page.locator(".schedule-row", has_text="every 1 h")).to_have_count(1)

    for _ in range(2):
        page.locator(".schedule-row").first.get_by_role("button", name="Delete").first.click()
    expect(page.locator(".schedule-row")).to_have_count(0)
    assert person.api(services).http.get("/v1/api/schedules").json()["schedules"] == []
