"""Fixtures: the fake model server, and the whole service on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.settings import Settings
from app.taskqueue import TaskQueue, make_celery
from tests.fakes.chat_platform import FakeChatPlatform
from tests.fakes.model_server import WINDOWED_MODEL_ID, FakeModelServer
from tests.fakes.reranker import FakeReranker
from tests.fakes.searxng import FakeSearxNG
from tests.fakes.tool_source import FakeTools
from tests.integration.client import Api, EventSocket
from tests.integration.services import API_TOKEN, PG_ADMIN_URL, Services, free_port, postgres_available

BACKENDS = ["sqlite", "postgresql"]
BOT_TOKEN = "bot-token-for-the-fake-discord-0123456789"


@pytest.fixture(scope="session")
def model_server() -> Iterator[FakeModelServer]:
    server = FakeModelServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def backup_model_server() -> Iterator[FakeModelServer]:
    """A second model backend, for fallback chains (tests/integration/test_fallbacks.py)."""
    server = FakeModelServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def searxng_server() -> Iterator[FakeSearxNG]:
    server = FakeSearxNG()
    yield server
    server.close()


@pytest.fixture(scope="session")
def reranker_server() -> Iterator[FakeReranker]:
    server = FakeReranker()
    server.fail(503)  # down unless a test asks for it (`reranker`): searches keep SearxNG's order
    yield server
    server.close()


@pytest.fixture(scope="session")
def chat_platform_server() -> Iterator[FakeChatPlatform]:
    server = FakeChatPlatform()
    yield server
    server.close()


@pytest.fixture(scope="session", params=BACKENDS)
def services(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    model_server: FakeModelServer,
    backup_model_server: FakeModelServer,
    searxng_server: FakeSearxNG,
    reranker_server: FakeReranker,
    chat_platform_server: FakeChatPlatform,
) -> Iterator[Services]:
    if request.param == "postgresql" and not postgres_available():  # raises under CI
        pytest.skip(f"PostgreSQL is not reachable at {PG_ADMIN_URL} (set TEST_PG_ADMIN_URL)")
    tmp = tmp_path_factory.mktemp(f"service-{request.param}")
    svc = Services(request.param, tmp, model_server.openai_base_url)
    # A second model, on the Anthropic wire format, for workstreams that ask for it.
    config = tmp / "config.toml"
    config.write_text(
        # web_fetch's targets are loopback test servers: private, so allowed only by this switch
        "[tools]\nallow_private_network = true\n"
        f'searxng_url = "{searxng_server.url}"\n'  # web_search's backend, a fake SearxNG
        f'[models.claude]\nprovider = "anthropic"\nmodel = "fake-claude"\n'
        f'base_url = "{model_server.anthropic_base_url}"\n'
        "[models.claude.capabilities]\nsupports_vision = true\nsupports_pdf = true\n"
        # web_search's reranker, a fake /rerank endpoint
        f'[models.ranker]\nprovider = "rerank"\nmodel = "fake-ranker"\nbase_url = "{reranker_server.url}"\n'
        'api_key_env = "TJ_TEST_RERANK_KEY"\n[models.ranker.capabilities]\nsupports_rerank = true\n'
        # an OpenAI-format model that can see images (the default one cannot)
        f'[models.vision]\nprovider = "openai"\nmodel = "fake-vision"\n'
        f'base_url = "{model_server.openai_base_url}"\n'
        "[models.vision.capabilities]\nsupports_vision = true\n"
        # one request at a time across the service (test_model_slots.py)
        f'[models.single]\nprovider = "openai"\nmodel = "fake-single"\nmax_concurrent = 1\n'
        f'base_url = "{model_server.openai_base_url}"\n'
        # and one with no key anywhere: its turns must end with an error that says what to set
        '[models.keyless]\nprovider = "anthropic"\nmodel = "x"\napi_key_env = "TJ_TEST_UNSET_KEY"\n'
        # an Anthropic-format model whose provider runs tool search itself
        f'[models.claude_search]\nprovider = "anthropic"\nmodel = "fake-claude"\n'
        f'base_url = "{model_server.anthropic_base_url}"\n'
        "[models.claude_search.capabilities]\nsupports_tool_search = true\n"
        # models that search the web themselves: Anthropic's server tool, an OpenAI search model
        f'[models.claude_web]\nprovider = "anthropic"\nmodel = "fake-claude"\n'
        f'base_url = "{model_server.anthropic_base_url}"\n'
        "[models.claude_web.capabilities]\nsupports_web_search = true\nweb_search_max_uses = 2\n"
        f'[models.gpt_search]\nprovider = "openai"\nmodel = "fake-search-preview"\n'
        f'base_url = "{model_server.openai_base_url}"\n'
        "[models.gpt_search.capabilities]\nsupports_web_search = true\n"
        # a tool source found at runtime, as an MCP server would be (tests write its file)
        '[tool_sources.fake]\nfactory = "tests.fakes.tool_source:create"\n'
        f'path = "{tmp / "fake-tools.json"}"\n'
    )
    # titles come from another model than the workstreams use (test_workstream_settings.py)
    config.write_text(
        config.read_text()
        + '[roles]\nreranker = "ranker"\ntitler = "vision"\n'
        # attached images described for the default model, which cannot see (test_attachments_to_model.py)
        + 'perception = "vision"\n'
        + compaction_config(model_server)
        + fallback_config(backup_model_server)
    )
    # notify's platforms: the fake chat platform (a loopback server, so private addresses are let
    # through); a fast heartbeat, so that a killed gateway is soon passed over
    config.write_text(
        config.read_text() + f'[notify]\ndiscord_api_base = "{chat_platform_server.discord_api_base}"\n'
        f'ntfy_base_url = "{chat_platform_server.ntfy_base_url}"\n'
        "allow_private_network = true\nheartbeat_seconds = 1\nstale_seconds = 5\n"
    )
    svc.env["TURNSTONE_DISCORD_BOT_TOKEN"] = BOT_TOKEN  # a secret: never in tool output
    svc.env["TURNSTONE_CONFIG"] = str(config)
    svc.env["TJ_TEST_RERANK_KEY"] = "rk-fake-rerank-key"
    svc.env["ANTHROPIC_API_KEY"] = "sk-ant-fake-key-for-tests"
    try:
        svc.start()
        yield svc
    finally:
        svc.stop()


# Models with a small context window, on both wire formats (tests/integration/test_compaction.py):
# the tool list is about 4,000 tokens, so a conversation past about 1,500 more is compacted.
SMALL_WINDOW = 7000
SMALL_RESERVE = 1500
BUDGETED_USER, BUDGETED_TOKENS = "budgeted", 1000
CLAUDE_PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


def fallback_config(backup: FakeModelServer) -> str:
    """Fallback chains (tests/integration/test_fallbacks.py): an OpenAI-format model on the backup
    server falling back to `claude` (Anthropic format, the main server); and a chain whose every
    model fails: the backup server, then nothing listening."""
    return (
        f'[models.chained]\nprovider = "openai"\nmodel = "fake-chained"\n'
        f'base_url = "{backup.openai_base_url}"\nfallbacks = ["claude"]\n'
        f'[models.doomed]\nprovider = "openai"\nmodel = "fake-doomed"\n'
        f'base_url = "{backup.openai_base_url}"\nfallbacks = ["nowhere"]\n'
        f'[models.nowhere]\nprovider = "anthropic"\nmodel = "fake-nowhere"\n'
        f'base_url = "http://127.0.0.1:{free_port()}"\n'
    )


def compaction_config(model_server: FakeModelServer) -> str:
    return (
        f'[models.small]\nprovider = "openai"\nmodel = "fake-small"\nprovider_family = "openai"\n'
        f'base_url = "{model_server.openai_base_url}"\n'
        f'[models.claude_small]\nprovider = "anthropic"\nmodel = "fake-claude-small"\n'
        f'base_url = "{model_server.anthropic_base_url}"\n'
        # no window configured: the server's /models says it (app/compaction/window.py)
        f'[models.discovered]\nprovider = "openai"\nmodel = "{WINDOWED_MODEL_ID}"\n'
        f'base_url = "{model_server.openai_base_url}"\n'
        "[compaction]\nkeep_last = 4\n"
        f"[compaction.models.small]\ncontext_window = {SMALL_WINDOW}\nreserve = {SMALL_RESERVE}\n"
        f"[compaction.models.claude_small]\ncontext_window = {SMALL_WINDOW}\nreserve = {SMALL_RESERVE}\n"
        # what a million tokens cost on the Anthropic-format model (tests/integration/test_usage.py)
        f"[prices.claude]\ninput = {CLAUDE_PRICE['input']}\noutput = {CLAUDE_PRICE['output']}\n"
        f"cache_read = {CLAUDE_PRICE['cache_read']}\ncache_write = {CLAUDE_PRICE['cache_write']}\n"
        # one user's budget (tests/integration/test_usage.py); nobody else has one
        f"[budgets.users.{BUDGETED_USER}]\ntokens_per_day = {BUDGETED_TOKENS}\n"
    )


@pytest.fixture
def model(model_server: FakeModelServer) -> Iterator[FakeModelServer]:
    model_server.reset()
    yield model_server
    model_server.reset()


@pytest.fixture
def backup_model(backup_model_server: FakeModelServer) -> Iterator[FakeModelServer]:
    backup_model_server.reset()
    yield backup_model_server
    backup_model_server.reset()


@pytest.fixture
def searxng(searxng_server: FakeSearxNG) -> Iterator[FakeSearxNG]:
    searxng_server.reset()
    yield searxng_server
    searxng_server.reset()


@pytest.fixture
def reranker(reranker_server: FakeReranker) -> Iterator[FakeReranker]:
    reranker_server.reset()
    yield reranker_server
    reranker_server.reset()
    reranker_server.fail(503)


@pytest.fixture
def fake_tools(services: Services) -> Iterator[FakeTools]:
    tools = FakeTools(services.tmp / "fake-tools.json")
    yield tools
    tools.clear()


@pytest.fixture
def task_queue(services: Services) -> TaskQueue:
    """Sends tasks as any other process would (what finishes a waiting call, say)."""
    return TaskQueue(make_celery(Settings.from_mapping({}, {"REDIS_URL": services.redis_url})))


@pytest.fixture
def api(services: Services) -> Api:
    return Api(services.base_url, API_TOKEN)


@pytest.fixture
def workdir(services: Services, tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def open_socket(services: Services) -> Iterator:  # type: ignore[type-arg]
    sockets: list[EventSocket] = []

    def _open(ws_id: str, after: int | None = None, token_in: str = "query") -> EventSocket:
        sock = EventSocket(services.base_url, API_TOKEN, ws_id, after=after, token_in=token_in)
        sockets.append(sock)
        return sock

    yield _open
    for sock in sockets:
        sock.close()


@pytest.fixture
def policy_admin(services) -> Iterator[httpx.Client]:
    """The operator's client for tool policy rules; every rule a test made is deleted after it
    (rules are service-wide)."""
    client = httpx.Client(
        base_url=services.base_url, headers={"Authorization": f"Bearer {API_TOKEN}"}, timeout=30
    )
    before = {r["id"] for r in client.get("/v1/api/policies").json()["policies"]}
    yield client
    for rule in client.get("/v1/api/policies").json()["policies"]:
        if rule["id"] not in before:
            client.delete(f"/v1/api/policies/{rule['id']}")
    client.close()


@pytest.fixture
def chat_platform(chat_platform_server: FakeChatPlatform) -> Iterator[FakeChatPlatform]:
    chat_platform_server.reset()
    yield chat_platform_server
    chat_platform_server.reset()


@pytest.fixture(autouse=True)
def _worker_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that kills the worker (or the gateway) gets a fresh one for the tests after it."""
    yield
    if "services" in request.fixturenames:
        svc: Services = request.getfixturevalue("services")
        if "worker" not in svc.processes:
            svc.start_worker()
        if "gateway" not in svc.processes:
            svc.start_gateway()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed integration test shows the tails of the service logs: CI keeps nothing else."""
    outcome = yield
    report = outcome.get_result()
    svc = getattr(item, "funcargs", {}).get("services")
    if report.failed and svc is not None:
        for log in sorted(svc.tmp.glob("*.log")):
            report.sections.append((f"service log {log.name}", log.read_text(errors="replace")[-6000:]))
