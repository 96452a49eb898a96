"""open_preview, attachments and workstream deletion through the whole service: a person
attaches a file, the model previews it (and a web page, after approval), the content is
served inert behind signed links, and deleting the workstream takes all of it away.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.model_server import Reply, ToolCall
from tests.unit.test_fetcher import Site, page

pytestmark = pytest.mark.integration

CSV = b"bird,weight_g\nruddy turnstone,120\nblack turnstone,115\n"
PAGE = b"""<!doctype html><html><head><title>Shore  birds</title>
<script>fetch('/beacon')</script></head>
<body><h1>Turnstones</h1><img src="/remote.png"></body></html>"""


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site({"/birds": page(PAGE)})
    yield server
    server.close()


def attach(api, ws_id: str, name: str, data: bytes, media_type: str = "text/csv") -> httpx.Response:
    files = {"file": (name, data, media_type)}
    return api.http.post(f"/v1/api/workstreams/{ws_id}/attachments", files=files)


def preview_call(target: str, **args: object) -> ToolCall:
    return ToolCall("open_preview", {"target": target, **args})


def run_preview(api, model, sock, ws_id: str, call: ToolCall) -> tuple[dict, dict | None]:
    """A turn in which the model previews `call`'s target; its tool_result and preview event."""
    model.enqueue(Reply(tool_calls=[call]))
    model.enqueue(Reply(text="It is open beside our conversation."))
    turn_id = api.send(ws_id, "show it to me")
    result = sock.wait_type("tool_result", turn_id=turn_id, timeout=60)
    sock.wait_turn_end(turn_id)
    shown = [event for event in sock.of_type("preview") if event.get("turn_id") == turn_id]
    return result, shown[0] if shown else None


def test_an_attachment_previews_as_a_table_without_approval(api, model, open_socket):
    ws_id = api.create_workstream()
    response = attach(api, ws_id, "../../etc/birds.csv", CSV)
    assert response.status_code == 201, response.text
    attached = response.json()
    assert attached["filename"] == "birds.csv" and attached["size"] == len(CSV)
    assert attached["target"] == f"attachment:{attached['attachment_id']}"

    sock = open_socket(ws_id)
    result, shown = run_preview(api, model, sock, ws_id, preview_call(attached["target"]))
    assert not result["is_error"]
    assert result["output"] == f'Opened "birds.csv" (table, {len(CSV)} bytes) in the preview pane.'
    assert shown is not None and shown["kind"] == "table" and shown["call_id"] == result["call_id"]
    assert not any(e.get("type") == "approve_request" for e in sock.events)  # a local read

    described = api.http.get(f"/v1/api/previews/{shown['preview_id']}").json()
    assert described["title"] == "birds.csv" and described["media_type"].startswith("text/csv")
    content = httpx.get(api.base_url + described["url"])  # no token: the link is the permission
    assert content.status_code == 200 and content.content == CSV
    assert content.headers["content-security-policy"].startswith("sandbox; default-src 'none'")
    assert content.headers["x-content-type-options"] == "nosniff"
    listed = api.http.get(f"/v1/api/workstreams/{ws_id}/previews").json()["previews"]
    assert [p["preview_id"] for p in listed] == [shown["preview_id"]]


def test_a_web_page_needs_approval_and_is_served_without_scripts_or_remote_loads(
    api, model, open_socket, site
):
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[preview_call(site.url("/birds"))]))
    model.enqueue(Reply(text="Open."))
    turn_id = api.send(ws_id, "show me the page")
    (item,) = sock.wait_type("approve_request", timeout=60)["items"]
    assert item["func_name"] == "open_preview" and item["needs_approval"]
    assert item["preview"].splitlines()[0] == f"GET {site.url('/birds')}"
    assert "allowed because tools.allow_private_network is on" in item["preview"]
    assert site.hits == []
    assert api.approve(ws_id, approved=True).status_code == 200
    result = sock.wait_type("tool_result", call_id=item["call_id"], timeout=60)
    assert result["output"].startswith('Opened "Shore birds" (web, ')
    shown = sock.wait_type("preview", timeout=60)
    sock.wait_turn_end(turn_id)

    described = api.http.get(f"/v1/api/previews/{shown['preview_id']}").json()
    inert = httpx.get(api.base_url + described["url"])
    policy = inert.headers["content-security-policy"]
    assert policy.startswith("sandbox; default-src 'none'; img-src data:;")
    assert "script-src" not in policy  # default-src 'none' covers scripts
    assert inert.content == PAGE  # stored as fetched; nothing added
    remote = httpx.get(api.base_url + described["remote_url"])
    assert "img-src * data: blob:" in remote.headers["content-security-policy"]
    assert remote.content.startswith(b"<!doctype html><html><head>")
    assert f'<base href="{site.url("/birds")}">'.encode() in remote.content


def test_signed_links_are_for_one_preview_and_one_setting(api, model, open_socket):
    ws_id = api.create_workstream()
    target = attach(api, ws_id, "notes.md", b"# Notes\n\nhello", "text/markdown").json()["target"]
    sock = open_socket(ws_id)
    _, shown = run_preview(api, model, sock, ws_id, preview_call(target, title="My notes"))
    assert shown is not None and shown["kind"] == "markdown" and shown["title"] == "My notes"
    url = api.http.get(f"/v1/api/previews/{shown['preview_id']}").json()["url"]
    assert httpx.get(api.base_url + url).status_code == 200
    for bad in (
        url.replace("remote=0", "remote=1"),  # the signature covers the setting
        url[:-4] + "0000",
        url.replace("exp=", "exp=1"),
    ):
        answer = httpx.get(api.base_url + bad)
        assert answer.status_code == 403 and "invalid or has expired" in answer.json()["error"]
    for malformed, field in ((url.split("&sig=")[0], "sig"), (url + "%00", "sig"), (url + "&x=1", "x")):
        answer = httpx.get(api.base_url + malformed)  # not a link at all: the document's 400
        assert answer.status_code == 400 and answer.json()["field"] == field, answer.text
    assert httpx.get(f"{api.base_url}/v1/api/previews/{shown['preview_id']}").status_code == 401
    assert api.http.get("/v1/api/previews/%00").status_code == 404
    assert api.http.get("/v1/api/previews/" + "x" * 500).status_code == 404


def test_files_in_the_folder_preview_unprompted_and_others_are_refused(api, model, open_socket, services):
    folder = services.tmp / "preview-folder"
    folder.mkdir(exist_ok=True)
    (folder / "data.json").write_text(json.dumps([{"bird": "turnstone", "grams": 120}]))
    ws_id = api.create_workstream(working_dir=str(folder))
    sock = open_socket(ws_id)
    result, shown = run_preview(api, model, sock, ws_id, preview_call("data.json"))
    assert shown is not None and shown["kind"] == "table" and not result["is_error"]

    outside = Path(services.tmp) / "secret.txt"
    outside.write_text("not for previews")
    for target in (str(outside), "../secret.txt"):
        result, shown = run_preview(api, model, sock, ws_id, preview_call(target))
        assert result["is_error"] and shown is None
        assert result["output"] == f"Error: {target} is outside the workstream's folder, {folder}"


def test_read_file_reads_an_attachment(api, model, open_socket):
    ws_id = api.create_workstream()
    target = attach(api, ws_id, "birds.csv", CSV).json()["target"]
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": target})]))
    model.enqueue(Reply(text="Two turnstones."))
    turn_id = api.send(ws_id, "read it")
    result = sock.wait_type("tool_result", turn_id=turn_id, timeout=60)
    sock.wait_turn_end(turn_id)
    assert result["output"].splitlines()[1] == "   2\truddy turnstone,120"
    other = api.create_workstream()  # another workstream's attachment is not found
    sock2 = open_socket(other)
    model.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": target})]))
    model.enqueue(Reply(text="Not there."))
    turn_id = api.send(other, "read it")
    result = sock2.wait_type("tool_result", timeout=60)
    sock2.wait_turn_end(turn_id)
    assert result["is_error"] and result["output"] == f"Error: no attachment {target[11:]} in this workstream"


@pytest.mark.parametrize(
    ("send", "status", "message"),
    [
        (lambda http, url: http.post(url, json={"file": "x"}), 400, "multipart/form-data"),
        (lambda http, url: http.post(url, files={"other": ("a.txt", b"x")}), 400, "file: required"),
        (
            lambda http, url: http.post(url, files={"file": ("a.txt", b"")}),
            422,
            "file: empty",
        ),  # well-formed, nothing in it
        (
            lambda http, url: http.post(
                url, content=b"--x\r\nbroken", headers={"Content-Type": "multipart/form-data; boundary=x"}
            ),
            400,
            "file",
        ),
        (
            lambda http, url: http.post(url, files={"file": ("big.bin", b"\0" * (32 * 1024 * 1024 + 1))}),
            413,
            "over the attachment limit",
        ),
    ],
)
def test_a_bad_upload_is_a_4xx_that_says_why(api, send, status, message):
    ws_id = api.create_workstream()
    response = send(api.http, f"/v1/api/workstreams/{ws_id}/attachments")
    assert response.status_code == status and message in response.json()["error"], response.text
    assert api.http.get(f"/v1/api/workstreams/{ws_id}/attachments").json()["attachments"] == []


def raw_upload(api, ws_id: str, filename: bytes) -> httpx.Response:
    """A multipart body written by hand, so the file name's bytes arrive exactly as given."""
    body = (
        b"--b0undary\r\n"
        b'Content-Disposition: form-data; name="file"; filename="' + filename + b'"\r\n'
        b"Content-Type: text/plain\r\n\r\n"
        b"data\r\n--b0undary--\r\n"
    )
    headers = {"Content-Type": "multipart/form-data; boundary=b0undary"}
    return api.http.post(f"/v1/api/workstreams/{ws_id}/attachments", content=body, headers=headers)


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        (b"a\x00b.txt", "ab.txt"),
        (b"..\\..\\win.ini", "....win.ini"),  # a backslash escapes the next character in a quoted name
        (b"../../etc/passwd", "passwd"),
        (b"", "attachment"),
        (b"n" * 1000, "n" * 200),
        (b"tab\tand\x1bescape.txt", "tabandescape.txt"),
    ],
)
def test_hostile_file_names_are_kept_as_plain_names(api, name, kept):
    ws_id = api.create_workstream()
    response = raw_upload(api, ws_id, name)
    assert response.status_code == 201, response.text
    assert response.json()["filename"].replace("\ufffd", "") == kept
    nowhere = api.http.post("/v1/api/workstreams/nope/attachments", files={"file": ("a", b"x")})
    assert nowhere.status_code == 404


def test_a_file_name_that_is_not_utf8_is_a_clear_400(api):
    ws_id = api.create_workstream()
    response = raw_upload(api, ws_id, "\ud800x.txt".encode("utf-8", "surrogatepass"))
    assert response.status_code == 400 and "file name in UTF-8" in response.json()["error"], response.text


def test_deleting_a_workstream_takes_its_conversation_previews_and_attachments(api, model, open_socket):
    ws_id = api.create_workstream()
    target = attach(api, ws_id, "birds.csv", CSV).json()["target"]
    sock = open_socket(ws_id)
    _, shown = run_preview(api, model, sock, ws_id, preview_call(target))
    assert shown is not None
    url = api.http.get(f"/v1/api/previews/{shown['preview_id']}").json()["url"]

    # a turn parked on an approval holds the workstream: deleting it now is refused
    model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo hi"})]))
    api.send(ws_id, "run something")
    sock.wait_type("approve_request", timeout=60)
    busy = api.http.delete(f"/v1/api/workstreams/{ws_id}")
    assert busy.status_code == 409 and "cancel it first" in busy.json()["error"]
    assert api.cancel(ws_id).status_code in (200, 202)
    api.wait_idle(ws_id)

    gone = api.http.delete(f"/v1/api/workstreams/{ws_id}")
    assert gone.status_code == 200 and gone.json() == {"deleted": [ws_id]}
    sock.wait_type("workstream_deleted", timeout=30)
    assert api.http.get(f"/v1/api/workstreams/{ws_id}").status_code == 404
    assert api.http.get(f"/v1/api/workstreams/{ws_id}/history").status_code == 404
    assert api.http.get(f"/v1/api/previews/{shown['preview_id']}").status_code == 404
    assert httpx.get(api.base_url + url).status_code == 404
    assert ws_id not in {w["ws_id"] for w in api.http.get("/v1/api/workstreams").json()["workstreams"]}
    assert api.http.delete(f"/v1/api/workstreams/{ws_id}").status_code == 404
