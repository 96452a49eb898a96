"""The API's description is the code's: every route is in it, it is valid, every JSON body refuses a
key it does not take, the websocket's events are all in the AsyncAPI document, and a client
generated from the OpenAPI document by a maintained generator drives a whole turn."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from openapi_spec_validator import validate

from app import create_app
from app.events import EventType
from app.settings import Settings
from app.web import document, events_document
from app.web.contract import declared, parse
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.services import API_TOKEN

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN = "no_such_field"


@pytest.fixture
def spec(services):
    r = httpx.get(services.base_url + "/v1/api/openapi.json")
    assert r.status_code == 200
    return r.json()


def test_every_route_is_in_a_document_and_the_document_is_valid(services, spec):
    app = create_app(Settings.from_mapping({}, services.env))
    try:
        assert document.undeclared(app) == []  # every view says what it takes and answers
        for rule in app.url_map.iter_rules():
            if rule.endpoint in ("client.index", "client.static"):
                continue  # the browser client's own page and files
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            if rule.endpoint == "sockets.workstream_socket":
                assert spec["x-websocket"]["path"] == path
                continue
            methods = {m.lower() for m in (rule.methods or set()) - {"HEAD", "OPTIONS"}}
            assert methods <= set(spec["paths"][path]), (rule.endpoint, path)
            op = declared(app.view_functions[rule.endpoint])
            if op is not None and op.body is not None:  # each body has examples the server takes
                assert op.examples, rule.endpoint
                for example in op.examples.values():
                    parse(op.body, example)
    finally:
        app.extensions["runtime"].close()
    validate(spec)  # OpenAPI 3.1's own schema
    ids = [op["operationId"] for ops in spec["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)) and len(ids) >= 55
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert op["summary"] and "503" in op["responses"], (method, path)
            if op["security"]:  # not public: a token, and the scope it needs if any
                assert "401" in op["responses"], (method, path)
                scopes = op["security"][0]["bearer"]
                assert scopes == ([op["x-scope"]] if "x-scope" in op else []), (method, path)
                assert ("403" in op["responses"]) == bool(scopes), (method, path)


def test_every_json_body_refuses_a_key_it_does_not_take_naming_it(services, api, spec, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    values = dict.fromkeys(
        (
            "name",
            "branch_id",
            "memory_id",
            "run_id",
            "endpoint_id",
            "schedule_id",
            "trigger_id",
            "delivery_id",
        ),
        "x",
    )
    values |= {"ws_id": ws_id, "message_id": "1"}
    schemas = spec["components"]["schemas"]
    tried = 0
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if "application/json" not in op.get("requestBody", {}).get("content", {}):
                continue
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
            if schemas[ref].get("additionalProperties") is True:
                continue  # any object is its body (a trigger's context)
            url = path.format(**values)
            r = api.http.request(method.upper(), url, json={UNKNOWN: 1})
            if r.status_code == 404 and "{ws_id}" not in path:
                continue  # an owned id the gate finds is nobody's, before any body is read
            assert r.status_code == 400, (method, path, r.text)
            assert r.json()["field"] == UNKNOWN and "unknown field" in r.json()["error"], (method, path)
            tried += 1
    assert tried >= 19
    assert api.history(ws_id) == []  # nothing was sent on the way


def test_every_query_refuses_a_parameter_it_does_not_take(services, api):
    for url in ("/v1/api/workstreams", "/v1/api/memories", "/v1/api/tokens", "/health"):
        r = api.http.get(url, params={UNKNOWN: "1"})
        assert r.status_code == 400 and r.json()["field"] == UNKNOWN, (url, r.text)
    r = api.http.get("/v1/api/memories", params=[("limit", "1"), ("limit", "2")])
    assert r.status_code == 400 and "more than once" in r.json()["error"]


def test_the_asyncapi_document_has_every_event_the_docs_list(services):
    r = httpx.get(services.base_url + "/v1/api/asyncapi.json")  # public, as the OpenAPI one
    assert r.status_code == 200
    doc = r.json()
    assert doc["asyncapi"].startswith("3.")
    described = set(events_document.event_types())
    constants = {v for k, v in vars(EventType).items() if k.isupper()}
    assert constants <= described
    table = (ROOT / "docs" / "events.md").read_text()
    listed = set(
        re.findall(r"^\| `([a-z_]+)` \|", table.split("## Types", 1)[1].split("\n\nAn **item**")[0], re.M)
    )
    assert listed == described, listed ^ described
    messages = doc["components"]["messages"]
    assert {"command_send", "command_approve", "command_cancel"} <= set(messages)
    for name in described:
        ref = messages[name]["payload"]["$ref"].rsplit("/", 1)[-1]
        assert doc["components"]["schemas"][ref]["properties"]["type"]["const"] == name


def test_the_reference_page_is_served_from_here(services):
    page = httpx.get(services.base_url + "/v1/api/docs")
    assert page.status_code == 200 and "swagger-ui-bundle.js" in page.text
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN: every file is this service's
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "start.js"):
        assert httpx.get(services.base_url + f"/v1/api/docs/{name}").status_code == 200, name
    assert httpx.get(services.base_url + "/v1/api/docs/..%2fsettings.py").status_code == 404


def test_a_client_generated_from_the_document_drives_a_turn(services, spec, model, workdir, tmp_path):
    (tmp_path / "openapi.json").write_text(json.dumps(spec))
    (tmp_path / "config.yaml").write_text("literal_enums: true\npost_hooks: []\nproject_name_override: gen\n")
    generator = Path(sys.executable).with_name("openapi-python-client")
    subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            "openapi.json",
            "--output-path",
            "generated",
            "--meta",
            "none",
            "--config",
            "config.yaml",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=120,
    )
    sys.path.insert(0, str(tmp_path))
    try:
        generated = importlib.import_module("generated")
        api_calls = importlib.import_module("generated.api.workstreams")
        models = importlib.import_module("generated.models")
        client = generated.AuthenticatedClient(base_url=services.base_url, token=API_TOKEN)
        call = {
            name: importlib.import_module(f"generated.api.workstreams.{name}")
            for name in ("create_workstream", "send", "get_workstream", "approve", "history")
        }
        assert api_calls is not None
        ws = call["create_workstream"].sync(
            client=client, body=models.NewWorkstream(name="generated", working_dir=str(workdir))
        )
        assert isinstance(ws, models.Workstream) and ws.name == "generated"
        model.enqueue(Reply(tool_calls=[ToolCall("bash", {"command": "echo from-generated"})]))
        model.enqueue(Reply(text="done"))
        sent = call["send"].sync(ws.ws_id, client=client, body=models.Send(message="run it"))
        assert isinstance(sent, models.Sent)
        now = _until(
            lambda: call["get_workstream"].sync(ws.ws_id, client=client), lambda w: w.state == "attention"
        )
        assert [p.func_name for p in now.pending_approvals] == ["bash"]
        decided = call["approve"].sync(ws.ws_id, client=client, body=models.Approve(approved=True))
        assert isinstance(decided, models.Decided) and decided.decided
        _until(lambda: call["get_workstream"].sync(ws.ws_id, client=client), lambda w: w.state == "idle")
        history = call["history"].sync(ws.ws_id, client=client)
        assert [m.role for m in history.messages] == ["user", "assistant", "tool", "assistant"]
        assert "from-generated" in history.messages[2].content
        refused = call["send"].sync_detailed(ws.ws_id, client=client, body=models.Send(message=" "))
        assert refused.status_code == 400 and refused.parsed.field == "message"
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "generated" or m.startswith("generated.")]:
            del sys.modules[name]


def _until(read, done, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            assert done(value), value
            return value
        time.sleep(0.1)


def test_a_websocket_command_is_checked_by_the_same_model_as_its_http_call(api, open_socket, workdir):
    ws_id = api.create_workstream(working_dir=str(workdir))
    sock = open_socket(ws_id)
    sock.send({"type": "send", "mesage": "typo", "request_id": 1})
    reply = sock.wait_reply()
    assert reply["status"] == 400 and reply["request_id"] == 1
    assert reply["body"]["field"] == "mesage" and "unknown field" in reply["body"]["error"]
    sock.send({"type": "approve", "approved": "yes", "request_id": 2})
    reply = sock.wait_reply()
    assert reply["status"] == 400 and reply["body"]["error"] == "approved: expected boolean, got string"
    assert api.history(ws_id) == []  # nothing was sent
