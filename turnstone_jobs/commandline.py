"""The client subcommands of `turnstone-jobs` (chat, send, workstreams): their arguments and
what they run. Exit 0 on success; 1 with one line on stderr when the service says no or
cannot be reached; 2 for arguments that cannot work."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from turnstone_jobs import config
from turnstone_jobs.client import Client
from turnstone_jobs.errors import ClientError

COMMANDS = ("chat", "send", "workstreams")
TOOL_SEARCH_MODES = ("auto", "on", "off")


def add_parsers(sub: Any) -> None:
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--url", help=f"the service (default ${config.URL_ENV}, else {config.DEFAULT_URL})")
    server.add_argument("--token", help=f"an API token (default ${config.TOKEN_ENV})")
    chat = sub.add_parser("chat", parents=[server], help="talk to a workstream in the terminal")
    chat.add_argument("ws_id", nargs="?", metavar="WS_ID", help="the workstream (default: a new one)")
    chat.add_argument("--new", metavar="NAME", help="start a new workstream with this name")
    chat.add_argument("--model", help="the new workstream's model (a name from [models])")
    chat.add_argument(
        "--skip-permissions", action="store_true", help="the new workstream runs every call without asking"
    )
    chat.add_argument(
        "--tool-search", choices=TOOL_SEARCH_MODES, help="the new workstream's tool search mode"
    )
    chat.add_argument(
        "--tool-search-threshold", type=int, metavar="N", help="tools above which auto turns it on"
    )
    chat.add_argument(
        "--tool-search-max-results", type=int, metavar="N", help="tools one search finds (1-50)"
    )
    send = sub.add_parser("send", parents=[server], help="send a message to a workstream")
    send.add_argument("ws_id", metavar="WS_ID")
    send.add_argument("message", metavar="MESSAGE")
    send.add_argument("--wait", action="store_true", help="wait for the turn to end and print its answer")
    send.add_argument("--json", action="store_true", help="print JSON")
    listing = sub.add_parser("workstreams", parents=[server], help="list your workstreams")
    listing.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    try:
        with Client(args.url, args.token) as client:
            if args.command == "send":
                return send(client, args)
            if args.command == "workstreams":
                return workstreams(client, args.json)
            return chat(client, args)
    except ClientError as exc:
        print(f"turnstone-jobs: {_one_line(exc)}", file=sys.stderr)
        return 1


def send(client: Client, args: argparse.Namespace) -> int:
    if not args.wait:
        receipt = client.send(args.ws_id, args.message)
        print(json.dumps(asdict(receipt)) if args.json else receipt.turn_id)
        return 0
    result = client.send_and_wait(args.ws_id, args.message)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(result.answer)
    if not result.ok:
        print(
            f"turnstone-jobs: turn {result.state}{': ' + result.error if result.error else ''}",
            file=sys.stderr,
        )
        return 1
    return 0


def workstreams(client: Client, as_json: bool) -> int:
    rows = client.workstreams()
    if as_json:
        print(json.dumps([w.raw for w in rows]))
    for ws in [] if as_json else rows:
        print(f"{ws.ws_id}\t{ws.state}\t{ws.name}")
    return 0


def chat(client: Client, args: argparse.Namespace) -> int:
    from rich.console import Console

    from turnstone_jobs.chat import Chat

    options = new_options(args)
    if args.ws_id and (args.new or options):
        print(
            "turnstone-jobs: --new, --model, --skip-permissions and --tool-search* make a new workstream;"
            " give them without WS_ID",
            file=sys.stderr,
        )
        return 2
    ws_id = args.ws_id or client.create_workstream(args.new or "chat", **options).ws_id
    return Chat(client, ws_id, Console(highlight=False), options).run()


def new_options(args: argparse.Namespace) -> dict[str, Any]:
    """The create-workstream fields the chat flags ask for (only those given)."""
    options: dict[str, Any] = {}
    if args.model:
        options["model"] = args.model
    if args.skip_permissions:
        options["auto_approve"] = True
    search = {
        key: value
        for key, value in (
            ("mode", args.tool_search),
            ("threshold", args.tool_search_threshold),
            ("max_results", args.tool_search_max_results),
        )
        if value is not None
    }
    if search:
        options["tool_search"] = search
    return options


def _one_line(exc: ClientError) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
