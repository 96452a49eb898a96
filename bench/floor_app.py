"""The libraries-only service `bench.library_floor` measures: a Flask app for gunicorn (`web()`)
and a Celery app whose worker and beat start as ours do (`python -m bench.floor_app worker|beat`).

Each imports what the matching process of the service cannot start without, and nothing else.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from celery import Celery

celery = Celery("floor", broker=os.environ["REDIS_URL"], set_as_current=False, fixups=[])
celery.conf.update(
    worker_hijack_root_logger=False,
    beat_schedule={"tick": {"task": "tick", "schedule": 15.0}},
)


@celery.task(name="tick")
def tick() -> None:
    """Never run: a worker needs a task to consume, beat one to schedule."""


def web() -> Any:
    import flask
    import flask_sock  # noqa: F401
    import prometheus_client  # noqa: F401
    import redis  # noqa: F401
    import sqlalchemy.dialects.sqlite  # noqa: F401
    import sqlalchemy.orm  # noqa: F401
    import sqlmodel  # noqa: F401

    app = flask.Flask(__name__)
    app.get("/health")(lambda: "ok")
    return app


def run(command: str, argv: list[str]) -> None:
    """Celery's own `worker` or `beat` command, without the rest of its command line."""
    from celery.bin.base import CLIContext

    if command == "worker":
        import prometheus_client  # noqa: F401
        import redis  # noqa: F401
        import sqlalchemy.dialects.sqlite  # noqa: F401
        import sqlalchemy.orm  # noqa: F401
        import sqlmodel  # noqa: F401
        from celery.bin.worker import worker as click_command
    else:
        from celery.bin.beat import beat as click_command
    click_command.main(args=argv, prog_name=command, obj=CLIContext(app=celery, no_color=None, workdir=None))


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2:])
