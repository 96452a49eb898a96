"""Fixtures for the browser tests: the service and the fake model server (the integration
fixtures), Debian's Chromium driven by Playwright, and pages signed in to the client.

The service here is package-scoped and on SQLite only: it is stopped before the integration
tests start theirs on the same Redis database, and what these tests prove is the client's
(the integration tests cover both databases behind the same API).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

from tests.fakes.chat_platform import FakeChatPlatform  # noqa: E402
from tests.fakes.model_server import FakeModelServer  # noqa: E402
from tests.integration.conftest import (  # noqa: E402,F401
    _worker_running,
    api,
    chat_platform,
    chat_platform_server,
    model,
    model_server,
    workdir,
)
from tests.integration.services import API_TOKEN, Services  # noqa: E402

CHROMIUM = os.environ.get("TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# A step can wait for the sweeper when its claim races the previous task's last heartbeat
# (stale after 3 s in tests); a user would see it a few seconds later too.
expect.set_options(timeout=15_000)


@pytest.fixture(scope="package")
def services(
    tmp_path_factory: pytest.TempPathFactory,
    model_server: FakeModelServer,  # noqa: F811 - the fixture, by name
    chat_platform_server: FakeChatPlatform,  # noqa: F811 - the fixture, by name
) -> Iterator[Services]:
    tmp = tmp_path_factory.mktemp("service-browser")
    svc = Services("sqlite", tmp, model_server.openai_base_url)
    # A tool source the tool search tests fill (tests.fakes.tool_source); empty, it adds nothing.
    config = tmp / "config.toml"
    config.write_text(
        '[tool_sources.fake]\nfactory = "tests.fakes.tool_source:create"\n'
        f'path = "{tmp / "fake-tools.json"}"\n'
        # a model that searches the web itself (Anthropic's server tool): its sources are links
        f'[models.claude_web]\nprovider = "anthropic"\nmodel = "fake-claude"\n'
        f'base_url = "{model_server.anthropic_base_url}"\n'
        "[models.claude_web.capabilities]\nsupports_web_search = true\n"
        # notify's ntfy is the fake chat platform (pushed approval links: test_decide_link.py)
        f'[notify]\nntfy_base_url = "{chat_platform_server.ntfy_base_url}"\nallow_private_network = true\n'
    )
    svc.env["TURNSTONE_CONFIG"] = str(config)
    try:
        svc.start()
        yield svc
    finally:
        svc.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        missing = f"no Chromium at {CHROMIUM} (apt-get install chromium, or set TEST_CHROMIUM)"
        if os.environ.get("CI"):  # .ci/run installs it: a skip there would hide a broken install
            raise RuntimeError(missing)
        pytest.skip(missing)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def open_page(browser: Browser, services: Services) -> Iterator[Callable[..., Page]]:
    """open_page(ws_id=None, viewport=DESKTOP, sign_in=True, color_scheme="light", base_url=None,
    token=API_TOKEN) -> a page on `/` (of the service's web process, or of the one at `base_url`),
    signed in with `token`."""
    contexts = []
    errors: list[str] = []

    def _open(
        ws_id: str | None = None,
        viewport: dict = DESKTOP,
        sign_in: bool = True,
        color_scheme: str = "light",
        base_url: str | None = None,
        token: str = API_TOKEN,
    ) -> Page:
        context = browser.new_context(viewport=viewport, color_scheme=color_scheme)
        contexts.append(context)
        if sign_in:  # as if the token form had been filled once in this tab
            # the top page only: a sandboxed preview frame has no storage to write
            context.add_init_script(
                f"if (window.top === window) sessionStorage.setItem('turnstone.token', {token!r})"
            )
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto((base_url or services.base_url) + "/" + (f"#ws={ws_id}" if ws_id else ""))
        if sign_in:
            expect(page.locator("#app")).to_be_visible()
        return page

    yield _open
    for context in contexts:
        context.close()
    assert not errors, f"errors in the page: {errors}"


@pytest.fixture
def screenshot() -> Callable[[Page, str], None]:
    """screenshot(page, name): saved under tests/artifacts/screenshots/ (ignored by git); the
    tracked ones in docs/screenshots/ are refreshed only on purpose, with TJ_UPDATE_SCREENSHOTS=1."""

    def _shot(page: Page, name: str) -> None:
        refresh = os.environ.get("TJ_UPDATE_SCREENSHOTS") == "1"
        folder = SCREENSHOTS if refresh else Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"
        folder.mkdir(parents=True, exist_ok=True)
        page.wait_for_timeout(150)  # let the last frame paint
        page.screenshot(path=str(folder / f"{name}.png"))

    return _shot
