"""What a long-lived process keeps is out of the collector's full walks once it has started
(`app.gc_settle`): the worker once it is ready, beat once it starts, the web once gunicorn has loaded
the app, and a model SDK once a step has imported it. Each probe runs a process's hooks as it
starts them, in a process of its own, against the tests' Redis and database."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.services import ROOT, Services

# What each probe runs: the same hooks, in the same order, as the real process.
PROBES = {
    # `python -m workers`: its app and task modules, then what worker_ready runs (announce, MCP).
    "worker": """
import workers.__main__
from workers import presence
presence._announce(sender=None)
frozen = gc.get_freeze_count()
presence._withdraw()
""",
    # `python -m beat`: its schedule, then what beat_init runs.
    "beat": """
import beat.__main__
from celery.signals import beat_init
beat_init.send(sender=None)
frozen = gc.get_freeze_count()
""",
    # gunicorn's worker: the app loaded, then the config's post_worker_init hook.
    "web": """
import app
app.create_app()
from app.web import gunicorn_config
gunicorn_config.post_worker_init(None)
frozen = gc.get_freeze_count()
""",
    # A step's first request: its provider's module and SDK imported (`stream_reply` does this).
    "model SDK": """
from app.providers import reply
gc.freeze()
before = gc.get_freeze_count()
reply._module("openai")
frozen = gc.get_freeze_count() - before
""",
}
# A started process tracks tens of thousands of objects (beat) to a few hundred thousand (the
# worker), the openai SDK about 100,000: well past these, and none of them frozen without `settle`.
AT_LEAST = {"worker": 100_000, "beat": 20_000, "web": 50_000, "model SDK": 30_000}


@pytest.mark.parametrize("process", sorted(PROBES))
def test_what_a_started_process_keeps_is_out_of_full_collections(services: Services, process: str) -> None:
    probe = f"import gc, json\n{PROBES[process]}\nprint(json.dumps([frozen, len(gc.get_objects())]))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=services.env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    frozen, still_walked = json.loads(done.stdout.strip().splitlines()[-1])
    assert frozen >= AT_LEAST[process]
    assert still_walked < frozen / 10  # what a full collection still walks: what came after
