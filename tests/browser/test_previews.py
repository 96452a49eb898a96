"""The preview pane in Chromium: a previewed page's script never runs and its remote image is
not requested until the toggle asks for it; an attached CSV shows as a sortable table; the pane
fills a phone's width; deleting the workstream from the header takes it away."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PHONE
from tests.browser.test_client import answer, send
from tests.fakes.model_server import Reply, ToolCall
from tests.unit.test_fetcher import Site
from tests.unit.test_fetcher import page as route

pytestmark = pytest.mark.integration

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


@pytest.fixture
def elsewhere() -> Iterator[Site]:
    """Another site: where the page's image lives, and where its script would report to."""
    server = Site({"/pixel.png": route(PNG, "image/png"), "/ran": route("ran", "text/plain")})
    yield server
    server.close()


def preview(target: str, **args: object) -> ToolCall:
    return ToolCall("open_preview", {"target": target, **args})


def paths(site: Site) -> list[str]:
    return [path for path, _host in site.hits]


def test_a_page_runs_no_script_and_loads_no_remote_image_until_asked(
    open_page, api, model, workdir, elsewhere, screenshot
):
    (workdir / "page.html").write_text(
        "<!doctype html><html><head><title>Shore birds</title></head><body>"
        "<h1>Turnstones</h1>"
        f'<img id=pic src="{elsewhere.url("/pixel.png")}">'
        f"<script>fetch('{elsewhere.url('/ran')}'); parent.__pwned = 1; document.title = 'ran'</script>"
        "</body></html>"
    )
    ws_id = api.create_workstream(name="previews", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[preview("page.html")]))
    model.enqueue(Reply(text="It is open on the right."))
    send(page, "show me page.html")
    expect(answer(page).last).to_have_text("It is open on the right.", timeout=20_000)

    pane = page.locator("#preview-pane")
    expect(pane).to_be_visible()
    expect(page.locator("#preview-title")).to_have_text("page.html")
    frame_el = page.locator("#preview-body iframe")
    expect(frame_el).to_have_attribute("sandbox", "")
    frame = page.frame_locator("#preview-body iframe")
    expect(frame.locator("h1")).to_have_text("Turnstones")
    page.wait_for_timeout(500)  # time for a script or an image to act, if either could
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert paths(elsewhere) == []  # neither the script's report nor the image
    screenshot(page, "desktop-preview-page")

    page.locator("#preview-remote").check()
    expect(frame.locator("h1")).to_have_text("Turnstones")
    # the image, now asked for (its load event is what the page waits on); the script still never ran
    expect(frame.locator("#pic")).to_have_js_property("complete", True)
    frame.locator("#pic").evaluate("img => img.decode()")
    assert paths(elsewhere) == ["/pixel.png"]
    assert page.evaluate("typeof window.__pwned") == "undefined"


def test_an_attached_csv_shows_as_a_sortable_table_also_at_phone_width(
    open_page, api, model, workdir, screenshot
):
    ws_id = api.create_workstream(name="table", working_dir=str(workdir))
    page = open_page(ws_id, viewport=PHONE)
    (workdir / "birds.csv").write_text('bird,grams\n"turnstone, ruddy",120\nsanderling,55\nknot,135\n')
    page.locator("#attach-file").set_input_files(str(workdir / "birds.csv"))
    # it waits above the box for the next message; the box itself is the person's alone
    expect(page.locator("#composer-attachments .attachment-chip")).to_contain_text("birds.csv")
    expect(page.locator("#message")).to_have_value("")
    (attached,) = api.http.get(f"/v1/api/workstreams/{ws_id}/attachments").json()["attachments"]

    model.enqueue(Reply(tool_calls=[preview(attached["target"])]))
    model.enqueue(Reply(text="Here is the table."))
    send(page, "show it")
    expect(answer(page).last).to_have_text("Here is the table.", timeout=20_000)
    expect(page.locator("#composer-attachments")).to_be_hidden()  # it went with that message
    expect(page.locator(".msg-user .attachment-chip")).to_contain_text("birds.csv")
    assert "turnstone, ruddy" in str(model.history[0].body["messages"][-1]["content"])  # in the message
    pane = page.locator("#preview-pane")
    expect(pane).to_be_visible()
    box = pane.bounding_box()
    assert box is not None and box["width"] == PHONE["width"]  # the pane takes the whole phone screen
    cells = page.locator("#preview-body tbody td:first-child")
    expect(cells).to_have_text(["turnstone, ruddy", "sanderling", "knot"])
    page.locator("#preview-body th", has_text="grams").click()
    expect(cells).to_have_text(["sanderling", "turnstone, ruddy", "knot"])
    page.locator("#preview-body th", has_text="grams").click()
    expect(cells).to_have_text(["knot", "turnstone, ruddy", "sanderling"])
    screenshot(page, "phone-preview-table")
    page.locator("#preview-close").click()
    expect(pane).to_be_hidden()
    page.locator("#previews-open").click()  # the list keeps it for later
    expect(pane).to_be_visible()


def test_a_page_reload_lists_previews_without_reopening_them_and_delete_removes_all(
    open_page, api, model, workdir
):
    (workdir / "notes.md").write_text("# Notes\n\n<script>parent.__pwned=1</script> **bold**\n")
    ws_id = api.create_workstream(name="to delete", working_dir=str(workdir))
    page = open_page(ws_id)
    model.enqueue(Reply(tool_calls=[preview("notes.md")]))
    model.enqueue(Reply(text="Shown."))
    send(page, "show the notes")
    expect(page.locator("#preview-body h2")).to_have_text("Notes")  # headings sit under the pane's own
    expect(page.locator("#preview-body strong")).to_have_text("bold")
    assert page.locator("#preview-body script").count() == 0
    page.reload()
    expect(answer(page).last).to_have_text("Shown.")
    expect(page.locator("#previews-open")).to_have_text("Previews (1)")
    expect(page.locator("#preview-pane")).to_be_hidden()

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#delete-ws").click()
    expect(page.locator("#ws-title")).to_have_text("No workstream")
    expect(page.locator("#ws-list")).not_to_contain_text("to delete")
    assert api.http.get(f"/v1/api/workstreams/{ws_id}").status_code == 404
    assert page.evaluate("typeof window.__pwned") == "undefined"
