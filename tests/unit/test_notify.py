"""notify without the service: the service JWT, what a notification may ask for, the tool's error
items, the retries (1 s, 3 s) and the per-turn limit, over a real SQLite file where state is kept."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import jwt
import pytest
from sqlmodel import update

from app.gateway import client, registry, tokens
from app.gateway.request import NotifyRequest, RequestError
from app.settings import GATEWAY_KIND, NotifySettings, Settings, SettingsError
from app.storage.database import Database
from app.storage.migrate import upgrade
from app.storage.models import Notification, ServiceRecord
from app.tools import notify
from app.tools.core.base import ToolContext, ToolSettings

SECRET = "unit-test-secret-" + "s" * 32


@pytest.fixture
def db(tmp_path: Path) -> Database:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    database = Database(url)
    yield database
    database.dispose()


# -- the service JWT ------------------------------------------------------------------------------


def test_a_signed_token_verifies_with_the_audience_and_a_short_life():
    claims = tokens.verify(SECRET, tokens.sign(SECRET))
    assert claims["aud"] == "turnstone-channel"
    assert 0 < claims["exp"] - claims["iat"] <= 60


def _claims(**changes: object) -> dict[str, object]:
    now = int(time.time())
    return {"aud": "turnstone-channel", "iss": "turnstone-jobs", "iat": now, "exp": now + 60, **changes}


# Each token is made when its test runs, not when the suite is collected: a full run reaches
# these tests many minutes after collection, and a token made then would have expired.
@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda: None, "required"),
        (lambda: "", "required"),
        (lambda: "not-a-jwt", "invalid"),
        (lambda: tokens.sign("another-secret-" + "x" * 32), "invalid"),
        (lambda: tokens.sign(SECRET, now=time.time() - 120), "expired"),
        (lambda: jwt.encode(_claims(aud="x"), SECRET, algorithm="HS256"), "not for turnstone-channel"),
        (lambda: jwt.encode({"aud": "turnstone-channel", "iss": "turnstone-jobs"}, SECRET, algorithm="HS256"),
         "invalid"),
        (lambda: jwt.encode(_claims(iat=1, exp=2**40), None, algorithm="none"), "invalid"),
    ],
    ids=["none", "empty", "not a JWT", "other secret", "expired", "other audience", "no times", "alg none"],
)  # fmt: skip
def test_a_bad_token_is_refused_saying_why(make, reason):
    with pytest.raises(tokens.TokenError, match=reason) as caught:
        tokens.verify(SECRET, make())
    assert SECRET not in str(caught.value)


def test_without_the_environment_every_process_shares_one_generated_secret(db, tmp_path):
    tokens._cached.clear()
    first = tokens.service_secret(db, NotifySettings())
    other = Database(db.url)  # another process's view of the same database
    tokens._cached.clear()
    assert tokens.service_secret(other, NotifySettings()) == first and len(first) >= 40
    assert tokens.service_secret(db, NotifySettings(service_secret=SECRET)) == SECRET
    other.dispose()


def test_racing_processes_agree_on_the_generated_secret(db):
    seen: list[str] = []

    def make() -> None:
        seen.append(tokens._stored_secret(Database(db.url)))

    threads = [threading.Thread(target=make) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 1 and len(seen) == 6


# -- what may be asked ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, error",
    [
        ({}, "'message' is required"),
        ({"message": "   ", "username": "ann"}, "'message' is required"),
        ({"message": "hi"}, "give a recipient"),
        ({"message": "hi", "username": "ann", "channel_type": "discord", "channel_id": "1"}, "not both"),
        ({"message": "hi", "username": "ann", "channel_id": "1"}, "not both"),
        ({"message": "hi", "channel_type": "discord"}, "'channel_id' must be"),
        (
            {"message": "hi", "channel_type": "slack", "channel_id": "1"},
            "'channel_type' must be one of discord",
        ),
        ({"message": "hi", "channel_type": "discord", "channel_id": "../../x"}, "'channel_id' must be"),
        ({"message": "x" * 2001, "username": "ann"}, "2001 characters; the limit is 2000"),
        ({"message": "x" * 1990, "title": "a long title", "username": "ann"}, "together are"),
        ({"message": "a\x00b", "username": "ann"}, "NUL"),
        ({"message": "a\ud800b", "username": "ann"}, "lone surrogate"),
        ({"message": ["a"], "username": "ann"}, "must be a string, not list"),
        ({"message": {"deep": [[[[{}]]]]}, "username": "ann"}, "must be a string, not dict"),
        ({"message": 7, "username": "ann"}, "must be a string, not int"),
        ({"message": "hi", "username": "Not A Name!"}, "is not a user name"),
        ({"message": "hi", "username": "ann", "title": "two\nlines"}, "one line"),
        ({"message": "hi", "username": "ann", "priority": "high"}, "unknown field"),
    ],
)
def test_a_wrong_call_is_an_error_item_that_says_what_is_wrong(args, error):
    prepared = notify.prepare(args, ToolContext(ws_id="w", working_dir="/tmp"))
    assert prepared.error is not None and prepared.error.startswith("Error: ")
    assert error in prepared.error
    assert not prepared.needs_approval


def test_a_good_call_is_auto_approved_with_the_title_as_a_bold_prefix():
    args = {
        "message": "build is green",
        "title": "CI",
        "username": "ann",
        "channel_type": "",
        "channel_id": "",
    }
    prepared = notify.prepare(args, ToolContext(ws_id="w", working_dir="/tmp"))
    assert prepared.error is None and not prepared.needs_approval
    assert prepared.args == {"message": "build is green", "title": "CI", "username": "ann"}  # "" is absent
    assert prepared.preview == "**CI**\nbuild is green"
    assert prepared.header == "notify user ann"


def test_the_gateway_body_is_checked_the_same_way():
    with pytest.raises(RequestError, match="JSON object"):
        NotifyRequest.parse(b"[" * 100_000)  # deep nesting: refused, not a crash
    with pytest.raises(RequestError, match="JSON object"):
        NotifyRequest.parse(b"\xff\xfe")
    wanted = NotifyRequest.parse(
        json.dumps({"message": "m", "channel_type": "discord", "channel_id": "42"}).encode()
    )
    assert wanted.target == "discord channel 42"


# -- retries ------------------------------------------------------------------------------------


class Gateway:
    """A scripted gateway at the post seam: each attempt takes the next answer."""

    def __init__(self, *answers: int | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[dict] = []

    def __call__(self, url: str, **kwargs: object) -> httpx.Response:
        self.calls.append({"url": url, **kwargs})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        request = httpx.Request("POST", url)
        if answer == 200:
            return httpx.Response(200, json={"delivered": ["discord 'ops'"], "failed": []}, request=request)
        return httpx.Response(answer, json={"error": "no channel was reached", "failed": []}, request=request)


def _wanted() -> NotifyRequest:
    return NotifyRequest.from_fields({"message": "deploy done", "username": "ann"})


def _live_gateway(db: Database) -> None:
    registry.register(db, GATEWAY_KIND, "http://127.0.0.1:1")


def test_transient_failures_are_tried_again_after_one_then_three_seconds(db):
    _live_gateway(db)
    slept: list[float] = []
    gateway = Gateway(httpx.ConnectError("refused"), 503, 200)
    outcome = client.send(
        db, NotifySettings(service_secret=SECRET), _wanted(), sleep=slept.append, post=gateway
    )
    assert outcome.ok and outcome.attempts == 3 and slept == [1.0, 3.0]
    assert outcome.delivered == ["discord 'ops'"]
    sent = gateway.calls[-1]
    assert sent["url"] == "http://127.0.0.1:1/v1/api/notify"
    assert tokens.verify(SECRET, sent["headers"]["Authorization"].removeprefix("Bearer "))["sub"] == "notify"


def test_three_failures_give_up_with_the_last_reason(db):
    _live_gateway(db)
    slept: list[float] = []
    gateway = Gateway(httpx.ConnectError("x"), httpx.ConnectError("x"), httpx.ConnectError("x"))
    outcome = client.send(
        db, NotifySettings(service_secret=SECRET), _wanted(), sleep=slept.append, post=gateway
    )
    assert not outcome.ok and outcome.attempts == 3 and slept == [1.0, 3.0]
    assert "could not be reached (ConnectError)" in outcome.reason


def test_a_refusal_is_final(db):
    _live_gateway(db)
    slept: list[float] = []
    outcome = client.send(
        db, NotifySettings(service_secret=SECRET), _wanted(), sleep=slept.append, post=Gateway(404)
    )
    assert not outcome.ok and outcome.attempts == 1 and slept == []


def test_no_healthy_gateway_is_a_transient_failure(db):
    registry.register(db, "something-else", "http://127.0.0.1:2")
    slept: list[float] = []
    outcome = client.send(
        db, NotifySettings(service_secret=SECRET), _wanted(), sleep=slept.append, post=Gateway()
    )
    assert not outcome.ok and slept == [1.0, 3.0] and "no healthy channel gateway" in outcome.reason


def test_the_retry_delays_are_real_seconds(db):
    """The real clock, once: three refused attempts take the 1 s and 3 s between them."""
    _live_gateway(db)
    started = time.monotonic()
    outcome = client.send(
        db, NotifySettings(service_secret=SECRET), _wanted(), post=Gateway(*[httpx.ConnectError("x")] * 3)
    )
    assert not outcome.ok and 4.0 <= time.monotonic() - started < 8.0


def test_a_stale_gateway_is_passed_over_for_a_fresh_one(db):
    stale = registry.register(db, GATEWAY_KIND, "http://127.0.0.1:3")
    with db.session() as s:
        s.exec(update(ServiceRecord).where(ServiceRecord.id == stale).values(  # type: ignore[arg-type]
            heartbeat_at=datetime.now(UTC) - timedelta(seconds=60)))  # fmt: skip
    assert registry.healthy_urls(db, GATEWAY_KIND, 30) == []
    registry.register(db, GATEWAY_KIND, "http://127.0.0.1:4")
    assert registry.healthy_urls(db, GATEWAY_KIND, 30) == ["http://127.0.0.1:4"]
    registry.heartbeat(db, stale, GATEWAY_KIND, "http://127.0.0.1:3")
    assert set(registry.healthy_urls(db, GATEWAY_KIND, 30)) == {"http://127.0.0.1:3", "http://127.0.0.1:4"}


# -- the per-turn limit ---------------------------------------------------------------------------


def test_five_slots_per_turn_and_a_failure_gives_its_slot_back(db):
    slots = [notify.take(db, "turn1", f"c{n}") for n in range(5)]
    assert slots == [1, 2, 3, 4, 5]
    for slot in (1, 2, 4, 5):
        notify.confirm(db, "turn1", slot)
    assert notify.take(db, "turn1", "c6") == notify.Full(sent=4, unsettled=1)  # slot 3 still being sent
    assert notify.take(db, "turn2", "c1") == 1  # another turn has its own
    notify.give_back(db, "turn1", 3)
    assert notify.take(db, "turn1", "c7") == 3
    notify.confirm(db, "turn1", 3)
    notify.give_back(db, "turn1", 3)  # a sent slot is never given back
    assert notify.sent(db, "turn1") == 5 and notify.take(db, "turn1", "c8") == notify.Full(
        sent=5, unsettled=0
    )


def test_parallel_calls_of_one_batch_take_at_most_five_slots(db):
    got: list[int | notify.Full] = []

    def take(n: int) -> None:
        got.append(notify.take(Database(db.url), "turn-par", f"c{n}"))

    threads = [threading.Thread(target=take, args=(n,)) for n in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s for s in got if isinstance(s, int)) == [1, 2, 3, 4, 5]
    assert [s for s in got if not isinstance(s, int)] == [notify.Full(sent=0, unsettled=5)] * 4


def test_a_call_that_finds_every_slot_taken_waits_for_those_being_sent(db, monkeypatch):
    """The audit's batch: six parallel calls, the first of which fails after the next four went
    out. The sixth finds all five slots taken, waits for the first to settle, takes its slot and
    is sent: five notifications, and every count the model reads is true."""
    first_sending, sixth_waiting = threading.Event(), threading.Event()
    sent: list[str] = []

    def fake_send(_db, _settings, wanted, **_kw):  # the gateway's seam
        if wanted.message == "m0":
            first_sending.set()
            sixth_waiting.wait(timeout=10)
            return client.Outcome(False, 3, reason="platform down")
        sent.append(wanted.message)
        return client.Outcome(True, 1, ["discord 'ops'"])

    def the_sixth_waits() -> bool:  # the call's cancel check, asked while it waits
        sixth_waiting.set()
        return False

    monkeypatch.setattr(client, "send", fake_send)
    results: dict[int, object] = {}

    def call(n: int) -> None:
        waits = the_sixth_waits if n == 5 else lambda: False
        ctx = ToolContext(ws_id="w", working_dir="/tmp", db=Database(db.url), turn_id="t-wait",
                          call_id=f"c{n}", is_cancelled=waits)  # fmt: skip
        results[n] = notify.execute({"message": f"m{n}", "username": "ann"}, ctx)

    first = threading.Thread(target=call, args=(0,))
    first.start()
    assert first_sending.wait(timeout=10)
    for n in range(1, 5):  # the next four go out while the first is still being tried
        other = threading.Thread(target=call, args=(n,))
        other.start()
        other.join()
    sixth = threading.Thread(target=call, args=(5,))
    sixth.start()
    for t in (first, sixth):
        t.join()
    outputs = {n: r.output for n, r in results.items()}  # type: ignore[attr-defined]
    assert outputs[0] == "Error: notification not sent after 3 attempts: platform down"
    assert sent == ["m1", "m2", "m3", "m4", "m5"]
    assert [outputs[n].split("(")[-1] for n in range(1, 6)] == [f"{k} of 5 this turn)." for k in range(1, 6)]


def test_a_send_that_never_settles_is_waited_for_only_as_long_as_a_send_can_take(db):
    for n in range(5):
        assert notify.take(db, "t-lost", f"c{n}") == n + 1
    for slot in (1, 2, 3, 4):
        notify.confirm(db, "t-lost", slot)
    started = time.monotonic()
    assert notify.take(db, "t-lost", "c5", settle_seconds=0.5) == notify.Full(sent=4, unsettled=1)
    assert 0.5 <= time.monotonic() - started < 5
    with db.session() as s:  # its worker stopped long ago: nobody waits for it any more
        s.exec(update(Notification).values(created_at=datetime.now(UTC) - timedelta(hours=1)))
    started = time.monotonic()
    assert notify.take(db, "t-lost", "c6", settle_seconds=600) == notify.Full(sent=4, unsettled=1)
    assert time.monotonic() - started < 5


def test_the_refusal_says_what_was_sent_and_what_is_unknown(db, monkeypatch):
    """Four sent, and a fifth whose worker died while it was being sent (the slot it left, taken
    an hour ago): the sixth is refused at once, and told exactly that."""
    monkeypatch.setattr(client, "send", lambda *_a, **_k: client.Outcome(True, 1, ["discord 'ops'"]))
    ctx = ToolContext(ws_id="w", working_dir="/tmp", db=db, turn_id="t-say", call_id="c")
    for _ in range(4):
        assert not notify.execute({"message": "m", "username": "ann"}, ctx).is_error
    with db.session() as s:
        s.add(
            Notification(
                turn_id="t-say", slot=5, call_id="lost", created_at=datetime.now(UTC) - timedelta(hours=1)
            )
        )
    started = time.monotonic()
    refused = notify.execute({"message": "m", "username": "ann"}, ctx)
    assert refused.is_error and refused.output == (
        "Error: notify is limited to 5 successful notifications per turn; this turn has sent 4, "
        "and 1 more did not finish (it may have gone out); not sent"
    )
    assert time.monotonic() - started < 5


def test_the_sixth_successful_notify_of_a_turn_is_an_error_naming_the_limit(db, monkeypatch):
    sent: list[NotifyRequest] = []

    def fake_send(_db, _settings, wanted, **_kw):  # the gateway's seam; the limit is what is tested
        sent.append(wanted)
        return client.Outcome(True, 1, ["discord 'ops'"])

    monkeypatch.setattr(client, "send", fake_send)
    ctx = ToolContext(ws_id="w", working_dir="/tmp", db=db, turn_id="t-limit", settings=ToolSettings())
    results = []
    for n in range(6):
        ctx.call_id = f"call{n}"
        results.append(notify.execute({"message": f"n{n}", "username": "ann"}, ctx))
    assert [r.is_error for r in results] == [False] * 5 + [True]
    assert "5 of 5 this turn" in results[4].output
    assert "limited to 5 successful notifications per turn" in results[5].output and len(sent) == 5


def test_failed_notifications_do_not_count(db, monkeypatch):
    answers = [False, False, True, True, True, True, True, True]
    monkeypatch.setattr(
        client, "send", lambda *_a, **_k: client.Outcome(answers.pop(0), 3, ["x"], reason="gateway down")
    )
    ctx = ToolContext(ws_id="w", working_dir="/tmp", db=db, turn_id="t-fail", call_id="c")
    results = [notify.execute({"message": "m", "username": "ann"}, ctx) for _ in range(8)]
    assert [r.is_error for r in results] == [True, True, False, False, False, False, False, True]
    assert results[0].output == "Error: notification not sent after 3 attempts: gateway down"


# -- settings -------------------------------------------------------------------------------------


def test_notify_settings_come_from_the_section_and_the_environment():
    settings = Settings.from_mapping(
        {"notify": {"discord_api_base": "http://127.0.0.1:9/api/", "allow_private_network": True}},
        {"TURNSTONE_SERVICE_SECRET": SECRET, "TURNSTONE_DISCORD_BOT_TOKEN": "bot", "GATEWAY_PORT": "9999"},
    )
    assert settings.notify.discord_api_base == "http://127.0.0.1:9/api"
    assert (
        settings.notify.service_secret == SECRET and settings.notify.advertised_url == "http://127.0.0.1:9999"
    )
    assert SECRET not in repr(settings) and "bot" not in repr(settings.notify)


def test_the_public_url_comes_from_the_section_or_over_it_the_environment():
    section = {"notify": {"public_url": "https://agents.example.com/"}}
    assert Settings.from_mapping(section, {}).notify.public_url == "https://agents.example.com"
    env = {"TURNSTONE_PUBLIC_URL": "http://10.0.0.5:8080"}
    assert Settings.from_mapping(section, env).notify.public_url == "http://10.0.0.5:8080"
    assert Settings.from_mapping({}, {}).notify.public_url is None


@pytest.mark.parametrize(
    "section, error",
    [
        ({"discord_api_base": "ftp://x"}, "discord_api_base must be an http"),
        ({"ntfy_base_url": ""}, "must not be empty"),
        ({"allow_private_network": "yes"}, "true or false"),
        ({"heartbeat_seconds": 0}, "positive number"),
        ({"heartbeat_seconds": 10, "stale_seconds": 5}, "longer than heartbeat"),
        ({"service_secret": "in a file"}, "unknown key"),
        ({"public_url": "javascript:alert(1)"}, "public_url must be an http"),
        ({"public_url": 5}, "public_url"),
        ({"public_url": "https://a.example/\x00"}, "public_url"),
    ],
)
def test_bad_notify_settings_are_refused_by_key(section, error):
    with pytest.raises(SettingsError, match=error):
        Settings.from_mapping({"notify": section}, {})


# -- channels and platforms -----------------------------------------------------------------------


def test_channel_targets_are_checked_and_shown_redacted():
    from app.gateway.channels import ChannelError, parse_target, redacted
    from app.storage.models import ChannelLink

    settings = NotifySettings(discord_api_base="http://127.0.0.1:9/api")
    hook = parse_target("discord", {"webhook_url": "http://127.0.0.1:9/api/webhooks/55/tok-en"}, settings)
    assert redacted(ChannelLink(id="a", user_id="u", channel_type="discord", target=hook)) == "webhook 55/…"
    bot = parse_target(
        "discord", {"channel_id": "9", "bot_token_env": "TURNSTONE_DISCORD_BOT_TOKEN_OPS"}, settings
    )
    assert redacted(ChannelLink(id="b", user_id="u", channel_type="discord", target=bot)) == (
        "bot channel 9 (TURNSTONE_DISCORD_BOT_TOKEN_OPS)"
    )
    for given, field in (
        ({"channel_id": "9", "bot_token_env": "DATABASE_URL"}, "bot_token_env"),
        (
            {
                "webhook_url": "http://127.0.0.1:9/api/webhooks/55/t",
                "bot_token_env": "TURNSTONE_DISCORD_BOT_TOKEN",
            },
            "bot_token_env",
        ),
        ({"webhook_url": "http://127.0.0.1:9/api/../webhooks/55/t"}, "webhook_url"),
        ({"webhook_url": "http://127.0.0.1:9/apix/webhooks/55/t"}, "webhook_url"),
    ):
        with pytest.raises(ChannelError) as caught:
            parse_target("discord", given, settings)
        assert caught.value.field == field
    with pytest.raises(ChannelError, match="private"):
        parse_target("webhook", {"url": "http://127.0.0.1:5/hook"}, settings)  # loopback, switch off


def test_a_named_bot_token_comes_from_its_own_variable_only():
    from app.gateway.platforms import DeliveryError, _bot_token

    settings = Settings.from_mapping(
        {},
        {
            "TURNSTONE_DISCORD_BOT_TOKEN": "main",
            "TURNSTONE_DISCORD_BOT_TOKEN_OPS": "ops",
            "DATABASE_URL": "db",
        },
    ).notify
    assert (
        _bot_token(settings, None) == "main" and _bot_token(settings, "TURNSTONE_DISCORD_BOT_TOKEN") == "main"
    )
    assert _bot_token(settings, "TURNSTONE_DISCORD_BOT_TOKEN_OPS") == "ops"
    assert _bot_token(settings, "DATABASE_URL") == "main"  # never another variable's value
    with pytest.raises(DeliveryError, match="TURNSTONE_DISCORD_BOT_TOKEN_NONE") as caught:
        _bot_token(settings, "TURNSTONE_DISCORD_BOT_TOKEN_NONE")
    assert caught.value.is_config
