"""Which server a read_resource URI goes to: RFC 6570 resource templates, every operator, and
templates a hostile server could send."""

from __future__ import annotations

from typing import Any

import pytest

from app.mcp.catalog import MCPToolSource, build_offer
from app.mcp.config import parse_server
from app.mcp.manager import MCPManager, ServerView
from app.mcp.states import Listing
from app.mcp.uri_templates import MAX_TEMPLATE_CHARS, matches
from app.tools.core.base import ToolContext
from app.tools.core.registry import build_registry

MANAGER = MCPManager({})


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        ("db://tables/{table}/rows/{id}", "db://tables/users/rows/7", True),
        ("db://tables/{table}/rows/{id}", "db://tables/users/rows/7/x", False),
        ("db://tables/{table}", "db://tables/", False),
        ("repo://{owner}/{repo}/contents{/path*}", "repo://o/r/contents/src/app/main.py", True),
        ("repo://{owner}/{repo}/contents{/path*}", "repo://o/r/contents", True),
        ("repo://{owner}/{repo}/contents{/path*}", "repo://o/r/contentsX", False),
        ("repo://{owner}/{repo}/contents{/path*}", "repo://o/contents/x", False),
        ("file:///{+path}", "file:///etc/hosts", True),
        ("file:///{+path}", "file:///", False),
        ("doc://guide{#section}", "doc://guide#install/linux", True),
        ("doc://guide{#section}", "doc://guideinstall", False),
        ("file://report{.ext}", "file://report.tar.gz", True),
        ("file://report{.ext}", "file://report.d/x", False),
        ("map://point{;x,y}", "map://point;x=1;y=2", True),
        ("search://items{?q,limit}", "search://items?q=mcp&limit=3", True),
        ("search://items{?q,limit}", "search://items", True),
        ("search://items{?q}{&page}", "search://items?q=mcp&page=2", True),
        ("search://items{?q}", "search://itemsq=mcp", False),
        ("log://{day}{?level}{#line}", "log://monday?level=warn#L10", True),
        ("x://{a}{b}", "x://ab", True),
        ("x://{a}{b}", "x://a", False),
        ("x://{code:3}/{list*}", "x://abcdef/1,2", True),  # a prefix's length is not checked
    ],
)
def test_a_template_matches_the_uris_its_operators_can_expand_to(
    template: str, uri: str, expected: bool
) -> None:
    assert matches(template, uri) is expected


@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("a.*{x}", "abbb"),  # regular expression characters are only characters
        ("(x|y){x}", "xz"),
        ("{a{b}}", "ab"),  # nested, unclosed or stray braces: no template
        ("x://{a", "x://{a"),
        ("x://}{a}", "x://}b"),
        ("x://{}", "x://"),
        ("x://{+}", "x://a"),
        ("x://{a,}", "x://a"),
        ("x://{=a}", "x://a"),  # an operator RFC 6570 reserves
        ("x://{|a}", "x://a"),
        ("plain://uri", "plain://uri"),  # no expression: only the exact URI, compared elsewhere
        ("x://" + "a" * MAX_TEMPLATE_CHARS + "{a}", "x://" + "a" * MAX_TEMPLATE_CHARS + "b"),
    ],
)
def test_a_hostile_or_malformed_template_matches_nothing(template: str, uri: str) -> None:
    assert matches(template, uri) is False


def test_templates_that_would_make_a_regular_expression_backtrack_answer_at_once() -> None:
    # As regular expressions these take longer than the age of the universe; here, milliseconds.
    assert matches("{+a}/" * 399, "/" * 8191 + "x") is False
    assert matches("{a}" * 600, "a" * 8192) is True
    assert matches("{a}x" * 600, "x" * 8000 + "y") is False
    assert matches("\x00{a}\ud800", "\x00b\ud800") is True  # odd characters are characters


def test_read_resource_reaches_the_server_whose_template_matches() -> None:
    registry = build_registry()
    templates = tuple(
        {"uri": uri, "name": "t", "description": "", "mimeType": None, "server": server}
        for server, uri in (
            ("github", "repo://{owner}/{repo}/contents{/path*}"),
            ("files", "file:///{+path}"),
        )
    )
    views = [
        ServerView(
            parse_server(name, {"command": "x"}, "config"), "connected", None, Listing(templates=found)
        )
        for name, found in (("github", templates[:1]), ("files", templates[1:]))
    ]

    class Source(MCPToolSource):
        def offer(self) -> Any:
            return build_offer(views, MANAGER, self._catalog_tools)

    source = Source(MANAGER, {"read_resource": registry.definition("read_resource")})
    read = {t.name: t for t in source.catalog().tools}["read_resource"]
    ctx = ToolContext(ws_id="ws", working_dir="/tmp")
    prep = read.handler.prepare({"uri": "repo://octo/hello/contents/docs/README.md"}, ctx)
    assert prep.error is None and prep.header == "MCP github: read repo://octo/hello/contents/docs/README.md"
    assert (
        read.handler.prepare({"uri": "file:///etc/hosts"}, ctx).header == "MCP files: read file:///etc/hosts"
    )
    refused = read.handler.prepare({"uri": "repo://octo/contents"}, ctx)
    assert (
        refused.error is not None and "no connected MCP server offers 'repo://octo/contents'" in refused.error
    )
