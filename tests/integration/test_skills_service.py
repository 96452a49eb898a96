"""Skills through the running service: the admin API, `turnstone-jobs skills import`, the
skill tool (search; load with approval, rendered into the next system message), and a
workstream created with a skill."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from sqlmodel import select

from app.storage.database import Database
from app.storage.models import PromptTemplate
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.services import BIN, ROOT

pytestmark = pytest.mark.integration

REVIEW = {
    "name": "code-review",
    "description": "Review a change for bugs, tests and style",
    "content": "You review code. Model: {{model}}. Workstream: {{ws_id}}. "
    "Node: {{ node_id }}. Keep {{other}}.",
    "tags": ["review", "quality"],
    "category": "engineering",
}


@pytest.fixture
def service_db(services) -> Iterator[Database]:
    """The service's own database, as another process (the MCP sync, say) would write it."""
    db = Database(services.db.url)
    yield db
    db.dispose()


@pytest.fixture
def admin(api, service_db) -> Iterator:
    """The API, with every skill a test made removed after it (the service is shared)."""
    yield api
    with service_db.session() as s:
        for row in s.exec(select(PromptTemplate)).all():
            s.delete(row)


def test_the_admin_api_creates_lists_changes_and_deletes(admin):
    api = admin
    r = api.http.post("/v1/api/skills", json=REVIEW)
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["origin"] == "manual" and made["readonly"] is False and made["risk_level"] == "low"
    assert api.http.post("/v1/api/skills", json=REVIEW).status_code == 409
    listed = api.http.get("/v1/api/skills").json()["skills"]
    assert [s["name"] for s in listed] == ["code-review"] and "content" not in listed[0]
    r = api.http.put("/v1/api/skills/code-review", json={"risk_level": "high", "enabled": False})
    assert r.status_code == 200 and r.json()["risk_level"] == "high" and r.json()["enabled"] is False
    assert api.http.get("/v1/api/skills/code-review").json()["content"] == REVIEW["content"]
    assert api.http.delete("/v1/api/skills/code-review").json() == {"deleted": "code-review"}
    assert api.http.get("/v1/api/skills/code-review").status_code == 404


def test_a_readonly_skill_refuses_change_and_delete_with_403(admin, service_db):
    with service_db.session() as s:
        s.add(
            PromptTemplate(
                name="mcp__docs__summarize",
                content="Summarize.",
                origin="mcp",
                mcp_server="docs",
                readonly=True,
            )
        )
    r = admin.http.put("/v1/api/skills/mcp__docs__summarize", json={"content": "changed"})
    assert r.status_code == 403 and "read-only" in r.json()["error"]
    assert admin.http.delete("/v1/api/skills/mcp__docs__summarize").status_code == 403
    shown = admin.http.get("/v1/api/skills/mcp__docs__summarize").json()
    assert (shown["content"], shown["origin"], shown["mcp_server"]) == ("Summarize.", "mcp", "docs")


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("post", "/v1/api/skills", {"name": "x"}, 400),
        ("post", "/v1/api/skills", {"name": "bad name", "content": "x"}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "x", "risk_level": "extreme"}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "x", "activation": 3}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "x", "tags": "a,b"}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "x", "tags": [["deep"]]}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "x", "origin": "mcp"}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "x", "readonly": True}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "a\x00b"}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "x" * 100_001}, 400),
        ("post", "/v1/api/skills", {"name": "x", "content": "x", "enabled": "yes"}, 400),
        ("post", "/v1/api/skills", [1, 2], 400),
        ("put", "/v1/api/skills/nope", {"content": "x"}, 404),
        ("put", "/v1/api/skills/%00", {"content": "x"}, 404),
        ("get", "/v1/api/skills/" + "x" * 300, None, 404),
        ("delete", "/v1/api/skills/nope", None, 404),
    ],
)
def test_hostile_requests_to_the_skills_api_are_4xx_with_a_json_error(admin, method, path, body, status):
    r = admin.http.request(method.upper(), path, json=body)
    assert r.status_code == status, r.text
    assert isinstance(r.json()["error"], str)


def test_skills_import_reads_skill_md_folders(admin, services, tmp_path):
    (tmp_path / "pdf").mkdir()
    (tmp_path / "pdf" / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: Fill and merge PDF forms\ntags: [pdf, forms]\n"
        "risk_level: medium\n---\n# PDF tools\n\nUse pdftk for {{ws_id}}.\n"
    )
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    (tmp_path / "nobody").mkdir()
    (tmp_path / "nobody" / "SKILL.md").write_text("no front matter here\n")
    done = subprocess.run(
        [str(BIN / "turnstone-jobs"), "skills", "import", str(tmp_path)],
        env=services.env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1  # two folders were skipped
    assert f"{tmp_path / 'pdf' / 'SKILL.md'}: pdf-tools created" in done.stdout
    assert "broken/SKILL.md: the front matter is not valid YAML" in done.stderr
    assert "nobody/SKILL.md: no YAML front matter" in done.stderr
    skill = admin.http.get("/v1/api/skills/pdf-tools").json()
    assert (skill["description"], skill["tags"], skill["risk_level"]) == (
        "Fill and merge PDF forms", ["pdf", "forms"], "medium"
    )  # fmt: skip
    assert skill["content"] == "# PDF tools\n\nUse pdftk for {{ws_id}}."


def test_the_model_searches_and_loads_a_skill_with_approval(admin, model, open_socket):
    api = admin
    api.http.post("/v1/api/skills", json={**REVIEW, "risk_level": "critical"})
    api.http.post(
        "/v1/api/skills", json={"name": "haiku", "description": "Answer in haiku", "content": "5-7-5."}
    )
    ws_id = api.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("skill", {"action": "search", "query": "review quality"})]))
    model.enqueue(Reply(tool_calls=[ToolCall("skill", {"action": "load", "name": "code-review"})]))
    model.enqueue(Reply(text="Reviewing now."))
    turn_id = api.send(ws_id, "review my change")

    found = sock.wait_type("tool_result", timeout=60)
    assert found["output"] == (
        "- code-review [engineering, risk: critical, activation: manual]: "
        "Review a change for bugs, tests and style"
    )
    (item,) = sock.wait_type("approve_request", timeout=60)["items"]
    assert item["needs_approval"] and item["header"] == "skill load code-review"
    assert "risk: critical" in item["preview"]
    assert api.workstream(ws_id)["skill"] is None  # nothing changes before a person says yes
    assert api.approve(ws_id, approved=True).status_code == 200
    loaded = sock.wait_type("tool_result", call_id=item["call_id"], timeout=60)
    sock.wait_turn_end(turn_id)
    assert not loaded["is_error"]
    assert loaded["output"].startswith(
        "Loaded skill 'code-review': Review a change for bugs, tests and style"
    )
    assert "Warning: skill 'code-review' is rated critical risk" in loaded["output"]

    assert "<skill" not in _system(model.history[-2])  # before the load
    system = _system(model.history[-1])  # the step after it
    assert f"You review code. Model: fake-model. Workstream: {ws_id}. Node: " in system
    assert "{{ node_id }}" not in system and "Keep {{other}}." in system
    assert api.workstream(ws_id)["skill"] == "code-review"


def test_loading_an_unknown_skill_is_an_error_item_with_no_approval(admin, model, open_socket):
    ws_id = admin.create_workstream()
    sock = open_socket(ws_id)
    model.enqueue(Reply(tool_calls=[ToolCall("skill", {"action": "load", "name": "nope\x00"})]))
    model.enqueue(Reply(text="ok"))
    turn_id = admin.send(ws_id, "load it")
    result = sock.wait_type("tool_result", timeout=60)
    sock.wait_turn_end(turn_id)
    assert result["is_error"] and result["output"].startswith("Error: no enabled skill named 'nope\\x00'")


def test_a_workstream_created_with_a_skill_starts_with_it(admin, model, open_socket):
    admin.http.post("/v1/api/skills", json=REVIEW)
    r = admin.http.post("/v1/api/workstreams", json={"skill": "code-review"})
    assert r.status_code == 201 and r.json()["skill"] == "code-review"
    ws_id = r.json()["ws_id"]
    sock = open_socket(ws_id)
    model.enqueue(Reply(text="ok"))
    sock.wait_turn_end(admin.send(ws_id, "hello"))
    assert f"Workstream: {ws_id}." in _system(model.history[-1])

    r = admin.http.post("/v1/api/workstreams", json={"skill": "missing"})
    assert r.status_code == 422 and r.json()["field"] == "skill"  # well-formed, naming no skill
    r = admin.http.post("/v1/api/workstreams", json={"skill": ["code-review"]})
    assert r.status_code == 400


def _system(request) -> str:
    return str(request.body["messages"][0]["content"])
