"""The `turnstone-jobs` command: run the whole service locally, migrate; users, tokens and
decisions (app/users/admin.py); tool policy rules (app/policies/commands.py); calibrate the
reranker; chat, send, workstreams (turnstone_jobs)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from app.settings import Settings

# HTTP input: the web tier's limits.
DEFAULT_RUN_HOST = "127.0.0.1"  # `turnstone-jobs run` binds this machine only unless told

PROCFILE = Path(__file__).resolve().parent.parent / "Procfile"
# A local run serves this machine only; `--host 0.0.0.0` (or an address) opens it up.


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="turnstone-jobs")
    sub = parser.add_subparsers(dest="command", required=True)
    run_cmd = sub.add_parser(
        "run", help="run web, worker, beat, gateway (and a private Redis if none answers)"
    )
    run_cmd.add_argument(
        "--host",
        default=DEFAULT_RUN_HOST,
        help=f"address the web process binds (default {DEFAULT_RUN_HOST}: this machine only)",
    )
    run_cmd.add_argument(
        "--mcp-config",
        metavar="PATH",
        help='a JSON file of MCP servers ({"mcpServers": {...}}); sets TURNSTONE_MCP_CONFIG',
    )
    sub.add_parser("migrate", help="apply the database migrations")
    from app.users import admin

    admin.add_parsers(sub)
    from app.policies import commands as policy_commands

    policy_commands.add_parsers(sub)
    calibrate = sub.add_parser(
        "rerank-calibrate", help="probe the reranker and suggest tools.rerank_bm25_threshold"
    )
    calibrate.add_argument(
        "--apply", action="store_true", help="write the suggested threshold into the config file"
    )
    skills = sub.add_parser("skills", help="manage skills")
    skills_sub = skills.add_subparsers(dest="skills_command", required=True)
    importer = skills_sub.add_parser("import", help="import SKILL.md folders (DIR, or the folders in it)")
    importer.add_argument("folder", metavar="DIR")
    from turnstone_jobs import commandline

    commandline.add_parsers(sub)  # chat, send, workstreams: clients of a running service
    args = parser.parse_args(argv)
    if args.command in commandline.COMMANDS:
        return commandline.run(args)
    if args.command == "rerank-calibrate":
        return rerank_calibrate(args.apply)
    if args.command == "skills":
        return import_skills(Path(args.folder))
    if args.command == "migrate":
        return migrate()
    if args.command in ("user", "token", "approve", "policy"):
        return administer(args)
    return run(args.host, args.mcp_config)


def migrate() -> int:
    from app.storage.migrate import upgrade

    upgrade(Settings.load().database_url)
    return 0


def administer(args: argparse.Namespace) -> int:
    from app.policies import commands as policy_commands
    from app.users import admin
    from app.users.store import DatabaseStore

    settings = Settings.load()
    refused = _check_database(settings)
    if refused:
        return refused
    if args.command == "approve":
        found = _service_redis(settings)
        if found is None:
            return 1
        settings = dataclasses.replace(settings, redis_url=found)
    migrate()
    store = DatabaseStore.create(settings)
    try:
        return policy_commands.run(store, args) if args.command == "policy" else admin.run(store, args)
    finally:
        store.close()


def _check_database(settings: Settings) -> int:
    """0 when this command may go on with its database; else, having said why, its exit status.
    A SQLite file that is not there is a new, empty database: made silently, its users and
    tokens would be unknown to a service running on another one (started in another folder)."""
    from app import runs
    from app.settings import run_records_folder

    mine = runs.database_label(settings.database_url)
    running = runs.live(run_records_folder())
    if any(r.database == mine for r in running):
        return 0
    file = runs.sqlite_file(settings.database_url)
    if file is not None and not file.exists():
        if running:
            other = running[0]
            print(
                f"turnstone-jobs: no database at {file}; {other.describe()} uses {other.database}: "
                f"run this command in {other.folder}, or set DATABASE_URL to that database",
                file=sys.stderr,
            )
            return 2
        print(
            f"turnstone-jobs: no database at {file}: creating a new one "
            f"(a service started in {file.parent} uses it; elsewhere, set DATABASE_URL)",
            file=sys.stderr,
        )
    elif running:
        other = running[0]
        print(
            f"turnstone-jobs: note: this command uses {mine}, while {other.describe()} uses {other.database}",
            file=sys.stderr,
        )
    return 0


def _service_redis(settings: Settings) -> str | None:
    """The Redis a decision must go through: REDIS_URL's when it answers, else the private one
    of the run serving this database (from the run's record); None, having said so, when none."""
    from app import runs
    from app.localredis import is_reachable
    from app.settings import run_records_folder

    if is_reachable(settings.redis_url):
        return settings.redis_url
    mine = runs.database_label(settings.database_url)
    for record in runs.live(run_records_folder()):
        if record.database == mine and record.redis_url and is_reachable(record.redis_url):
            return record.redis_url
    print(
        f"turnstone-jobs: no Redis answers at {runs.shown_url(settings.redis_url)}, and no running "
        f"`turnstone-jobs run` on {mine} has one of its own: start the service, or set REDIS_URL",
        file=sys.stderr,
    )
    return None


def rerank_calibrate(apply: bool) -> int:
    """0: the reranker separates the probes (and, with --apply, the floor is written);
    1: it failed or does not separate them; 2: no reranker is configured."""
    from app.reranking.calibration import calibrate, write_threshold
    from app.reranking.client import Reranker, RerankError
    from app.settings import SettingsError, config_path

    try:
        settings = Settings.load()
    except SettingsError as exc:
        print(f"turnstone-jobs: {exc}", file=sys.stderr)
        return 2
    if settings.tools.reranker is None:
        print('turnstone-jobs: no reranker: set [roles] reranker = "MODEL"', file=sys.stderr)
        return 2
    reranker = Reranker.from_settings(settings.tools.reranker)
    print(f"reranker: {reranker.model} at {reranker.url}")
    try:
        result = calibrate(reranker)
    except RerankError as exc:
        print(f"turnstone-jobs: {exc}", file=sys.stderr)
        return 1
    print("\n".join(result.report()))
    if result.floor is None:
        return 1 if apply or not result.separates else 0
    if apply:
        path = config_path()
        write_threshold(path, result.floor)
        print(f"wrote [tools] rerank_bm25_threshold = {result.floor} to {path}")
    return 0


def import_skills(folder: Path) -> int:
    """Import every SKILL.md under `folder`; exit 1 when any was skipped (or none found)."""
    from app.skills.importer import import_folder
    from app.storage.database import Database

    if not folder.is_dir():
        print(f"turnstone-jobs: {folder} is not a directory", file=sys.stderr)
        return 2
    refused = _check_database(Settings.load())
    if refused:
        return refused
    migrate()
    db = Database(Settings.load().database_url)
    try:
        outcomes = import_folder(db, folder)
    finally:
        db.dispose()
    for o in outcomes:
        print(
            f"{o.path}: {o.name + ' ' if o.name else ''}{o.result}", file=sys.stdout if o.ok else sys.stderr
        )
    if not outcomes:
        print(f"turnstone-jobs: no SKILL.md in {folder} or its folders", file=sys.stderr)
    return 0 if outcomes and all(o.ok for o in outcomes) else 1


def run(host: str = DEFAULT_RUN_HOST, mcp_config: str | None = None) -> int:
    """Every Procfile line under one supervisor (app/supervisor.py), with the web process bound
    to `host` (and `mcp_config` as every process's MCP server file). Set up here, then this
    process becomes the supervisor: it keeps nothing of what the set-up loaded."""
    from honcho.environ import parse_procfile

    from app import runs
    from app.localredis import PrivateRedis, is_reachable
    from app.metrics import folder as metrics_folder
    from app.settings import GATEWAY_PORT_ENV, MCP_CONFIG_ENV, SettingsError, run_records_folder

    env = dict(os.environ)
    if mcp_config:
        env[MCP_CONFIG_ENV] = str(Path(mcp_config).resolve())
    try:
        settings = Settings.load(env)  # a bad file stops the run here, saying which and why
    except SettingsError as exc:
        print(f"turnstone-jobs: {exc}", file=sys.stderr)
        return 2
    private = None
    try:
        if not is_reachable(settings.redis_url):
            private = PrivateRedis(dies_with_parent=True)
            env["REDIS_URL"] = private.start()
            print(
                f"turnstone-jobs: no Redis at {runs.shown_url(settings.redis_url)}; "
                f"started a private one at {env['REDIS_URL']}",
                flush=True,
            )
        env.setdefault("PORT", str(settings.port))
        # One machine, one person or a few: one web process (its socket loop and 64 request
        # threads) is plenty, and each more costs about 75 MiB at idle.
        env.setdefault("WEB_CONCURRENCY", "1")
        env["WEB_HOST"] = f"[{host}]" if ":" in host else host  # an IPv6 address needs brackets
        # The gateway is found through the services table, not a known port: on a local run it
        # takes a free one on loopback (other processes of this machine are its only callers).
        env.setdefault("GATEWAY_HOST", "127.0.0.1")
        if GATEWAY_PORT_ENV not in env:
            env[GATEWAY_PORT_ENV] = str(_free_port(env["GATEWAY_HOST"]))
        # Beat's schedule only spaces out periodic runs: it need not outlive the run, nor
        # litter the folder it was started in.
        scratch = tempfile.mkdtemp(prefix="turnstone-run-")
        env.setdefault("BEAT_SCHEDULE", str(Path(scratch) / "beat-schedule"))
        # Where every process writes its metrics for /metrics to sum: empty at each start.
        env.setdefault(metrics_folder.MULTIPROC_DIR_ENV, str(Path(scratch) / "metrics"))
        metrics_folder.make_fresh(Path(env[metrics_folder.MULTIPROC_DIR_ENV]))
        web_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        record = runs.RunRecord(
            pid=os.getpid(),  # exec keeps it: the supervisor's
            started_at=time.time(),
            folder=os.getcwd(),
            database=runs.database_label(settings.database_url),
            redis_url=env["REDIS_URL"] if private else None,
            web_url=f"http://{f'[{web_host}]' if ':' in web_host else web_host}:{env['PORT']}",
        )
        spec = {
            "processes": embedded(parse_procfile(PROCFILE.read_text()).processes),
            "cwd": os.getcwd(),
            "redis": {"pid": private.process.pid, "folder": private.folder}
            if private and private.process
            else None,
            "scratch": scratch,
            "record": str(runs.write(run_records_folder(env), record)),
        }
        sys.stdout.flush()
    except KeyboardInterrupt:  # a Ctrl-C while setting up: nothing is left running
        if private is not None:
            private.stop()
        return 130
    os.execve(sys.executable, [sys.executable, "-S", str(runs.SUPERVISOR), json.dumps(spec)], env)


def embedded(processes: dict[str, str]) -> list[tuple[str, str]]:
    """The Procfile's lines as a local run starts them: beat on a thread of the one worker
    (workers/beat_thread.py) rather than a process of its own."""
    if "worker" not in processes or "beat" not in processes:
        return list(processes.items())
    return [
        (name, f'{command} --beat-schedule "$BEAT_SCHEDULE"' if name == "worker" else command)
        for name, command in processes.items()
        if name != "beat"
    ]


def _free_port(host: str) -> int:
    from app.ports import listen_port

    return listen_port(host)


if __name__ == "__main__":
    sys.exit(main())
