"""`python -m workers [OPTIONS]`: the Celery worker, with `celery worker`'s own options, started
without the rest of Celery's command line (its REPL and other commands cost about 10 MB a process)."""

from celery.bin.base import CLIContext
from celery.bin.worker import worker

from workers import app, beat_thread

if __name__ == "__main__":
    worker.params.append(beat_thread.OPTION)  # celery's own command line adds app.user_options
    worker.main(prog_name="python -m workers", obj=CLIContext(app=app, no_color=None, workdir=None))
