"""`python -m workers --beat-schedule PATH`: beat's schedule (beat/__init__.py) run on a thread of
this worker, for a one-machine run (`turnstone-jobs run`), where a process of its own would cost
about 35 MiB of idle memory for two periodic sends. Run in one worker only: one beat."""

from __future__ import annotations

from typing import Any

from celery import Celery, bootsteps
from celery.bin.base import CeleryOption


class BeatThread(bootsteps.StartStopStep):
    """Started with the worker, stopped with it (its thread wakes every second to see)."""

    def __init__(self, worker: Any, beat_schedule: str | None = None, **options: Any) -> None:
        self.schedule = beat_schedule
        super().__init__(worker, **options)

    def include_if(self, worker: Any) -> bool:
        return bool(self.schedule)

    def create(self, worker: Any) -> Any:
        from celery.beat import EmbeddedService

        import beat  # its own Celery app, with the schedule

        return EmbeddedService(beat.app, thread=True, schedule_filename=self.schedule)


OPTION = CeleryOption(
    ["--beat-schedule"],
    default=None,
    help="also run beat, on a thread, with this schedule file",
    help_group="Embedded Beat Options",
)


def install(app: Celery) -> None:
    app.user_options["worker"].add(OPTION)  # for `celery -A workers worker`
    app.steps["worker"].add(BeatThread)
