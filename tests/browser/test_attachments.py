"""Attachments in Chromium: files wait above the box as chips (a thumbnail for an image), one can
be taken back, the rest go with the next message and stay on it after a reload; a hostile file
name stays text."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PHONE
from tests.browser.test_client import answer, send
from tests.fakes.model_server import Reply
from tests.integration.test_images import png

pytestmark = pytest.mark.integration

HOSTILE = '<img src=x onerror="window.__pwned=1">.png'


def test_files_wait_as_chips_go_with_the_next_message_and_stay_on_it(
    open_page, api, model, workdir, tmp_path, screenshot
):
    picture = png(40, 30)
    (tmp_path / "red.png").write_bytes(picture)
    (tmp_path / "notes.txt").write_text("the launch is on Friday\n")
    (tmp_path / "drop.txt").write_text("not this one\n")
    ws_id = api.create_workstream(name="attachments", working_dir=str(workdir))
    page = open_page(ws_id)
    page.locator("#attach-file").set_input_files(
        [str(tmp_path / "red.png"), str(tmp_path / "notes.txt"), str(tmp_path / "drop.txt")]
    )
    chips = page.locator("#composer-attachments .attachment-chip")
    expect(chips).to_have_count(3)
    thumb = chips.nth(0).locator("img.attachment-thumb")
    expect(thumb).to_have_js_property("complete", True)
    assert thumb.evaluate("img => img.naturalWidth") == 40  # the image itself, fetched with the token
    expect(chips.nth(1).locator("img")).to_have_count(0)  # text: a name and a size, no picture
    chips.nth(2).locator(".attachment-remove").click()  # taken back: not sent
    expect(chips).to_have_count(2)
    screenshot(page, "desktop-attachments-composer")

    model.enqueue(Reply(text="A red rectangle, and the launch is on Friday."), match="what are these")
    send(page, "what are these?")
    expect(answer(page).last).to_have_text("A red rectangle, and the launch is on Friday.", timeout=20_000)
    expect(page.locator("#composer-attachments")).to_be_hidden()
    user = model.history[-1].body["messages"][-1]
    sent = json.dumps(user)
    # (this service's model cannot see: it is told the image was not shown, by name)
    assert "red.png: not shown: the current model cannot view images)" in sent  # no perception role here
    assert "the launch is on Friday" in sent and "not this one" not in sent

    on_message = page.locator(".msg-user .attachment-chip")
    expect(on_message).to_have_count(2)
    expect(on_message.nth(0).locator("img.attachment-thumb")).to_have_js_property("complete", True)
    page.reload()
    expect(page.locator(".msg-user .attachment-chip")).to_have_count(2)  # from the history
    expect(page.locator(".msg-user .attachment-chip").nth(0)).to_contain_text("red.png")
    expect(page.locator(".msg-user img.attachment-thumb")).to_have_js_property("complete", True)


def test_a_hostile_file_name_is_text_and_a_page_posing_as_an_image_gets_no_thumbnail(
    open_page, api, model, workdir
):
    ws_id = api.create_workstream(name="hostile names", working_dir=str(workdir))
    page = open_page(ws_id, viewport=PHONE)
    page_bytes = b"<html><script>window.__pwned=1</script></html>"
    page.locator("#attach-file").set_input_files(
        files=[
            {"name": HOSTILE, "mimeType": "image/png", "buffer": png()},
            {"name": "fake.png", "mimeType": "image/png", "buffer": page_bytes},
        ]
    )
    chips = page.locator("#composer-attachments .attachment-chip")
    expect(chips).to_have_count(2)
    expect(chips.nth(0).locator(".attachment-name")).to_have_text(HOSTILE)
    expect(chips.nth(0).locator("img.attachment-thumb")).to_have_count(1)  # its own thumbnail, not the name's
    page.wait_for_timeout(300)  # time for a thumbnail to appear, if the page's bytes got one
    expect(chips.nth(1).locator("img")).to_have_count(0)
    model.enqueue(Reply(text="noted"), match="names")
    send(page, "names")
    expect(answer(page).last).to_have_text("noted", timeout=20_000)
    expect(page.locator(".msg-user .attachment-name").first).to_have_text(HOSTILE)
    assert page.evaluate("typeof window.__pwned") == "undefined"
