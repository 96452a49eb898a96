"""`python -m beat [OPTIONS]`: Celery beat, with `celery beat`'s own options, started without the
rest of Celery's command line (its REPL and other commands cost about 10 MB a process)."""

from celery.bin.base import CLIContext
from celery.bin.beat import beat

from beat import app

if __name__ == "__main__":
    beat.main(prog_name="python -m beat", obj=CLIContext(app=app, no_color=None, workdir=None))
