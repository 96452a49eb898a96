"""The client subcommands of `turnstone-jobs` (chat, send, workstreams, run-job): their arguments and
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

COMMANDS = ("chat", "send", "workstreams", "usage", "run-job", "schedules", "webhooks")
USAGE_GROUPS = ("day", "model", "user")
USAGE_COLUMNS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache read", "cache_read_input_tokens"),
    ("cache write", "cache_creation_input_tokens"),
    ("steps", "steps"),
)
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
        "--coordinator",
        action="store_true",
        help="the new workstream is a coordinator (runs child workstreams)",
    )
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
    _add_run_job(sub, server)
    for name, what in (("schedules", "your schedules"), ("webhooks", "your webhook endpoints")):
        listed = sub.add_parser(name, parents=[server], help=f"list {what} (docs/{name}.md)")
        listed.add_argument("--json", action="store_true", help="print JSON")


def _add_run_job(sub: Any, server: argparse.ArgumentParser) -> None:
    job = sub.add_parser("run-job", parents=[server], help="start a run (docs/runs.md)")
    job.add_argument("prompt", metavar="PROMPT")
    job.add_argument("--workstream", metavar="WS_ID", help="run in this workstream (default: a new one)")
    job.add_argument("--model", help="the new workstream's model (a name from [models])")
    job.add_argument("--allow", action="append", metavar="TOOL", help="a tool that runs without asking")
    job.add_argument("--auto-approve", action="store_true", help="every call runs without asking")
    job.add_argument(
        "--deny-unapproved", action="store_true", help="a call that needs a person fails the run"
    )
    job.add_argument("--timeout", type=int, metavar="SECONDS", help="end the run after this long")
    job.add_argument("--metadata", metavar="JSON", help="a JSON object kept with the run")
    job.add_argument(
        "--webhook", metavar="ENDPOINT_ID", help="one of your webhook endpoints: all the run's events"
    )
    job.add_argument("--wait", action="store_true", help="wait until it ends (or needs a person)")
    job.add_argument("--json", action="store_true", help="print the run as JSON")
    usage = sub.add_parser("usage", parents=[server], help="tokens and cost by day, model or user")
    usage.add_argument("--group-by", choices=USAGE_GROUPS, default="day")
    usage.add_argument("--user", help="one user's (admins; a user sees only their own)")
    usage.add_argument("--workstream", metavar="WS_ID", help="one workstream's")
    usage.add_argument("--from", dest="since", metavar="DATE", help="from this day (YYYY-MM-DD) or time")
    usage.add_argument("--to", dest="until", metavar="DATE", help="to this day (included) or time")
    usage.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    try:
        with Client(args.url, args.token) as client:
            if args.command == "send":
                return send(client, args)
            if args.command == "workstreams":
                return workstreams(client, args.json)
            if args.command == "run-job":
                return run_job(client, args)
            if args.command in ("schedules", "webhooks"):
                return listing(client, args.command, args.json)
            if args.command == "usage":
                return usage_table(client, args)
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


def run_job(client: Client, args: argparse.Namespace) -> int:
    """Exit 0 when the run succeeded (or, without --wait, started); 1 when it ended otherwise
    or waits for a person; 2 for --metadata that is not a JSON object."""
    try:
        metadata = json.loads(args.metadata) if args.metadata else None
    except ValueError:
        metadata = None
    if args.metadata and not isinstance(metadata, dict):
        print("turnstone-jobs: --metadata must be a JSON object", file=sys.stderr)
        return 2
    policy = {
        key: value
        for key, value in (
            ("tools", args.allow),
            ("auto_approve", args.auto_approve),
            ("deny_unapproved", args.deny_unapproved),
        )
        if value
    }
    run = client.runs.create(
        args.prompt,
        workstream=args.workstream,
        model=args.model,
        policy=policy or None,
        timeout_s=args.timeout,
        metadata=metadata,
        webhook=args.webhook,
    )
    if args.wait:
        run = run.wait()
    print(json.dumps(run.raw) if args.json else (run.answer if run.ok else f"{run.run_id}\t{run.status}"))
    if args.wait and not run.ok:
        print(f"turnstone-jobs: run {run.status}{': ' + run.error if run.error else ''}", file=sys.stderr)
        return 1
    return 0


def listing(client: Client, what: str, as_json: bool) -> int:
    """`schedules`: id, next fire time (or paused), cron or every, prompt; `webhooks`: id, URL,
    events. One a line, tab-separated."""
    rows = client.listing(what)
    if as_json:
        print(json.dumps(rows))
        return 0
    for row in rows:
        if what == "schedules":
            when = "paused" if row["paused"] else (row["next_fire_times"] or ["-"])[0]
            timing = row["cron"] or f"every {row['every']} s"
            print(f"{row['schedule_id']}\t{when}\t{timing}\t{row['prompt'][:60]}")
        else:
            print(f"{row['endpoint_id']}\t{row['url']}\t{','.join(row['events'])}")
    return 0


def workstreams(client: Client, as_json: bool) -> int:
    rows = client.workstreams()
    if as_json:
        print(json.dumps([w.raw for w in rows]))
    for ws in [] if as_json else rows:
        print(f"{ws.ws_id}\t{ws.state}\t{ws.name}")
    return 0


def usage_table(client: Client, args: argparse.Namespace) -> int:
    """The table `GET /v1/api/usage` answers: a row per group, then the total."""
    found = client.usage(
        group_by=args.group_by, user=args.user, workstream=args.workstream, from_=args.since, to=args.until
    )
    if args.json:
        print(json.dumps(found))
        return 0
    head = [args.group_by, *(name for name, _key in USAGE_COLUMNS), "cost ($)"]
    lines = [[str(row[args.group_by]), *_usage_cells(row)] for row in found["rows"]]
    lines.append(["total", *_usage_cells(found["total"])])
    widths = [max(len(line[n]) for line in [head, *lines]) for n in range(len(head))]
    for line in [head, *lines]:
        cells = [
            cell.rjust(w) if n else cell.ljust(w)
            for n, (cell, w) in enumerate(zip(line, widths, strict=True))
        ]
        print("  ".join(cells))
    return 0


def _usage_cells(row: dict[str, Any]) -> list[str]:
    cost = f"{row['cost']:.4f}" + ("*" if row.get("unpriced_steps") else "")  # *: some steps had no price
    return [f"{row[key]:,}" for _name, key in USAGE_COLUMNS] + [cost]


def chat(client: Client, args: argparse.Namespace) -> int:
    from rich.console import Console

    from turnstone_jobs.chat import Chat

    options = new_options(args)
    if args.ws_id and (args.new or options):
        print(
            "turnstone-jobs: --new, --model, --coordinator, --skip-permissions and --tool-search* make a new"
            " workstream;"
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
    if args.coordinator:
        options["kind"] = "coordinator"
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
