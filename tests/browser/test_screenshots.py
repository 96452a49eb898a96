"""Running the tests must not rewrite the tracked screenshots: only TJ_UPDATE_SCREENSHOTS=1 does."""

from __future__ import annotations

from pathlib import Path

from tests.browser.conftest import SCREENSHOTS

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"


def test_screenshots_land_in_the_ignored_artifacts_folder(open_page, screenshot, monkeypatch):
    monkeypatch.delenv("TJ_UPDATE_SCREENSHOTS", raising=False)
    tracked = {p.name: p.read_bytes() for p in SCREENSHOTS.glob("*.png")}
    (ARTIFACTS / "phone-drawer.png").unlink(missing_ok=True)
    screenshot(open_page(), "phone-drawer")  # the name of a tracked one
    assert (ARTIFACTS / "phone-drawer.png").stat().st_size > 0
    assert {p.name: p.read_bytes() for p in SCREENSHOTS.glob("*.png")} == tracked
