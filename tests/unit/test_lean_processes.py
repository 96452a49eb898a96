"""What each process loads as it starts: libraries a process has no use for stay out of it, since
every one costs megabytes of its idle memory (issue 9: web + worker + beat under 200 MB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Loaded on first use only: flask (the web's), httpx and the rich console it brings (fetches,
# searches, notifications), PyJWT (notifications), MCP's SDK (a configured MCP server), the
# model SDKs (a model step), Celery's whole command line (a REPL among it), the HTML parser (a
# page fetched), argon2 (a password checked or set), and Celery's worker in what is no worker
# (its Django fix-up imports it wherever the configuration is read).
LAZY = (
    "flask",
    "httpx",
    "rich",
    "jwt",
    "mcp",
    "openai",
    "anthropic",
    "click_repl",
    "prompt_toolkit",
    "selectolax",
    "argon2",
)
WORKER_ONLY = ("celery.worker",)

BOOT = {
    # The worker as `python -m workers` starts it: its runtime (every tool's module), then what
    # worker_ready does (the MCP service, with no servers configured).
    "worker": """
import time
import workers.__main__
from workers.tasks import runtime
rt = runtime()
rt.mcp.start()
time.sleep(0.5)
""",
    "beat": "import beat.__main__",
    # The web process after create_app (flask is its own, so not asked about here).
    "web": "import app; app.create_app()",
    # The channel gateway's worker after create_app: httpx and its console libraries wait for
    # the first delivery (a local run keeps an idle gateway whether or not anyone is notified).
    "gateway": "from app.gateway import create_app; create_app(heartbeat=False)",
    # gunicorn's master as the Procfile starts it: its command line and our config module read,
    # our worker class loaded (the master does, to check it), the start hook run. It forks the
    # workers and restarts them; nothing of the service, its settings or its metrics is its use.
    "master": """
import sys
from gunicorn.app.wsgiapp import WSGIApplication
sys.argv = ["gunicorn", "--config", "python:app.web.gunicorn_config",
            "--worker-class", "app.web.gunicorn_worker.JsonThreadWorker", "app:create_app()"]
application = WSGIApplication("%(prog)s [OPTIONS] [APP_MODULE]")
application.cfg.worker_class
application.cfg.on_starting(None)
""",
}
# Beyond LAZY, what the master must start without: the service's settings and its metrics
# library (which it needs only to forget a dead worker's gauges, when a worker has died).
MASTER_ABSENT = ("prometheus_client", "app.settings", "app.runtime", "sqlalchemy", "redis", "celery")


def _loaded(code: str, tmp_path: Path) -> list[str]:
    metrics = tmp_path / "metrics"  # as the Procfile's processes run under compose or `run`
    metrics.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'lean.db'}",
        "REDIS_URL": "redis://127.0.0.1:1/0",  # nothing listens: nothing here needs an answer
        "TURNSTONE_MODEL": "openai:fake-model",
        "OPENAI_API_KEY": "sk-unused",
        "TURNSTONE_API_TOKEN": "unused-token",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics),
    }
    subprocess.run(
        [str(BIN / "turnstone-jobs"), "migrate"], env=env, cwd=ROOT, check=True, capture_output=True
    )
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _has(loaded: list[str], name: str) -> bool:
    """Whether module `name`, or any module inside it, is loaded."""
    return any(m == name or m.startswith(name + ".") for m in loaded)


@pytest.mark.parametrize("process", sorted(BOOT))
def test_a_process_starts_without_the_libraries_it_does_not_use(process: str, tmp_path: Path) -> None:
    loaded = _loaded(BOOT[process], tmp_path)
    expected_absent = [m for m in LAZY if not (process in ("web", "gateway") and m == "flask")]
    if process != "worker":
        expected_absent += WORKER_ONLY
    if process == "master":
        expected_absent += MASTER_ABSENT
    assert [m for m in expected_absent if _has(loaded, m)] == []


def test_the_lean_entry_points_take_celerys_own_options() -> None:
    # The worker's own addition: beat on one of its threads (a local run's, workers/beat_thread.py).
    for module, words in (
        ("workers", "--beat-schedule"),
        ("workers", "--concurrency"),
        ("beat", "--schedule"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert f"Usage: python -m {module}" in done.stdout and words in done.stdout
