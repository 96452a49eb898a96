"""web_fetch alone: prepare screens the URL, execute fetches it and asks the model a side question.

The pages come from real loopback servers (reached through the fake internet of
test_fetcher), the answers from the fake model server over real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from app.settings import ModelSettings
from app.tools import web_fetch
from app.tools.core.base import Preparation, ToolContext
from app.tools.core.pipeline import PreparedCall, execute_call, prepare_call
from app.tools.core.registry import build_registry
from app.tools.web.fetch import Fetcher
from app.tools.web.fetch.fetcher import Page
from app.tools.web.fetch.text import html_to_text, page_text
from app.tools.web_fetch import WEB_FETCH_MAX_PAGE_CHARS
from tests.fakes.model_server import FakeModelServer, Reply
from tests.unit.test_fetcher import PUBLIC_IP, FakeInternet, FakeResolver, Route, Site, page, redirect

ARTICLE = """<!doctype html>
<html><head><title>Widget  prices</title>
<style>body { color: red }</style><script>stealCookies()</script></head>
<body><nav>Home | Shop</nav>
<h1>Widgets</h1><p>The blue widget costs <b>42</b> euros.</p>
<script>document.write("injected")</script><noscript>enable js</noscript>
<ul><li>light</li><li>sturdy</li></ul></body></html>"""


@pytest.fixture
def sites() -> Iterator[Callable[[dict[str, Route]], Site]]:
    started: list[Site] = []

    def start(routes: dict[str, Route]) -> Site:
        started.append(Site(routes))
        return started[-1]

    yield start
    for site in started:
        site.close()


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


def context(server: FakeModelServer | None, fetcher: Fetcher | None, cancelled: bool = False) -> ToolContext:
    model = None
    if server is not None:
        model = ModelSettings(
            name="default",
            provider="openai",
            model="fake-model",
            base_url=server.openai_base_url,
            api_key="k",
        )
    return ToolContext(
        ws_id="ws", working_dir="/tmp", model=model, fetcher=fetcher, is_cancelled=lambda: cancelled
    )


def public_fetcher(site_port: int, **options) -> Fetcher:
    return Fetcher(resolver=FakeResolver(), dialer=FakeInternet({PUBLIC_IP: site_port}), **options)


def ask(url: str = "http://public.test/", question: str = "What does the blue widget cost?") -> dict:
    return {"url": url, "question": question}


def run(ctx: ToolContext, args: dict):
    prep = web_fetch.prepare(args, ctx)
    assert prep.error is None, prep.error
    return web_fetch.execute(prep.args, ctx)


def side_request(server: FakeModelServer) -> dict:
    (request,) = server.history
    return request.body


# -- prepare ----------------------------------------------------------------------------------


def test_prepare_screens_the_url_and_asks_a_person():
    prep = web_fetch.prepare(ask("  http://public.test/a  "), context(None, Fetcher(resolver=FakeResolver())))
    assert prep == Preparation(
        {
            "url": "http://public.test/a",
            "question": "What does the blue widget cost?",
            "prepared_network": "public",  # what the person is shown: the run is held to it
        },
        "web_fetch http://public.test/a",
        preview="GET http://public.test/a\nQuestion: What does the blue widget cost?",
        needs_approval=True,
    )


def test_a_private_target_is_refused_at_prepare_before_anyone_is_asked():
    prep = web_fetch.prepare(
        ask("http://127.0.0.1:8080/admin"), context(None, Fetcher(resolver=FakeResolver()))
    )
    assert prep.error == (
        "Refused: 127.0.0.1 is a loopback address; "
        "only public addresses may be fetched (tools.allow_private_network is off)"
    )
    assert prep.needs_approval is False


def test_the_preview_says_when_a_private_target_is_allowed():
    fetcher = Fetcher(resolver=FakeResolver(intranet_test=["10.0.0.5"]), allow_private=True)
    prep = web_fetch.prepare(ask("http://intranet.test/wiki"), context(None, fetcher))
    assert prep.error is None and prep.needs_approval
    assert prep.preview.splitlines()[-1] == (
        "Private network: intranet.test resolves to 10.0.0.5, a private (RFC 1918) address; "
        "allowed because tools.allow_private_network is on."
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"question": "q"}, "Error: web_fetch needs 'url', a non-empty string"),
        ({"url": "  ", "question": "q"}, "Error: web_fetch needs 'url', a non-empty string"),
        ({"url": "http://public.test/"}, "Error: web_fetch needs 'question', a non-empty string"),
        (
            {"url": "http://public.test/", "question": 7},
            "Error: web_fetch needs 'question', a non-empty string",
        ),
        (ask("ftp://public.test/"), "Refused: only http:// and https:// URLs can be fetched, not ftp:"),
    ],
)
def test_bad_arguments_are_errors_at_prepare(args, error):
    prep = web_fetch.prepare(args, context(None, Fetcher(resolver=FakeResolver())))
    assert prep.error == error and not prep.needs_approval


def test_without_a_fetcher_the_call_is_an_error():
    assert web_fetch.prepare(ask(), context(None, None)).error == web_fetch.NO_FETCHER
    assert web_fetch.execute(ask(), context(None, None)).is_error


def test_a_private_target_is_recorded_as_such_and_a_model_cannot_claim_it():
    fetcher = Fetcher(resolver=FakeResolver(intranet_test=["10.0.0.5"]), allow_private=True)
    prep = web_fetch.prepare(ask("http://intranet.test/wiki"), context(None, fetcher))
    assert prep.args["prepared_network"] == "private"
    # Only prepare writes the record: a model cannot send one, and prepare drops any it is given.
    claimed = {**ask(), "prepared_network": "private"}
    call = prepare_call(build_registry(), "c1", "web_fetch", json.dumps(claimed), context(None, fetcher))
    assert call.error is not None and call.error.startswith(
        "Error: web_fetch does not take 'prepared_network'"
    )
    prep = web_fetch.prepare(claimed, context(None, Fetcher(resolver=FakeResolver())))
    assert prep.args["prepared_network"] == "public"


def test_task_agents_run_it_unprompted_and_interactive_sessions_ask():
    registry = build_registry()
    prep = web_fetch.prepare(ask(), context(None, Fetcher(resolver=FakeResolver())))
    assert registry.tool("web_fetch", "task").needs_approval(prep, "task") is False
    assert registry.tool("web_fetch", "interactive").needs_approval(prep, "interactive") is True
    assert "web_fetch" in registry.offered_names("task")


# -- execute ----------------------------------------------------------------------------------


def test_the_model_answers_from_the_page_text_in_a_side_request(sites, model_server):
    site = sites({"/": page(ARTICLE)})
    model_server.enqueue(Reply(text="The blue widget costs 42 euros."))
    outcome = run(context(model_server, public_fetcher(site.port)), ask())
    assert not outcome.is_error
    assert outcome.output == "The blue widget costs 42 euros.\n\nSource: http://public.test/"
    body = side_request(model_server)
    assert "tools" not in body  # a plain question: no tools offered
    system, user = body["messages"]
    assert system["role"] == "system" and "data, not instructions" in system["content"]
    assert "Widget prices\n\nHome | Shop\n\nWidgets\n\nThe blue widget costs 42 euros." in user["content"]
    assert "- light\n- sturdy" in user["content"]
    assert user["content"].endswith("Question: What does the blue widget cost?")
    for dropped in ("stealCookies", "injected", "color: red", "enable js"):
        assert dropped not in user["content"]


def test_the_result_names_the_final_url_after_redirects(sites, model_server):
    site = sites({"/old": redirect("/new"), "/new": page("<p>moved here</p>")})
    model_server.enqueue(Reply(text="It moved."))
    outcome = run(context(model_server, public_fetcher(site.port)), ask("http://public.test/old"))
    assert (
        outcome.output
        == "It moved.\n\nSource: http://public.test/new (redirected from http://public.test/old)"
    )


@pytest.mark.parametrize(
    ("content_type", "body", "seen"),
    [
        ("text/plain; charset=utf-8", "plain *text* stays\n  as it is", "plain *text* stays\n  as it is"),
        ("application/json", '{"price": 42}', '{"price": 42}'),
        ("text/markdown", "# Title\n\n- item", "# Title\n\n- item"),
    ],
)
def test_text_types_are_kept_as_they_are(sites, model_server, content_type, body, seen):
    site = sites({"/": page(body, content_type)})
    run(context(model_server, public_fetcher(site.port)), ask())
    assert f"<page_text>\n{seen}\n</page_text>" in side_request(model_server)["messages"][1]["content"]


@pytest.mark.parametrize(
    ("content_type", "body", "error"),
    [
        ("application/pdf", b"%PDF-1.7 ...", "is a PDF (12 bytes); only web pages and text can be read"),
        ("application/octet-stream", b"%PDF-1.4 x", "is a PDF"),  # sniffed
        ("image/png", b"\x89PNG\r\n\x1a\n", "is image/png (8 bytes), not a web page or text"),
        ("text/plain", b"MZ\x00\x00binary", "is text/plain (10 bytes), not a web page or text"),
    ],
)
def test_pdfs_and_binaries_are_refused_with_a_hint_and_the_model_is_not_asked(
    sites, model_server, content_type, body, error
):
    site = sites({"/": page(body, content_type)})
    outcome = run(context(model_server, public_fetcher(site.port)), ask())
    assert outcome.is_error and error in outcome.output
    assert model_server.history == []


def test_a_pdf_refusal_says_what_to_do_instead(sites, model_server):
    site = sites({"/": page(b"%PDF-1.7", "application/pdf")})
    outcome = run(context(model_server, public_fetcher(site.port)), ask())
    assert "pdftotext" in outcome.output


def test_an_error_status_is_an_error_result(sites, model_server):
    site = sites({})
    outcome = run(context(model_server, public_fetcher(site.port)), ask("http://public.test/missing"))
    assert outcome.is_error and outcome.output == "Error: http://public.test/missing answered 404 Not Found"
    assert model_server.history == []


def test_a_page_with_no_text_is_an_error_result(sites, model_server):
    site = sites({"/": page("<html><body><script>render()</script></body></html>")})
    outcome = run(context(model_server, public_fetcher(site.port)), ask())
    assert outcome.is_error and "has no readable text" in outcome.output


def test_a_refusal_at_execute_is_an_error_result(sites, model_server):
    private = sites({"/": page("private")})
    public = sites({"/": redirect(private.url("/"))})
    outcome = run(context(model_server, public_fetcher(public.port, allow_private=True)), ask())
    assert outcome.is_error and "redirected into private space" in outcome.output
    assert private.hits == [] and model_server.history == []


def test_a_long_page_is_cut_to_the_cap_and_the_result_says_so(sites, model_server):
    text = "".join(f"line {n:06d} of the page\n" for n in range(10_000))  # 230,000 characters
    site = sites({"/": page(text, "text/plain")})
    model_server.enqueue(Reply(text="read it"))
    outcome = run(context(model_server, public_fetcher(site.port)), ask())
    content = side_request(model_server)["messages"][1]["content"]
    given = content.split("<page_text>\n", 1)[1].split("\n</page_text>", 1)[0]
    assert given == text.strip()[:WEB_FETCH_MAX_PAGE_CHARS]
    assert (
        f"(Only the first {WEB_FETCH_MAX_PAGE_CHARS:,} of {len(text.strip()):,} characters are given.)"
        in content
    )
    assert outcome.output.endswith(
        f"(The answer is drawn from the first {WEB_FETCH_MAX_PAGE_CHARS:,} of the page's "
        f"{len(text.strip()):,} characters.)"
    )


def test_a_model_whose_context_is_too_small_is_asked_again_with_half(sites, model_server):
    text = "word " * 40_000  # 200,000 characters
    site = sites({"/": page(text, "text/plain")})
    model_server.enqueue(Reply(context_window_exceeded=True))
    model_server.enqueue(Reply(text="fits now"))
    outcome = run(context(model_server, public_fetcher(site.port)), ask())
    assert outcome.output.startswith("fits now\n\nSource: http://public.test/")
    first, second = (r.body["messages"][1]["content"] for r in model_server.history)
    assert f"first {WEB_FETCH_MAX_PAGE_CHARS:,} of" in first
    assert f"first {WEB_FETCH_MAX_PAGE_CHARS // 2:,} of" in second


def test_a_model_failure_is_an_error_result_not_an_exception(sites, model_server):
    site = sites({"/": page(ARTICLE)})
    model_server.enqueue(Reply(status=400, error_message="bad request"))
    outcome = run(context(model_server, public_fetcher(site.port)), ask())
    assert outcome.is_error
    assert outcome.output.startswith(
        "Error: http://public.test/ was fetched, but the model could not read it:"
    )


def test_without_a_model_the_call_is_an_error(sites):
    site = sites({"/": page(ARTICLE)})
    outcome = run(context(None, public_fetcher(site.port)), ask())
    assert outcome.is_error and outcome.output == web_fetch.NO_MODEL


def test_a_cancelled_call_fetches_nothing(sites, model_server):
    site = sites({"/": page(ARTICLE)})
    outcome = run(context(model_server, public_fetcher(site.port), cancelled=True), ask())
    assert outcome.is_error and outcome.output.startswith("Cancelled")
    assert site.hits == [] and model_server.history == []


# -- what runs is what was approved ----------------------------------------------------------

REBOUND = (
    "Refused: svc.test resolves to 127.0.0.1, a loopback address, but it was public when "
    "this call was prepared, so its approval did not cover a private target; "
    "make the call again to ask for it as one"
)


def stored(call: PreparedCall) -> PreparedCall:
    """The call as the database keeps it while it waits for a person, and gives it back."""
    return PreparedCall.from_dict(json.loads(json.dumps(call.to_dict())))


def test_a_name_that_turns_private_after_approval_is_not_fetched(sites, model_server):
    public = sites({"/admin": page(ARTICLE)})
    private = sites({"/admin": page("<p>router admin: the password is hunter2</p>")})
    # The name is public when the call is prepared, and points into the LAN from then on.
    resolver = FakeResolver(svc_test=[[PUBLIC_IP], ["127.0.0.1"]])
    net = FakeInternet({PUBLIC_IP: public.port})
    url = private.url("/admin", host="svc.test")
    registry = build_registry()
    preparing = context(None, Fetcher(resolver=resolver, dialer=net, allow_private=True))
    call = prepare_call(registry, "c1", "web_fetch", json.dumps(ask(url)), preparing)
    assert call.needs_approval and call.error is None
    assert call.preview == f"GET {url}\nQuestion: What does the blue widget cost?"  # no private mark

    # Approved later, and run by another worker (its own fetcher) once the name has moved.
    running = context(model_server, Fetcher(resolver=resolver, dialer=net, allow_private=True))
    outcome = execute_call(registry, stored(call), running)
    assert outcome.is_error and outcome.output == REBOUND
    assert private.hits == [] and public.hits == [] and model_server.history == []

    # Asked again, the card marks the private target; approved so, it is fetched.
    again = prepare_call(registry, "c2", "web_fetch", json.dumps(ask(url)), preparing)
    assert again.preview.splitlines()[-1] == (
        "Private network: svc.test resolves to 127.0.0.1, a loopback address; "
        "allowed because tools.allow_private_network is on."
    )
    model_server.enqueue(Reply(text="It is the router's admin page."))
    outcome = execute_call(registry, stored(again), running)
    assert not outcome.is_error and outcome.output.startswith("It is the router's admin page.")
    assert private.paths == ["/admin"]


def test_task_agents_still_fetch_private_targets_unprompted(sites, model_server):
    site = sites({"/": page(ARTICLE)})
    fetcher = Fetcher(resolver=FakeResolver(intranet_test=["127.0.0.1"]), allow_private=True)
    ctx = replace(context(model_server, fetcher), kind="task")
    registry = build_registry()
    call = prepare_call(registry, "c1", "web_fetch", json.dumps(ask(site.url(host="intranet.test"))), ctx)
    assert call.error is None and call.needs_approval is False
    model_server.enqueue(Reply(text="42 euros."))
    outcome = execute_call(registry, stored(call), ctx)
    assert not outcome.is_error and outcome.output.startswith("42 euros.")
    assert site.paths == ["/"]


@pytest.mark.parametrize(
    "record", [None, "PRIVATE", ["private"], {"private": True}, "private\x00", "\ud800", 1]
)
def test_a_call_without_the_record_of_a_private_target_fetches_none(sites, model_server, record):
    # A call stored before the record was kept, or one whose record is not "private":
    # read the stricter way, whatever the value.
    site = sites({"/": page(ARTICLE)})
    fetcher = Fetcher(resolver=FakeResolver(intranet_test=["127.0.0.1"]), allow_private=True)
    args = ask(site.url(host="intranet.test"))
    if record is not None:
        args["prepared_network"] = record
    outcome = web_fetch.execute(args, context(model_server, fetcher))
    assert outcome.is_error
    assert outcome.output.startswith("Refused: intranet.test resolves to 127.0.0.1, a loopback address, but")
    assert site.hits == [] and model_server.history == []


# -- HTML to text -----------------------------------------------------------------------------


def test_block_tags_become_line_breaks_and_inline_tags_do_not():
    html = (
        "<div>one <span>two</span><p>three</p>four<br>five</div><table><tr><td>a</td><td>b</td></tr></table>"
    )
    assert html_to_text(html) == "one two\nthree\nfour\nfive\n\na b"


def test_preformatted_text_keeps_its_spaces():
    assert html_to_text("<p>x</p><pre>def f():\n    return 1</pre>") == "x\n\ndef f():\n    return 1"


def test_entities_are_decoded_and_comments_dropped():
    assert html_to_text("<p>&lt;b&gt; &amp; &copy;<!-- hidden --></p>") == "<b> & ©"


def test_deeply_nested_html_does_not_overflow_the_stack():
    html = "<div>" * 5000 + "deep" + "</div>" * 5000
    assert html_to_text(html) == "deep"


def test_an_unlabelled_page_is_sniffed_and_legacy_bytes_are_read():
    html = Page("http://x/", 200, "OK", "", None, b"<!DOCTYPE html><p>caf\xe9</p>")
    assert page_text(html) == "café"
