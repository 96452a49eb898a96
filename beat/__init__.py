"""The beat schedule (`celery -A beat beat`): recovery sweeps, housekeeping, the watches' pass,
the models' health probes.
Run exactly one."""

from typing import Any

from celery.signals import beat_init

from app import gc_settle, housekeeping
from app.settings import Settings
from app.taskqueue import MODEL_HEALTH_TASK, SWEEP_TASK, WATCH_PASS_TASK, make_celery

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
if _settings.model_health_seconds > 0:  # the models' servers probed (app/providers/health.py)
    app.conf.beat_schedule["model-health"] = {
        "task": MODEL_HEALTH_TASK,
        "schedule": _settings.model_health_seconds,
        "options": {"expires": _settings.model_health_seconds},
    }


@beat_init.connect
def _settle(**_: Any) -> None:
    gc_settle.settle()  # what beat has loaded it keeps for its life
