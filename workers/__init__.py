"""The Celery worker application (`celery -A workers worker`): thin task bodies over app.engine."""

from app.settings import Settings
from app.taskqueue import make_celery

app = make_celery(Settings.load(), name="turnstone-jobs-worker")
app.set_current()

from workers import tasks  # noqa: E402,F401  (the task bodies register on import of the worker app)
