"""The access table: every route of the Flask url_map (and the websocket, and each websocket
command) x every kind of caller, against the running service, with the status each must get.

The rows come from the application's own url_map, and the expected status from the route's rule
in app/web/access.py: a new endpoint with no rule fails here (and is refused for everyone)."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import websocket
from sqlmodel import select

from app import create_app
from app.previews import links, store
from app.settings import Settings
from app.storage.database import Database
from app.storage.models import (
    Branch,
    Message,
    Run,
    Schedule,
    Trigger,
    Watch,
    WebhookDelivery,
    WebhookEndpoint,
)
from app.web.access import OWNED_PARAMS, RULES, SOCKET_COMMANDS, SOCKET_ENDPOINT, Rule
from tests.integration.hostile import PATH_IDS, RAW_BODIES
from tests.integration.people import People, Person
from tests.integration.services import API_TOKEN, BIN, ROOT, Services

pytestmark = pytest.mark.integration

SCOPES = ("read", "write", "approve", "admin")
DENIED = (401, 403)


@dataclass(frozen=True)
class Caller:
    label: str
    token: str | None
    kind: str  # anonymous, invalid, scope, other, owner, admin
    scope: str | None = None


@dataclass
class World:
    callers: list[Caller]
    owner: Person
    ws_id: str
    people: People
    preview_id: str
    preview_link: str  # its content, signed: the link is the permission, whoever calls
    watch_id: str
    services: Services
    last_endpoint: str = ""  # the webhook endpoint fresh_endpoint made last

    def fresh_workstream(self) -> str:
        """A workstream of the owner's to delete (DELETE must not take the shared one)."""
        return self.owner.api(self.services).create_workstream()

    def fresh_branch(self) -> str:
        """A branch of the shared workstream (a restore takes the one it restores)."""
        branch = Branch(id=uuid.uuid4().hex, ws_id=self.ws_id, after_message_id=0, reason="rewind",
                        message_count=0, preview="")  # fmt: skip
        with Database(self.services.env["DATABASE_URL"]).session() as s:
            s.add(branch)
        return branch.id

    def fresh_attachment(self) -> str:
        """A file attached to the shared workstream (its bytes are the owner's to read)."""
        r = self.owner.api(self.services).http.post(
            f"/v1/api/workstreams/{self.ws_id}/attachments", files={"file": ("a.txt", b"owned", "text/plain")}
        )
        assert r.status_code == 201, r.text
        return str(r.json()["attachment_id"])

    def fresh_message(self) -> str:
        """A user message of the shared workstream's conversation (an edit takes the one it edits)."""
        with Database(self.services.env["DATABASE_URL"]).session() as s:
            row = Message(ws_id=self.ws_id, role="user", content="an old message")
            s.add(row)
            s.flush()
            return str(row.id)

    def fresh_endpoint(self) -> str:
        """A webhook endpoint of the owner's (a DELETE takes the one it deletes)."""
        # Loopback where nothing listens: an attempt is refused at once (a name that does not
        # resolve here took 5 s of a worker's thread per attempt, for every event of the owner).
        endpoint = WebhookEndpoint(id=uuid.uuid4().hex, owner_id=self.owner.user_id, url="http://127.0.0.1:9/h",
                                   secret="whsec_" + "A" * 44)  # fmt: skip
        with Database(self.services.env["DATABASE_URL"]).session() as s:
            s.add(endpoint)
        self.last_endpoint = endpoint.id
        return endpoint.id

    def fresh_delivery(self) -> str:
        """A delivery of the endpoint the same path named (filled in before it)."""
        delivery = WebhookDelivery(id=f"msg_{uuid.uuid4().hex}", endpoint_id=self.last_endpoint,
                                   event_type="run.succeeded", event_key=uuid.uuid4().hex, payload="{}",
                                   status="failed")  # fmt: skip
        with Database(self.services.env["DATABASE_URL"]).session() as s:
            s.add(delivery)
        return delivery.id

    def fresh_schedule(self) -> str:
        """A schedule of the owner's, due in a year (a DELETE takes the one it deletes)."""
        schedule = Schedule(id=uuid.uuid4().hex, owner_id=self.owner.user_id, every_s=3600, prompt="p",
                            next_fire_at=datetime.now(UTC) + timedelta(days=365))  # fmt: skip
        with Database(self.services.env["DATABASE_URL"]).session() as s:
            s.add(schedule)
        return schedule.id

    def fresh_trigger(self) -> str:
        """An unsigned trigger of the owner's: the URL alone lets each caller through."""
        trigger = Trigger(id=uuid.uuid4().hex, owner_id=self.owner.user_id, prompt="p")
        with Database(self.services.env["DATABASE_URL"]).session() as s:
            s.add(trigger)
        return trigger.id

    def fresh_run(self) -> str:
        """A run of the owner's in the shared workstream, stored without a turn (as one whose
        request stopped before its send): each caller meets a run that exists."""
        run = Run(id=uuid.uuid4().hex, ws_id=self.ws_id, owner_id=self.owner.user_id)
        with Database(self.services.env["DATABASE_URL"]).session() as s:
            s.add(run)
        return run.id


@pytest.fixture(scope="session")
def world(services: Services) -> World:
    people = People(services)
    owner = people.user("alice")
    other = people.user("bob")
    admin = people.user("root", admin=True)
    gone = people.user("carol")
    subprocess.run(
        [str(BIN / "turnstone-jobs"), "user", "disable", gone.name],
        env=services.env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    callers = [
        Caller("no token", None, "anonymous"),
        Caller("wrong token", "tj_not-a-token", "invalid"),
        Caller("expired", people.expired(owner), "invalid"),
        Caller("revoked", people.revoked(owner), "invalid"),
        Caller("disabled user", gone.tokens["all"], "invalid"),
        *[
            Caller(f"only {s}", people.token(admin if s == "admin" else owner, [s]), "scope", s)
            for s in SCOPES
        ],
        Caller("another user", other.tokens["all"], "other"),
        Caller("owner", owner.tokens["all"], "owner"),
        Caller("admin user", admin.tokens["all"], "admin"),
        Caller("operator", API_TOKEN, "admin"),
    ]
    ws_id = owner.api(services).create_workstream(name="owned by alice")
    db = Database(services.env["DATABASE_URL"])
    shown = store.Content("text", "text/plain; charset=utf-8", "notes", "notes.txt", b"hello")
    preview = store.add_preview(db, ws_id, None, shown)
    with db.session() as s:  # a watch of the owner's, for the watch routes
        s.add(Watch(id=uuid.uuid4().hex, ws_id=ws_id, name="w", command="true", poll_every=300,
                    max_polls=100, next_poll_at=datetime.now(UTC) + timedelta(days=1)))  # fmt: skip
        watch_id = s.exec(select(Watch.id).where(Watch.ws_id == ws_id)).one()
    db.engine.dispose()
    return World(callers, owner, ws_id, people, preview.id, links.content_link(preview), watch_id, services)


def expected(rule: Rule, caller: Caller) -> int | str:
    """A status, or "pass": got past the gate (neither 401 nor 403, nor 404 on an owned path)."""
    if rule.public:
        return "pass"
    if caller.kind in ("anonymous", "invalid"):
        return 401
    if caller.kind == "scope":
        return "pass" if rule.scope in (None, caller.scope) else 403
    if rule.scope == "admin" and caller.kind != "admin":
        return 403
    if caller.kind == "other" and rule.owned:
        return 404
    return "pass"


def matches(want: int | str, got: int, rule: Rule) -> bool:
    if want == "pass":
        return got not in DENIED and got < 500 and not (rule.owned and got == 404)
    return got == want


def app_routes(services: Services) -> Iterator[tuple[str, str, str]]:
    """(endpoint, method, rule path) of every route the application serves."""
    app = create_app(Settings.from_mapping({}, services.env))
    try:
        for r in app.url_map.iter_rules():
            for method in sorted((r.methods or set()) - {"HEAD", "OPTIONS"}):
                yield r.endpoint, method, r.rule
    finally:
        app.extensions["runtime"].close()


def fill(path: str, world: World, method: str = "GET") -> str:
    """The route's path with a value for each of its parameters, one the owner owns."""
    if path == "/v1/api/previews/<preview_id>/content":
        return world.preview_link
    deletes_workstream = method == "DELETE" and path == "/v1/api/workstreams/<ws_id>"
    samples: dict[str, Callable[[], str]] = {
        "ws_id": lambda: world.fresh_workstream() if deletes_workstream else world.ws_id,
        "preview_id": lambda: world.preview_id,
        "watch_id": lambda: world.watch_id,
        "name": lambda: "no-such-name",  # an MCP server's, a skill's
        "memory_id": lambda: "no-such-memory",
        "policy_id": lambda: "no-such-policy",
        "channel_id": lambda: "no-such-channel",
        "token_id": lambda: str(world.people.token_id(world.people.token(world.owner))),
        "filename": lambda: "style.css",
        "path": lambda: "style.css",
        "branch_id": world.fresh_branch,
        "message_id": world.fresh_message,
        "attachment_id": world.fresh_attachment,
        "run_id": world.fresh_run,
        "endpoint_id": world.fresh_endpoint,
        "schedule_id": world.fresh_schedule,
        "trigger_id": world.fresh_trigger,
        "delivery_id": world.fresh_delivery,
    }
    out = path
    while "<" in out:
        start, end = out.index("<"), out.index(">")
        name = out[start + 1 : end].split(":")[-1]
        assert name in samples, f"the access table has no sample value for <{name}> in {path}: add one"
        out = out[:start] + samples[name]() + out[end + 1 :]
    return out


def test_every_route_has_a_rule(services):
    missing = sorted({e for e, _, _ in app_routes(services)} - set(RULES))
    assert not missing, f"routes with no access rule in app/web/access.py: {missing}"
    stale = sorted(set(RULES) - {e for e, _, _ in app_routes(services)})
    assert not stale, f"rules for routes that no longer exist: {stale}"
    # A path naming something with an owner (a workstream, a token) is owner-checked, or public.
    unowned = sorted(
        f"{e} {p}"
        for e, _, p in app_routes(services)
        if any(f":{n}>" in p or f"<{n}>" in p for n in OWNED_PARAMS)
        and not (RULES[e].owned or RULES[e].public)
    )
    assert not unowned, f"routes naming an owned resource without owned=True: {unowned}"


def test_every_route_x_every_caller(services, world):
    failures = []
    rows = 0
    for endpoint, method, path in app_routes(services):
        rule = RULES[endpoint]
        if rule.in_view:
            continue  # the websocket: the next test
        for caller in world.callers:
            headers = {"Authorization": f"Bearer {caller.token}"} if caller.token else {}
            r = httpx.request(
                method, services.base_url + fill(path, world, method), headers=headers, json={}, timeout=30
            )
            rows += 1
            want = expected(rule, caller)
            if not matches(want, r.status_code, rule):
                failures.append(
                    f"{method} {path} as {caller.label}: want {want}, got {r.status_code} {r.text[:120]}"
                )
            elif r.status_code == 403 and caller.kind == "scope":
                assert rule.scope and f"'{rule.scope}'" in r.json()["error"], r.text  # names the scope
            elif r.status_code == 401:
                assert r.headers["WWW-Authenticate"] == "Bearer" and r.json()["error"]
    assert rows >= 15 * len(world.callers)
    assert not failures, "\n".join(failures)


def open_socket(services: Services, ws_id: str, token: str | None) -> websocket.WebSocket:
    url = services.base_url.replace("http://", "ws://") + f"/v1/ws/workstreams/{ws_id}"
    return websocket.create_connection(url + (f"?token={token}" if token else ""), timeout=10)


def exchange(conn: websocket.WebSocket, command: str) -> dict:
    """Send a command; the reply to it, or the error frame of a socket that was refused."""
    conn.send(json.dumps({"type": command, "request_id": command}))
    while True:
        frame = json.loads(conn.recv())
        if frame.get("type") in ("reply", "error"):
            return dict(frame)


# Query parameters the routes read (a limit, a search, a cursor, a user), each hostile.
HOSTILE_QUERY = "limit=%00&q=%ED%A0%80&after=%FF%FE&offset=-1&user=%00&scope=%ED%B0%80&type=" + "t" * 3000
WITH_BODY = ("POST", "PUT", "PATCH", "DELETE")
PARAM = re.compile(r"<(?:\w+:)?(\w+)>")


def hostile_requests(path: str, method: str, world: World) -> Iterator[tuple[str, str, bytes | None]]:
    """(kind, url path, body) of each hostile request for one route: bodies that are not a JSON
    object, a hostile value for each path parameter in turn, and hostile query parameters."""
    if method in WITH_BODY:
        for raw in RAW_BODIES.values():
            yield "body", fill(path, world, method), raw
    for param in PARAM.findall(path):
        for bad in PATH_IDS.values():
            one = PARAM.sub(lambda m, p=param, b=bad: b if m.group(1) == p else m.group(0), path)
            yield "path", fill(one, world, method), None
    if method == "GET":
        url = fill(path, world, method)
        yield "query", url + ("&" if "?" in url else "?") + HOSTILE_QUERY, None


def problem(kind: str, r: httpx.Response) -> str | None:
    """What is wrong with the answer to a hostile request of `kind`, or None."""
    if r.status_code >= 500:
        return "a server error"
    if r.status_code >= 400 and not (
        r.headers.get("Content-Type", "").startswith("application/json") and r.json().get("error")
    ):
        return "an error that is not a JSON object with `error`"
    if kind == "path" and r.status_code < 400:
        return "accepted: a hostile path value names nothing"  # a body may be ignored (logout)
    return None


def test_every_route_refuses_hostile_input_with_a_json_4xx(services, world):
    # Generated from the url_map: a new route is swept without anyone listing it here. As the
    # operator, so that every gate is passed and the hostile value reaches the view.
    failures = []
    swept = 0
    headers = {"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/json"}
    for endpoint, method, path in app_routes(services):
        if RULES[endpoint].in_view or not path.startswith("/v1/api/"):
            continue
        for kind, url, body in hostile_requests(path, method, world):
            r = httpx.request(method, services.base_url + url, headers=headers, content=body, timeout=60)
            swept += 1
            if wrong := problem(kind, r):
                shown = f"{r.status_code} {r.text[:100]}"
                failures.append(f"{method} {path}, hostile {kind} {url[:80]!r}: {wrong}: {shown}")
    assert swept > 200
    assert not failures, "\n".join(failures)


def test_the_websocket_and_its_commands_x_every_caller(services, world):
    rule = RULES[SOCKET_ENDPOINT]
    failures = []
    for caller in world.callers:
        conn = open_socket(services, world.ws_id, caller.token)
        try:
            first = exchange(conn, "cancel")
            got = first["status"] if first["type"] == "error" else "pass"
            want = expected(rule, caller)
            if want != got:
                failures.append(f"socket as {caller.label}: want {want}, got {first}")
            if got != "pass":
                continue
            # Open: each command needs its own scope on top of the socket's.
            replies = {"cancel": first, **{c: exchange(conn, c) for c in SOCKET_COMMANDS if c != "cancel"}}
            for command, scope in SOCKET_COMMANDS.items():
                status = replies[command]["status"]
                allowed = caller.kind in ("owner", "admin") or caller.scope == scope
                if (allowed and status in (401, 403, 404)) or (not allowed and status != 403):
                    failures.append(f"socket {command} as {caller.label}: got {status} {replies[command]}")
                elif status == 403:
                    assert f"'{scope}'" in replies[command]["body"]["error"]
        finally:
            conn.close()
    assert not failures, "\n".join(failures)
