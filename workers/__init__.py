"""The Celery worker application (`celery -A workers worker`): thin task bodies over app.engine."""

from app import housekeeping
from app.settings import Settings
from app.taskqueue import make_celery
from workers import beat_thread

app = make_celery(Settings.load(), name="turnstone-jobs-worker")
app.set_current()
beat_thread.install(app)
housekeeping.quiet()

from workers import presence, tasks  # noqa: E402,F401  (task bodies and signal hooks register here)
