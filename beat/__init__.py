"""The beat schedule (`celery -A beat beat`): recovery sweeps, housekeeping, the watches' pass.
Run exactly one."""

from typing import Any

from celery.signals import beat_init

from app import gc_settle, housekeeping
from app.settings import Settings
from app.taskqueue import SWEEP_TASK, WATCH_PASS_TASK, make_celery

# A sweep not started within this many intervals is dropped: a newer one is queued by then.
SWEEP_EXPIRY_INTERVALS = 6

housekeeping.quiet()
_settings = Settings.load()
app = make_celery(_settings, name="turnstone-jobs-beat")
app.conf.beat_schedule = {
    "sweep": {
        "task": SWEEP_TASK,
        "schedule": _settings.sweep_interval_seconds,
        "options": {"expires": _settings.sweep_interval_seconds * SWEEP_EXPIRY_INTERVALS},
    },
    # Claims are in the database, so a pass run twice (two beats by mistake) polls nothing twice.
    "watches": {
        "task": WATCH_PASS_TASK,
        "schedule": _settings.watch_poll_seconds,
        "options": {"expires": _settings.watch_poll_seconds * SWEEP_EXPIRY_INTERVALS},
    },
}


@beat_init.connect
def _settle(**_: Any) -> None:
    gc_settle.settle()  # what beat has loaded it keeps for its life
