"""notify through the whole service, on SQLite and PostgreSQL: the fake model calls it, a real
worker signs a service JWT and posts to the gateway process (found in the services table), and
the gateway delivers to the fake chat platform. Also: a gateway that is down, tokens the gateway
refuses, the per-turn limit, and the channels API with hostile input."""

from __future__ import annotations

import time

import httpx
import jwt
import pytest

from app.gateway import tokens
from app.settings import NotifySettings
from app.storage.database import Database
from tests.fakes.model_server import Reply, ToolCall
from tests.integration.conftest import BOT_TOKEN
from tests.integration.people import People, Person
from tests.integration.services import Services

pytestmark = pytest.mark.integration
CH = "/v1/api/channels"


def channels_api(services: Services, person: Person) -> httpx.Client:
    return httpx.Client(
        base_url=services.base_url,
        headers={"Authorization": f"Bearer {person.tokens['all']}"},
        timeout=30,
    )


def link(client: httpx.Client, **body: str) -> dict:
    r = client.post(CH, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def run_turn(api, model, sock, ws_id: str, calls: list[ToolCall], key: str) -> list[dict]:  # type: ignore[no-untyped-def]
    """A turn whose model makes `calls`; the results, in call order."""
    scripted = [ToolCall(c.name, c.arguments, id=f"{key}-{n}") for n, c in enumerate(calls)]
    model.enqueue(Reply(text="Letting them know.", tool_calls=scripted), match=key)
    model.enqueue(Reply(text="Done."), match=key)
    turn_id = api.send(ws_id, f"{key}: tell them")
    results = [sock.wait_type("tool_result", call_id=c.id, timeout=90) for c in scripted]
    sock.wait_turn_end(turn_id, timeout=90)
    return results


@pytest.fixture
def people(services: Services) -> People:
    return People(services)


def test_a_notify_call_reaches_every_linked_channel_through_the_gateway(
    services, api, model, open_socket, chat_platform, people, workdir
):
    ann = people.user("ann")
    mine = channels_api(services, ann)
    hook = chat_platform.discord_webhook("4242", "secret-webhook-token-abc")
    link(mine, channel_type="discord", webhook_url=hook, label="ops")
    link(mine, channel_type="ntfy", topic="ann-alerts-7x1")
    link(mine, channel_type="webhook", url=chat_platform.webhook_url("pager"), label="pager")
    listed = mine.get(CH).json()["channels"]
    assert [c["label"] for c in listed] == ["ops", "", "pager"]
    assert "secret-webhook-token-abc" not in str(listed) and "ann-alerts-7x1" not in str(listed)
    assert listed[0]["target"] == "webhook 4242/…"

    ws_id = api.create_workstream(name="notifying", working_dir=str(workdir))
    sock = open_socket(ws_id)
    call = ToolCall("notify", {"username": ann.name, "title": "Deploy", "message": "v2 is live ✓"})
    (result,) = run_turn(api, model, sock, ws_id, [call], "notify-linked")
    assert not result["is_error"], result
    assert result["output"].startswith(f"Notification sent to user {ann.name} via discord 'ops', ntfy (")
    assert "(1 of 5 this turn)" in result["output"]

    (discord,) = chat_platform.wait_for(kind="discord-webhook", target="4242")
    assert discord.body == {"content": "**Deploy**\nv2 is live ✓"}
    (ntfy,) = chat_platform.wait_for(kind="ntfy", target="ann-alerts-7x1")
    assert ntfy.body == "v2 is live ✓" and ntfy.headers["Title"] == "Deploy"
    (hooked,) = chat_platform.wait_for(kind="webhook", target="pager")
    assert hooked.body == {"title": "Deploy", "message": "v2 is live ✓", "text": "**Deploy**\nv2 is live ✓"}
    seen = str(api.history(ws_id)) + str(sock.events)
    assert "secret-webhook-token-abc" not in seen and "ann-alerts-7x1" not in seen


def test_a_direct_discord_channel_goes_through_the_gateways_bot(
    services, api, model, open_socket, chat_platform, workdir
):
    chat_platform.bot_token = BOT_TOKEN
    ws_id = api.create_workstream(name="direct", working_dir=str(workdir))
    sock = open_socket(ws_id)
    call = ToolCall(
        "notify", {"channel_type": "discord", "channel_id": "987654321", "message": "disk 91% full"}
    )
    (result,) = run_turn(api, model, sock, ws_id, [call], "notify-direct")
    assert not result["is_error"] and "discord channel 987654321" in result["output"]
    (post,) = chat_platform.wait_for(kind="discord-bot", target="987654321")
    assert post.body == {"content": "disk 91% full"} and post.headers["Authorization"] == f"Bot {BOT_TOKEN}"
    assert BOT_TOKEN not in str(api.history(ws_id)) + str(sock.events)


def test_a_bad_call_is_an_error_item_and_the_turn_goes_on(api, model, open_socket, chat_platform, workdir):
    ws_id = api.create_workstream(name="bad-notify", working_dir=str(workdir))
    sock = open_socket(ws_id)
    calls = [
        ToolCall("notify", {"message": "x", "username": "ann", "channel_type": "discord", "channel_id": "1"}),
        ToolCall("notify", {"message": "nobody"}),
        ToolCall("notify", {"message": "m" * 2001, "username": "ann"}),
        ToolCall("notify", "just a bare string"),  # the primary key rescues it: message, but no recipient
        ToolCall("notify", {"message": "hi", "username": "no-such-user"}),
    ]
    results = run_turn(api, model, sock, ws_id, calls, "notify-bad")
    assert all(r["is_error"] for r in results)
    assert "not both" in results[0]["output"] and "give a recipient" in results[1]["output"]
    assert "the limit is 2000" in results[2]["output"] and "give a recipient" in results[3]["output"]
    assert "refused it (404): no user named 'no-such-user'" in results[4]["output"]
    assert api.workstream(ws_id)["state"] == "idle" and chat_platform.posts == []


def test_a_gateway_that_is_down_is_tried_three_times_then_the_model_is_told(
    services, api, model, open_socket, chat_platform, workdir
):
    ws_id = api.create_workstream(name="gateway-down", working_dir=str(workdir))
    sock = open_socket(ws_id)
    services.kill_group("gateway")  # a crash: its services row stays, fresh for a few seconds more
    started = time.monotonic()
    call = ToolCall("notify", {"channel_type": "discord", "channel_id": "5", "message": "anyone there?"})
    (result,) = run_turn(api, model, sock, ws_id, [call], "notify-down")
    assert result["is_error"]
    assert result["output"].startswith("Error: notification not sent after 3 attempts: ")
    assert "could not be reached" in result["output"] or "no healthy channel gateway" in result["output"]
    assert time.monotonic() - started >= 4.0  # the 1 s and 3 s between the attempts
    assert chat_platform.posts == []


def test_a_platform_that_fails_is_retried_and_the_failure_does_not_count(
    services, api, model, open_socket, chat_platform, workdir
):
    chat_platform.fail(503)
    ws_id = api.create_workstream(name="platform-down", working_dir=str(workdir))
    sock = open_socket(ws_id)
    call = ToolCall("notify", {"channel_type": "discord", "channel_id": "6", "message": "hello?"})
    (result,) = run_turn(api, model, sock, ws_id, [call], "notify-503")
    assert result["is_error"] and "answered 502: discord channel 6: HTTP 503" in result["output"]
    chat_platform.reset()
    calls = [
        ToolCall("notify", {"channel_type": "discord", "channel_id": "6", "message": f"n{n}"})
        for n in range(6)
    ]
    results = run_turn(api, model, sock, ws_id, calls, "notify-six")
    errors = [r for r in results if r["is_error"]]
    assert len(errors) == 1 and "limited to 5 successful notifications per turn" in errors[0]["output"]
    assert len(chat_platform.wait_for(5, kind="discord-bot", target="6")) == 5
    time.sleep(0.5)  # nothing more may arrive
    assert len(chat_platform.posts) == 5


def test_the_gateway_accepts_only_a_service_token_for_it(services, chat_platform):
    db = Database(services.db.url)
    try:
        secret = tokens.service_secret(db, NotifySettings())  # the one the processes generated and share
    finally:
        db.dispose()
    url = services.gateway_url + "/v1/api/notify"
    body = {"channel_type": "discord", "channel_id": "77", "message": "signed"}
    now = int(time.time())
    wrong_aud = jwt.encode(
        {"aud": "turnstone-web", "iss": "turnstone-jobs", "iat": now, "exp": now + 60}, secret
    )
    for header in (
        None,
        "Bearer x",
        "Bearer not.a.jwt",
        "Bearer " + tokens.sign("a-secret-nobody-shares-" + "z" * 20),
        "Bearer " + tokens.sign(secret, now=now - 300),
        "Bearer " + wrong_aud,
        "Basic " + tokens.sign(secret),
    ):
        r = httpx.post(url, json=body, headers={"Authorization": header} if header else {}, timeout=30)
        assert r.status_code == 401 and r.json()["error"], (header, r.text)
        assert secret not in r.text
    assert chat_platform.posts == []
    good = {"Authorization": "Bearer " + tokens.sign(secret)}
    r = httpx.post(url, json=body, headers=good, timeout=30)
    assert r.status_code == 200 and r.json() == {"delivered": ["discord channel 77"], "failed": []}
    chat_platform.wait_for(kind="discord-bot", target="77")
    hostile = [
        b"not json",
        b"[" * 50_000,
        b'{"message": "a\\u0000b", "channel_type": "discord", "channel_id": "1"}',
        b'{"message": "a\\ud800b", "channel_type": "discord", "channel_id": "1"}',
        b'{"message": {"deep": [[[[1]]]]}, "channel_type": "discord", "channel_id": "1"}',
        b'{"message": "x", "username": "ann", "channel_type": "discord", "channel_id": "1"}',
        b'{"message": "x"}',
    ]
    for raw in hostile:
        r = httpx.post(url, content=raw, headers={**good, "Content-Type": "application/json"}, timeout=30)
        assert r.status_code == 400 and r.json()["error"], (raw[:40], r.text)
    r = httpx.post(url, content=b"x" * 200_000, headers=good, timeout=30)
    assert r.status_code == 413 and r.json()["error"]
    assert httpx.get(services.gateway_url + "/nowhere", timeout=30).status_code == 404


# -- the channels API -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "channel_type"),
        ({"channel_type": "carrier-pigeon"}, "channel_type"),
        ({"channel_type": ["discord"]}, "channel_type"),
        ({"channel_type": "discord"}, "webhook_url"),
        # well-formed, but not this service's Discord, and the SSRF guard's refusals: 422
        ({"channel_type": "discord", "webhook_url": "https://evil.example/api/webhooks/1/t"}, "webhook_url"),
        ({"channel_type": "discord", "channel_id": "12; rm -rf"}, "channel_id"),
        ({"channel_type": "discord", "channel_id": "1", "webhook_url": "x"}, "webhook_url"),
        ({"channel_type": "discord", "channel_id": "1", "topic": "t"}, "topic"),
        ({"channel_type": "ntfy", "topic": "a/../b"}, "topic"),
        ({"channel_type": "ntfy", "topic": "a\x00b"}, "topic"),
        (b'{"channel_type": "ntfy", "topic": "a\\ud800b"}', "topic"),  # a lone surrogate, as JSON sends it
        ({"channel_type": "ntfy", "topic": 7}, "topic"),
        ({"channel_type": "ntfy", "topic": {"deep": [[[[[]]]]]}}, "topic"),
        ({"channel_type": "ntfy", "topic": "t" * 5000}, "topic"),
        ({"channel_type": "ntfy", "topic": "ok", "label": "l" * 201}, "label"),
        ({"channel_type": "webhook", "url": "file:///etc/passwd"}, "url"),
        ({"channel_type": "webhook", "url": "http://169.254.169.254/latest"}, "url"),
        ({"channel_type": "ntfy", "topic": "ok", "owner": "someone-else"}, "owner"),
    ],
)
def test_a_hostile_channel_is_a_4xx_naming_the_field(services, people, body, field):
    ann = people.user("hostile")
    if isinstance(body, bytes):
        r = channels_api(services, ann).post(CH, content=body, headers={"Content-Type": "application/json"})
    else:
        r = channels_api(services, ann).post(CH, json=body)
    unusable = isinstance(body, dict) and (
        "evil.example" in str(body.get("webhook_url")) or "169.254" in str(body.get("url"))
    )
    assert r.status_code == (422 if unusable else 400), r.text
    assert r.json()["field"] == field and r.json()["error"]


def test_channels_are_each_users_own(services, people, api):
    ann, bob = people.user("own-a"), people.user("own-b", admin=True)
    mine = channels_api(services, ann)
    made = link(mine, channel_type="ntfy", topic="only-ann-knows")
    theirs = channels_api(services, bob)
    assert theirs.get(CH).json() == {"channels": []}  # an admin sees no one else's, secrets least of all
    assert theirs.delete(f"{CH}/{made['id']}").status_code == 404
    assert api.http.get("/v1/api/channels").json() == {"channels": []}  # the operator has none
    r = api.http.post("/v1/api/channels", json={"channel_type": "ntfy", "topic": "op"})
    assert r.status_code == 400 and "belong to a user" in r.json()["error"]
    for bad in ("x" * 40, "a%00b"):
        assert mine.delete(f"{CH}/{bad}").status_code == 404
    for raw in (b"not json", b"[1]", b"{" * 10_000):
        r = mine.post(CH, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]
    assert mine.delete(f"{CH}/{made['id']}").json() == {"deleted": made["id"]}
    assert mine.get(CH).json() == {"channels": []}


def test_the_limit_counts_every_step_of_a_turn_from_the_database(
    services, api, model, open_socket, chat_platform, workdir
):
    """Three notifications in the turn's first step, three in its second (a new batch task,
    on whichever worker thread): the count is the database's, so the sixth is refused."""
    ws_id = api.create_workstream(name="two-steps", working_dir=str(workdir))
    sock = open_socket(ws_id)

    def calls(step: int) -> list[ToolCall]:
        return [
            ToolCall("notify", {"channel_type": "discord", "channel_id": "8", "message": f"s{step}n{n}"},
                     id=f"step{step}-{n}")
            for n in range(3)
        ]  # fmt: skip

    model.enqueue(Reply(text="First three.", tool_calls=calls(1)), match="limit-steps")
    model.enqueue(Reply(text="Three more.", tool_calls=calls(2)), match="limit-steps")
    model.enqueue(Reply(text="Done."), match="limit-steps")
    turn_id = api.send(ws_id, "limit-steps: keep them posted")
    results = [sock.wait_type("tool_result", call_id=c.id, timeout=90) for c in calls(1) + calls(2)]
    sock.wait_turn_end(turn_id, timeout=90)
    assert [r["is_error"] for r in results[:3]] == [False] * 3
    assert sorted(r["is_error"] for r in results[3:]) == [False, False, True]
    assert len(chat_platform.wait_for(5, kind="discord-bot", target="8")) == 5
    # a new turn has five again
    one = ToolCall("notify", {"channel_type": "discord", "channel_id": "8", "message": "new"})
    (again,) = run_turn(api, model, sock, ws_id, [one], "limit-next")
    assert not again["is_error"] and "(1 of 5 this turn)" in again["output"]


def test_the_limit_survives_a_worker_killed_mid_turn(
    services, api, model, open_socket, chat_platform, workdir
):
    """Three notifications, then the worker dies while a command of the same batch runs; the new
    worker finishes the turn, whose next step asks for three more: two go, the sixth is refused."""
    ws_id = api.create_workstream(name="killed", working_dir=str(workdir), auto_approve=True)
    sock = open_socket(ws_id)
    first = [
        ToolCall("notify", {"channel_type": "discord", "channel_id": "9", "message": f"a{n}"}, id=f"k1-{n}")
        for n in range(3)
    ]
    slow = ToolCall("bash", {"command": "echo started; sleep 30"}, id="k1-bash")
    second = [
        ToolCall("notify", {"channel_type": "discord", "channel_id": "9", "message": f"b{n}"}, id=f"k2-{n}")
        for n in range(3)
    ]
    model.enqueue(Reply(text="Three, and a long command.", tool_calls=[*first, slow]), match="limit-killed")
    model.enqueue(Reply(text="Three more.", tool_calls=second), match="limit-killed")
    model.enqueue(Reply(text="Done."), match="limit-killed")
    turn_id = api.send(ws_id, "limit-killed: go")
    for call in first:
        assert not sock.wait_type("tool_result", call_id=call.id, timeout=90)["is_error"]
    sock.wait_type("tool_output_chunk", call_id=slow.id, timeout=60)
    services.kill("worker")
    services.start_worker()
    results = [sock.wait_type("tool_result", call_id=c.id, timeout=120) for c in second]
    sock.wait_turn_end(turn_id, timeout=120)
    assert sorted(r["is_error"] for r in results) == [False, False, True]
    refused = next(r for r in results if r["is_error"])
    assert "limited to 5 successful notifications per turn" in refused["output"]
    assert len(chat_platform.wait_for(5, kind="discord-bot", target="9")) == 5
