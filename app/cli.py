"""The `turnstone-jobs` command: run the whole service locally, migrate, create API tokens."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from app.settings import DEFAULT_RUN_HOST, Settings

PROCFILE = Path(__file__).resolve().parent.parent / "Procfile"
# A local run serves this machine only; `--host 0.0.0.0` (or an address) opens it up.


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="turnstone-jobs")
    sub = parser.add_subparsers(dest="command", required=True)
    run_cmd = sub.add_parser("run", help="run web, worker and beat (and a private Redis if none answers)")
    run_cmd.add_argument(
        "--host",
        default=DEFAULT_RUN_HOST,
        help=f"address the web process binds (default {DEFAULT_RUN_HOST}: this machine only)",
    )
    sub.add_parser("migrate", help="apply the database migrations")
    token = sub.add_parser("token", help="manage API tokens")
    token_sub = token.add_subparsers(dest="token_command", required=True)
    create = token_sub.add_parser("create", help="create a token; it is printed once")
    create.add_argument("name")
    skills = sub.add_parser("skills", help="manage skills")
    skills_sub = skills.add_subparsers(dest="skills_command", required=True)
    importer = skills_sub.add_parser("import", help="import SKILL.md folders (DIR, or the folders in it)")
    importer.add_argument("folder", metavar="DIR")
    args = parser.parse_args(argv)
    if args.command == "skills":
        return import_skills(Path(args.folder))
    if args.command == "migrate":
        return migrate()
    if args.command == "token":
        return create_token(args.name)
    return run(args.host)


def migrate() -> int:
    from app.storage.migrate import upgrade

    upgrade(Settings.load().database_url)
    return 0


def create_token(name: str) -> int:
    from app import tokens
    from app.runtime import Runtime

    migrate()
    rt = Runtime.create(Settings.load())
    try:
        print(tokens.create(rt, name))
    finally:
        rt.close()
    return 0


def import_skills(folder: Path) -> int:
    """Import every SKILL.md under `folder`; exit 1 when any was skipped (or none found)."""
    from app.skills.importer import import_folder
    from app.storage.database import Database

    if not folder.is_dir():
        print(f"turnstone-jobs: {folder} is not a directory", file=sys.stderr)
        return 2
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


def run(host: str = DEFAULT_RUN_HOST) -> int:
    """Every Procfile line under one supervisor, as `honcho start` would run them, with the
    web process bound to `host`."""
    from honcho.environ import parse_procfile
    from honcho.manager import Manager

    from app.localredis import PrivateRedis, is_reachable

    settings = Settings.load()
    env = dict(os.environ)
    private = None
    if not is_reachable(settings.redis_url):
        private = PrivateRedis()
        env["REDIS_URL"] = private.start()
        print(
            f"turnstone-jobs: no Redis at {settings.redis_url}; started a private one at {env['REDIS_URL']}"
        )
    env.setdefault("PORT", str(settings.port))
    env["WEB_HOST"] = f"[{host}]" if ":" in host else host  # an IPv6 address needs brackets
    # Beat's schedule only spaces out periodic runs: it need not outlive the run, nor
    # litter the folder it was started in.
    scratch = tempfile.TemporaryDirectory(prefix="turnstone-run-")
    env.setdefault("BEAT_SCHEDULE", str(Path(scratch.name) / "beat-schedule"))
    manager = Manager()
    for name, command in parse_procfile(PROCFILE.read_text()).processes.items():
        manager.add_process(name, command, env=env, cwd=os.getcwd())
    try:
        manager.loop()
    finally:
        if private:
            private.stop()
        scratch.cleanup()
    return int(manager.returncode or 0)


if __name__ == "__main__":
    sys.exit(main())
