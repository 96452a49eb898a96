"""The Account page, at desktop and phone widths: who is signed in, changing one's password (a
wrong current one, two new ones that differ, then a change that ends the other sign-in), and for
an admin the users (create, disable, enable) and everyone's tokens (revoke)."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import DESKTOP, PHONE
from tests.integration.people import PASSWORD, People

pytestmark = pytest.mark.integration

WIDTHS = {"desktop": DESKTOP, "phone": PHONE}
NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture
def people(services) -> People:  # type: ignore[no-untyped-def]
    for key in services.redis.scan_iter("tj:login:*"):  # other tests' failed sign-ins
        services.redis.delete(key)
    return People(services)


def open_account(page: Page, phone: bool) -> None:
    if phone:  # the sidebar is a drawer there
        page.locator("#open-drawer").click()
    button = page.locator("#show-account")
    expect(button).to_be_in_viewport(ratio=1)
    box, width = button.bounding_box(), page.viewport_size["width"]
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= width  # reachable, not clipped
    button.click()
    expect(page.locator("#account")).to_be_visible()


def status(services, token: str) -> int:  # type: ignore[no-untyped-def]
    return httpx.get(
        services.base_url + "/v1/api/me", headers={"Authorization": f"Bearer {token}"}
    ).status_code


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_user_sees_who_they_are_and_changes_their_password(open_page, people, services, width, screenshot):
    alice = people.user("alice")
    other = httpx.post(
        services.base_url + "/v1/api/login", json={"username": alice.name, "password": PASSWORD}
    ).json()["token"]
    page = open_page(sign_in=False, viewport=width)
    page.locator("#username").fill(alice.name)
    page.locator("#password").fill(PASSWORD)
    page.locator("#password").press("Enter")
    expect(page.locator("#app")).to_be_visible()
    phone = width == PHONE
    if phone:
        page.locator("#open-drawer").click()
    expect(page.locator("#whoami")).to_have_text(alice.name)
    if phone:
        page.locator("#scrim").click()
    open_account(page, phone)
    expect(page.locator("#account-who")).to_contain_text(f"Signed in as {alice.name}")
    expect(page.locator("#admin-users")).to_be_hidden()  # not an admin
    expect(page.locator("#tokens-title")).to_have_text("Your tokens")
    expect(page.locator(".token-row", has_text="this sign-in")).to_have_count(1)

    page.locator("#pw-current").fill("not my password")
    page.locator("#pw-new").fill(NEW_PASSWORD)
    page.locator("#pw-again").fill(NEW_PASSWORD)
    page.locator("#password-form button[type=submit]").click()
    expect(page.locator("#password-error")).to_have_text("That is not your current password.")
    expect(page.locator("#app")).to_be_visible()  # a refusal does not sign the page out

    page.locator("#pw-current").fill(PASSWORD)
    page.locator("#pw-again").fill(NEW_PASSWORD + "!")
    page.locator("#password-form button[type=submit]").click()
    expect(page.locator("#password-error")).to_have_text("The two new passwords differ.")

    page.locator("#pw-again").fill(NEW_PASSWORD)
    page.locator("#password-form button[type=submit]").click()
    expect(page.locator("#password-done")).to_contain_text(
        "Password changed. 1 other sign-in was signed out."
    )
    expect(page.locator("#password-done")).to_contain_text("1 API token still works")
    expect(page.locator("#password-error")).to_have_text("")
    screenshot(page, f"account-{'phone' if phone else 'desktop'}")
    assert status(services, other) == 401  # the other sign-in ended
    r = httpx.post(
        services.base_url + "/v1/api/login", json={"username": alice.name, "password": NEW_PASSWORD}
    )
    assert r.status_code == 200
    page.locator("#account-close").click()
    expect(page.locator("#account")).to_be_hidden()
    expect(page.locator("#app")).to_be_visible()  # this sign-in goes on


@pytest.mark.parametrize("width", WIDTHS.values(), ids=WIDTHS.keys())
def test_an_admin_creates_disables_and_enables_users_and_revokes_tokens(
    open_page, people, services, width, screenshot
):
    root, carol = people.user("root", admin=True), people.user("carol")
    page = open_page(viewport=width, token=root.tokens["all"])
    phone = width == PHONE
    open_account(page, phone)
    expect(page.locator("#admin-users")).to_be_visible()
    expect(page.locator("#tokens-title")).to_have_text("Everyone's tokens")
    me = page.locator(f'.user-row[data-user="{root.name}"]')
    expect(me).to_contain_text("you")
    expect(me.locator("button")).to_have_count(0)  # no way to disable oneself

    # a user: a short password is refused with the API's words, then made
    dave = f"dave-{root.name[-6:]}"
    page.locator("#user-name").fill(dave)
    page.locator("#user-password").fill("short")
    page.locator("#user-form button[type=submit]").click()
    expect(page.locator("#user-error")).to_contain_text("password")
    page.locator("#user-password").fill(PASSWORD)
    page.locator("#user-form button[type=submit]").click()
    expect(page.locator(f'.user-row[data-user="{dave}"]')).to_be_visible()
    expect(page.locator("#user-error")).to_have_text("")
    r = httpx.post(services.base_url + "/v1/api/login", json={"username": dave, "password": PASSWORD})
    assert r.status_code == 200

    # carol disabled: her token stops at once; enabled: it works again
    row = page.locator(f'.user-row[data-user="{carol.name}"]')
    row.get_by_role("button", name=f"Disable {carol.name}").click()
    expect(row).to_contain_text("disabled")
    assert status(services, carol.tokens["all"]) == 401
    screenshot(page, f"users-{'phone' if phone else 'desktop'}")
    row.get_by_role("button", name=f"Enable {carol.name}").click()
    expect(row.locator(".tag-warn")).to_have_count(0)
    assert status(services, carol.tokens["all"]) == 200

    # her token, revoked from the list of everyone's
    carol_token = page.locator(".token-row", has_text=carol.name)
    expect(carol_token).to_have_count(1)
    carol_token.get_by_role("button", name="Revoke").click()
    expect(carol_token).to_have_count(0)
    assert status(services, carol.tokens["all"]) == 401
    expect(page.locator(".token-row", has_text="this sign-in")).to_have_count(1)
    assert status(services, root.tokens["all"]) == 200


def test_user_names_and_messages_from_the_server_are_text(open_page, people, services):
    root = people.user("root", admin=True)
    page = open_page(token=root.tokens["all"])
    open_account(page, False)
    page.locator("#user-name").fill("<img src=x onerror=alert(1)>")
    page.locator("#user-password").fill(PASSWORD)
    page.locator("#user-form button[type=submit]").click()
    expect(page.locator("#user-error")).to_contain_text("name")
    assert page.locator("#account img").count() == 0
