"""The web client's tool policies page in Chromium (admins only): a rule added through the form
is listed with its patterns and reason as text, a refused pattern says why, a rule is deleted;
a user who is no admin has no button for it; Escape closes it (and the Skills panel), and no
shortcut reaches the page behind while it is open."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.people import People

pytestmark = pytest.mark.integration


def test_an_admin_adds_lists_and_deletes_rules(open_page, api, services, screenshot):
    page = open_page()
    page.locator("#show-policies").click()
    panel = page.locator("#policies")
    expect(panel).to_be_visible()
    page.locator("#policy-effect").select_option("ask")
    page.locator("#policy-tool").fill("bash")
    page.locator("#policy-command").fill("git push*")
    page.locator("#policy-reason").fill("<img src=x onerror=alert(1)> a person looks first")
    page.locator("#policy-add").click()
    row = panel.locator('[data-effect="ask"]')
    expect(row.locator(".policy-tool")).to_have_text("bash")
    expect(row.locator(".policy-command")).to_have_text("git push*")
    expect(row.locator(".policy-user")).to_have_text("everyone")
    expect(row.locator(".policy-reason")).to_have_text("<img src=x onerror=alert(1)> a person looks first")
    assert panel.locator("img").count() == 0
    rule_id = row.get_attribute("data-policy-id")
    stored = {r["id"]: r for r in api.http.get("/v1/api/policies").json()["policies"]}
    assert stored[rule_id]["command"] == "git push*" and stored[rule_id]["effect"] == "ask"
    screenshot(page, "policies-page")

    page.locator("#policy-tool").fill("ba(sh)+")  # not a tool glob: the server's words show
    page.locator("#policy-add").click()
    expect(page.locator("#policy-error")).to_contain_text("tool")

    row.get_by_role("button", name="Delete rule ask bash").click()
    expect(panel.locator(f'[data-policy-id="{rule_id}"]')).to_have_count(0)
    assert rule_id not in {r["id"] for r in api.http.get("/v1/api/policies").json()["policies"]}


def test_a_user_who_is_no_admin_has_no_policies_button(open_page, services):
    person = People(services).user("plainpage")
    page = open_page(token=person.tokens["all"])
    expect(page.locator("#show-skills")).to_be_visible()
    expect(page.locator("#show-policies")).to_be_hidden()


def test_escape_closes_the_skills_and_policies_panels_and_no_key_decides_behind_them(
    open_page, api, model, workdir
):
    ws_id = api.create_workstream(name="behind a panel", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo never"}, id="b1")]))
    model.enqueue(Reply(text="done"))
    page.locator("#message").fill("go")
    page.locator("#message").press("Enter")
    expect(page.locator('.card.is-pending[data-call-id="b1"]')).to_have_count(1)
    for button, panel in (("#show-skills", "#skills"), ("#show-policies", "#policies")):
        page.locator(button).click()
        expect(page.locator(panel)).to_be_visible()
        page.locator(f"{panel} h2").first.click()  # the focus in the panel, on no field
        page.keyboard.press("y")  # a shortcut of the page behind: not while a panel is open
        page.keyboard.press("Escape")
        expect(page.locator(panel)).to_be_hidden()
    expect(page.locator('.card.is-pending[data-call-id="b1"]')).to_have_count(1)
    assert [i["call_id"] for i in api.workstream(ws_id)["pending_approvals"]] == ["b1"]
    api.approve(ws_id, approved=False)
