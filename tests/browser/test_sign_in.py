"""Signing in to the web client with a user name and password: who is signed in, a wrong
password, the throttle, decisions shown with who took them, and signing out."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.fakes.model_server import Reply, ToolCall
from tests.integration.people import PASSWORD, People

pytestmark = pytest.mark.integration


@pytest.fixture
def people(services) -> People:  # type: ignore[no-untyped-def]
    for key in services.redis.scan_iter("tj:login:*"):  # other tests' failed sign-ins
        services.redis.delete(key)
    return People(services)


def sign_in(page: Page, name: str, password: str) -> None:
    page.locator("#username").fill(name)
    page.locator("#password").fill(password)
    page.locator("#password").press("Enter")


def test_sign_in_with_a_password_decide_and_sign_out(open_page, people, services, model, workdir, screenshot):
    alice, bob = people.user("alice"), people.user("bob")
    bob.api(services).create_workstream(name="bob's private work")
    page = open_page(sign_in=False)
    expect(page.locator("#login")).to_be_visible()
    sign_in(page, alice.name, "not her password")
    expect(page.locator("#login-error")).to_have_text("Wrong user name or password.")
    sign_in(page, alice.name, PASSWORD)
    expect(page.locator("#app")).to_be_visible()
    expect(page.locator("#whoami")).to_have_text(alice.name)
    token = page.evaluate("sessionStorage.getItem('turnstone.token')")
    assert token and token.startswith("tj_")
    expect(page.locator(".ws-item")).to_have_count(0)  # bob's workstream is not hers to see

    page.locator("#new-ws").click()
    page.locator("#c-name").fill("alice signs in")
    expect(page.locator("#c-dir")).to_be_hidden()  # only an admin names a folder
    page.locator("#create-form button[type=submit]").click()
    expect(page.locator("#ws-title")).to_have_text("alice signs in")
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo decided-in-the-browser"})]))
    model.enqueue(Reply(text="done"))
    page.locator("#message").fill("run it")
    page.locator("#message").press("Enter")
    card = page.locator(".card.is-pending")
    expect(card).to_have_count(1)
    card.locator(".btn-approve").click()
    decision = page.locator(".card .card-decision")
    expect(decision).to_contain_text(f"Approved by {alice.name}")
    expect(decision).to_contain_text("in the web page or API")  # through http: in the tooltip
    expect(page.locator(".card .card-output")).to_contain_text("decided-in-the-browser")
    expect(page.locator("#ws-state")).to_have_text("idle")
    screenshot(page, "desktop-signed-in")

    # after a reload the decision comes from the history, with who took it
    page.reload()
    expect(page.locator(".card .card-decision")).to_contain_text(f"Approved by {alice.name}")

    # Every button of the sidebar's foot lies inside the sidebar, where a click reaches it.
    sidebar = page.locator(".sidebar").bounding_box()
    for button in page.locator(".sidebar-foot button:visible").all():
        box = button.bounding_box()
        assert box and box["x"] >= sidebar["x"] and box["x"] + box["width"] <= sidebar["x"] + sidebar["width"]
    page.locator("#sign-out").click()
    expect(page.locator("#login")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('turnstone.token')") is None
    r = httpx.get(services.base_url + "/v1/api/me", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401  # signing out revoked the sign-in's token


def test_repeated_wrong_passwords_are_slowed_down_in_the_page(open_page, people):
    alice = people.user("alice")
    page = open_page(sign_in=False)
    for _ in range(5):
        sign_in(page, alice.name, "guess")
        expect(page.locator("#login-error")).to_have_text("Wrong user name or password.")
        page.locator("#login-error").evaluate("e => e.textContent = ''")
    sign_in(page, alice.name, PASSWORD)
    expect(page.locator("#login-error")).to_contain_text("try again in")
    expect(page.locator("#app")).to_be_hidden()
