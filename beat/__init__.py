"""The beat schedule (`celery -A beat beat`): recovery sweeps and housekeeping. Run exactly one."""

from app.settings import Settings
from app.taskqueue import SWEEP_TASK, make_celery

_settings = Settings.load()
app = make_celery(_settings, name="turnstone-jobs-beat")
app.conf.beat_schedule = {
    "sweep": {
        "task": SWEEP_TASK,
        "schedule": _settings.sweep_interval_seconds,
        "options": {"expires": _settings.sweep_interval_seconds * 2},
    },
}
