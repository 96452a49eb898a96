"""Attachments sent with a message reach the model in it: an image as an image (or, for a model
that cannot see, the perception model's words), a PDF as its text, a text file as itself."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import httpx
import pytest

from app.attachments.perception import INSTRUCTIONS as PERCEPTION
from tests.apart import run_apart
from tests.fakes.model_server import Reply
from tests.fakes.pdfs import text_pdf
from tests.integration.client import wait_until
from tests.integration.people import People
from tests.integration.services import API_TOKEN
from tests.integration.test_images import png
from turnstone_jobs import AsyncClient, Attachment, Client, InvalidRequestError

pytestmark = pytest.mark.integration


def attach(api, ws_id: str, name: str, data: bytes, media_type: str = "application/octet-stream") -> dict:
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/attachments", files={"file": (name, data, media_type)})
    assert r.status_code == 201, r.text
    return dict(r.json())


def send(api, ws_id: str, message: str, ids: list[str]) -> str:
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/send", json={"message": message, "attachments": ids})
    assert r.status_code == 202, r.text
    return str(r.json()["turn_id"])


def asked(model, said: str) -> dict[str, Any]:
    """The body of the last model request of the conversation in which `said` was sent."""
    (body,) = [
        r.body
        for r in model.history
        if said in json.dumps(r.body) and PERCEPTION[:40] not in json.dumps(r.body)
    ][-1:]
    return body


def test_an_image_goes_to_a_model_that_can_see_as_an_image_whatever_its_upload_claimed(
    api, model, open_socket, workdir
):
    picture = png(3, 2)
    ws_id = api.create_workstream(working_dir=str(workdir), model="vision")
    sock = open_socket(ws_id)
    sent = attach(api, ws_id, "chart.txt", picture, "text/plain")  # its bytes say PNG
    said = "what does the chart show?"
    model.enqueue(Reply(text="a red chart"), match=said)
    turn_id = send(api, ws_id, said, [sent["attachment_id"]])
    assert sock.wait_turn_end(turn_id)["state"] == "idle"

    user = asked(model, said)["messages"][-1]
    assert user["role"] == "user"
    text, image = user["content"]
    assert text["type"] == "text" and text["text"].startswith(said)
    assert (
        f"[attached chart.txt (image/png, {len(picture)} bytes): attachment:{sent['attachment_id']}]"
        in text["text"]
    )
    assert image == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(picture).decode()},
    }
    # People see which files went with it, live and in the history: names, never the bytes.
    named = [{k: sent[k] for k in ("attachment_id", "filename", "media_type", "size")}]
    (shown,) = [e for e in sock.of_type("message") if e.get("role") == "user"]
    assert shown["attachments"] == named
    (first,) = [m for m in api.history(ws_id) if m["role"] == "user"]
    assert first["attachments"] == named and first["content"] == said


def test_an_anthropic_model_gets_the_image_block_after_the_text(api, model, open_socket, workdir):
    picture = png()
    ws_id = api.create_workstream(working_dir=str(workdir), model="claude")
    sock = open_socket(ws_id)
    sent = attach(api, ws_id, "pic.png", picture, "image/png")
    said = "describe pic.png"
    model.enqueue(Reply(text="red"), match=said)
    assert sock.wait_turn_end(send(api, ws_id, said, [sent["attachment_id"]]))["state"] == "idle"
    user = asked(model, said)["messages"][-1]
    assert user["role"] == "user"
    text, image = user["content"]
    assert text["type"] == "text" and text["text"].startswith(said)
    image.pop("cache_control", None)  # the prompt cache's mark on the request's last block
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(picture).decode()},
    }


def test_a_model_that_cannot_see_gets_the_perception_models_description_once(
    api, model, open_socket, workdir
):
    picture = png(4, 4)
    ws_id = api.create_workstream(working_dir=str(workdir))  # the default model cannot see
    sock = open_socket(ws_id)
    sent = attach(api, ws_id, "invoice.png", picture, "image/png")
    said = "what is the invoice total?"
    model.enqueue(Reply(text="An invoice; the total reads 42 EUR."), match=PERCEPTION[:40])
    model.enqueue(Reply(text="42 EUR"), match=said)
    assert sock.wait_turn_end(send(api, ws_id, said, [sent["attachment_id"]]))["state"] == "idle"

    (perceived,) = [r.body for r in model.history if PERCEPTION[:40] in json.dumps(r.body)]
    assert perceived["model"] == "fake-vision"
    image = perceived["messages"][-1]["content"][-1]
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(picture).decode()
    user = asked(model, said)["messages"][-1]
    assert isinstance(user["content"], str)  # words only: no image part for a model that cannot see
    assert "invoice.png: not shown: the current model cannot view images" in user["content"]
    assert "An invoice; the total reads 42 EUR." in user["content"]

    # The description is kept: the next turn (another worker, or after a restart) asks nobody.
    again = "and the date?"
    model.enqueue(Reply(text="no date"), match=again)
    turn_id = api.send(ws_id, again)
    assert sock.wait_turn_end(turn_id)["state"] == "idle"
    assert len([r for r in model.history if PERCEPTION[:40] in json.dumps(r.body)]) == 1
    assert "the total reads 42 EUR" in json.dumps(asked(model, again)["messages"])


def test_when_the_perception_model_fails_the_model_is_told_the_image_was_not_shown(
    api, model, open_socket, workdir
):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    sent = attach(api, ws_id, "scan.png", png(5, 5), "image/png")
    said = "read the scan"
    for _ in range(4):  # every try of the perception request fails
        model.enqueue(Reply(status=400, error_message="no images today"), match=PERCEPTION[:40])
    model.enqueue(Reply(text="I cannot see it"), match=said)
    assert sock.wait_turn_end(send(api, ws_id, said, [sent["attachment_id"]]))["state"] == "idle"
    content = asked(model, said)["messages"][-1]["content"]
    assert (
        "scan.png: not shown: the current model cannot view images; the perception model could not" in content
    )


def test_a_pdf_goes_as_its_text_read_when_it_was_attached(api, model, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    sent = attach(api, ws_id, "report.pdf", text_pdf(["Revenue grew 12 percent", "Churn fell to 3 percent"]))
    assert sent["pages"] == 2 and sent["text_note"] is None
    garbage = b"%PDF-1.7\n" + b"\x00garbage" * 100
    broken = attach(api, ws_id, "broken.pdf", garbage)
    assert broken["pages"] is None and "not a readable PDF" in broken["text_note"]
    notes = attach(api, ws_id, "notes.md", "# Plan\n\n- ship on Friday ✓\n".encode(), "text/markdown")
    blob = attach(api, ws_id, "data.bin", bytes(range(256)) * 4)
    said = "summarise the report"
    model.enqueue(Reply(text="growth up, churn down"), match=said)
    ids = [sent["attachment_id"], broken["attachment_id"], notes["attachment_id"], blob["attachment_id"]]
    assert sock.wait_turn_end(send(api, ws_id, said, ids))["state"] == "idle"
    content = asked(model, said)["messages"][-1]["content"]
    assert isinstance(content, str)
    assert (
        f"[attached report.pdf (PDF, 2 pages; its text follows): attachment:{sent['attachment_id']}]"
        in content
    )
    assert "Revenue grew 12 percent" in content and "Churn fell to 3 percent" in content
    assert (
        f"[attached broken.pdf (PDF, {len(garbage)} bytes; its text was not read: "
        "the file is not a readable PDF)" in content
    )
    assert "- ship on Friday ✓" in content
    assert (
        "[attached data.bin (application/octet-stream, 1,024 bytes; not text: read_file reads it)" in content
    )


def test_a_model_that_reads_pdfs_gets_the_file_itself(api, model, open_socket, workdir):
    pdf = text_pdf(["A chart of revenue"])
    ws_id = api.create_workstream(working_dir=str(workdir), model="claude")  # supports_pdf
    sock = open_socket(ws_id)
    sent = attach(api, ws_id, "chart.pdf", pdf, "application/pdf")
    said = "what does the chart say?"
    model.enqueue(Reply(text="revenue"), match=said)
    assert sock.wait_turn_end(send(api, ws_id, said, [sent["attachment_id"]]))["state"] == "idle"
    text, document = asked(model, said)["messages"][-1]["content"]
    assert (
        text["text"]
        == f"{said}\n\n[attached chart.pdf (PDF, {len(pdf)} bytes): attachment:{sent['attachment_id']}]"
    )
    document.pop("cache_control", None)
    assert document == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(pdf).decode()},
        "title": "chart.pdf",
    }


def test_hostile_attachment_lists_are_refused_and_store_nothing(services, api, model, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    mine = attach(api, ws_id, "a.txt", b"hello", "text/plain")["attachment_id"]
    elsewhere = api.create_workstream(working_dir=str(workdir))
    theirs = attach(api, elsewhere, "b.txt", b"secret of another workstream", "text/plain")["attachment_id"]
    url = f"/v1/api/workstreams/{ws_id}/send"
    for attachments, status in [
        ([theirs], 422),  # another workstream's file is not this one's to send
        (["nope"], 422),
        ([mine, "0" * 32], 422),
        ("a-string", 400),
        ([5], 400),
        ([[mine]], 400),
        ([{"id": mine}], 400),
        (["\x00"], 400),
        (["x" * 33], 400),
        ([mine] * 17, 400),
        ([json.loads('"\\ud800"')], 400),
    ]:
        r = api.http.post(
            url,
            content=json.dumps({"message": "hi", "attachments": attachments}),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == status, (attachments, r.text)
        assert r.json()["field"].startswith("attachments"), r.text
    assert api.history(ws_id) == [] and api.workstream(ws_id)["state"] == "idle"
    r = api.http.post("/v1/api/workstreams/nothere/send", json={"message": "hi", "attachments": [mine]})
    assert r.status_code == 404, r.text
    # An id repeated is sent once.
    model.enqueue(Reply(text="ok"), match="twice")
    turn_id = send(api, ws_id, "twice", [mine, mine])
    api.wait_idle(ws_id)
    (user,) = [m for m in api.history(ws_id) if m["role"] == "user"]
    assert [a["attachment_id"] for a in user["attachments"]] == [mine] and turn_id


def test_its_bytes_are_served_to_its_owner_as_an_image_or_a_download(services, api, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    picture = png()
    image = attach(api, ws_id, "pic.png", picture, "image/png")["attachment_id"]
    page = attach(api, ws_id, "page.png", b"<html><script>alert(1)</script>", "image/png")["attachment_id"]
    url = f"/v1/api/workstreams/{ws_id}/attachments"
    r = api.http.get(f"{url}/{image}/content")
    assert r.status_code == 200 and r.content == picture
    assert r.headers["content-type"] == "image/png" and r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-disposition"].startswith("inline;")
    r = api.http.get(f"{url}/{page}/content")  # claimed PNG, is HTML: a download of bytes, never a page
    assert r.status_code == 200 and r.headers["content-type"] == "application/octet-stream"
    assert (
        r.headers["content-disposition"].startswith("attachment;")
        and "sandbox" in r.headers["content-security-policy"]
    )
    assert api.http.get(f"{url}/nope/content").status_code == 404
    assert api.http.get(f"{url}/%00/content").status_code == 404
    other = People(services).user("attachment-other").api(services)
    assert other.http.get(f"{url}/{image}/content").status_code in (403, 404)
    assert httpx.get(f"{services.base_url}{url}/{image}/content").status_code == 401


def test_a_retry_and_a_fork_send_the_attachments_again(api, model, open_socket, workdir):
    picture = png(2, 3)
    ws_id = api.create_workstream(working_dir=str(workdir), model="vision")
    sock = open_socket(ws_id)
    sent = attach(api, ws_id, "pic.png", picture, "image/png")["attachment_id"]
    said = "look at this"
    model.enqueue(Reply(text="first look"), match=said)
    assert sock.wait_turn_end(send(api, ws_id, said, [sent]))["state"] == "idle"
    data_url = "data:image/png;base64," + base64.b64encode(picture).decode()

    model.enqueue(Reply(text="second look"), match=said)
    r = api.http.post(f"/v1/api/workstreams/{ws_id}/retry", json={})
    assert r.status_code == 202, r.text
    assert sock.wait_turn_end(r.json()["turn_id"])["state"] == "idle"
    assert data_url in json.dumps(model.history[-1].body)

    r = api.http.post(f"/v1/api/workstreams/{ws_id}/fork", json={})
    assert r.status_code == 201, r.text
    fork = r.json()["ws_id"]
    (copied,) = [m for m in api.history(fork) if m["role"] == "user"][-1:]
    assert copied["attachments"][0]["attachment_id"] != sent  # the fork's own copy
    listed = api.http.get(f"/v1/api/workstreams/{fork}/attachments").json()["attachments"]
    assert [a["attachment_id"] for a in listed] == [copied["attachments"][0]["attachment_id"]]
    fork_sock = open_socket(fork)
    model.enqueue(Reply(text="still red"), match="again, in the fork")
    turn_id = api.send(fork, "again, in the fork")
    assert fork_sock.wait_turn_end(turn_id)["state"] == "idle"
    assert data_url in json.dumps(model.history[-1].body)


def test_the_python_clients_attach_a_file_and_send_it(services, model, workdir):
    with Client(services.base_url, API_TOKEN) as client:
        ws = client.create_workstream(working_dir=str(workdir))
        report = client.attach(ws.ws_id, text_pdf(["Sync client page"]), "sync.pdf")
        assert isinstance(report, Attachment) and report.pages == 1 and report.text_note is None
        model.enqueue(Reply(text="read it"), match="sync send")
        client.send(ws.ws_id, "sync send", attachments=[report.attachment_id])
        wait_until(
            lambda: (
                client.workstream(ws.ws_id).state == "idle" and len(client.history(ws.ws_id).messages) == 2
            )
        )
        assert "Sync client page" in json.dumps(asked(model, "sync send"))
        with pytest.raises(InvalidRequestError):
            client.send(ws.ws_id, "no such file", attachments=["missing"])

    async def asynchronously() -> None:
        async with AsyncClient(services.base_url, API_TOKEN) as client:
            ws = await client.create_workstream(working_dir=str(workdir))
            notes = await client.attach(ws.ws_id, b"async notes", "notes.txt", "text/plain")
            model.enqueue(Reply(text="read too"), match="async send")
            await client.send(ws.ws_id, "async send", attachments=[notes.attachment_id])
            deadline = time.monotonic() + 30
            while len((await client.history(ws.ws_id)).messages) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert "async notes" in json.dumps(asked(model, "async send"))

    run_apart(asynchronously())
