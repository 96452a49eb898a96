"""What a commit counts and a rollback does not; bounded labels; the multiprocess folder's upkeep."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import Session, create_engine

from app.metrics import recording
from app.metrics.definitions import TOOL_CALLS, TURNS_FINISHED

ROOT = Path(__file__).resolve().parents[2]


def _count(outcome: str) -> float:
    return TURNS_FINISHED.labels(outcome=outcome)._value.get()


def test_counted_on_commit_and_never_on_rollback() -> None:
    engine = create_engine("sqlite://")
    before = _count("done")
    with Session(engine) as s:
        s.exec(text("SELECT 1"))  # type: ignore[call-overload]
        recording.turn_finished(s, "done")
        assert _count("done") == before  # not yet: the transaction may still fail
        s.rollback()
    assert _count("done") == before
    with Session(engine) as s:
        s.exec(text("SELECT 1"))  # type: ignore[call-overload]
        recording.turn_finished(s, "done")
        recording.turn_finished(s, "done")
        s.commit()
        s.exec(text("SELECT 1"))  # type: ignore[call-overload]
        s.commit()  # a second commit counts nothing again
    assert _count("done") == before + 2


@pytest.mark.parametrize(
    ("status", "is_error", "outcome"),
    [
        ("done", False, "ok"),
        ("done", True, "error"),
        ("error", True, "refused"),
        ("denied", True, "denied"),
        ("cancelled", True, "cancelled"),
        ("interrupted", True, "interrupted"),
    ],
)
def test_a_final_call_status_is_an_outcome(status: str, is_error: bool, outcome: str) -> None:
    assert recording.call_outcome(status, is_error) == outcome


def test_tool_labels_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "_tool_labels", set())
    names = [f"mcp__server__tool_{n}" for n in range(recording.MAX_TOOL_LABELS + 50)]
    labels = [recording.tool_label(name) for name in names]
    assert labels[: recording.MAX_TOOL_LABELS] == names[: recording.MAX_TOOL_LABELS]
    assert set(labels[recording.MAX_TOOL_LABELS :]) == {recording.OTHER_TOOL}
    assert recording.tool_label(names[0]) == names[0]  # a known one keeps its label
    before = TOOL_CALLS.labels(tool="other", outcome="ok")._value.get()
    engine = create_engine("sqlite://")
    with Session(engine) as s:
        s.exec(text("SELECT 1"))  # type: ignore[call-overload]
        recording.tool_call_ended(s, "yet_another", "done", False)
        s.commit()
    assert TOOL_CALLS.labels(tool="other", outcome="ok")._value.get() == before + 1


def test_processes_sharing_the_folder_are_summed_and_a_dead_ones_sockets_forgotten(tmp_path: Path) -> None:
    """Real processes writing to one folder, as gunicorn's workers and Celery's do."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    script = (
        "from app.metrics import recording\n"
        "from app.metrics.definitions import TURNS_STARTED\n"
        "TURNS_STARTED.inc(3)\n"
        "recording.websocket_opened()\n"
    )
    for _ in range(2):
        subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, check=True)
    read = (
        "from app.metrics import folder\n"
        "from prometheus_client import CollectorRegistry, generate_latest, multiprocess\n"
        "import sys\n"
        "if len(sys.argv) > 1: folder.forget_dead_processes()\n"
        "r = CollectorRegistry(); multiprocess.MultiProcessCollector(r)\n"
        "print(generate_latest(r).decode())\n"
    )
    shown = subprocess.run([sys.executable, "-c", read], env=env, cwd=ROOT, check=True, capture_output=True)
    assert "turnstone_turns_started_total 6.0" in shown.stdout.decode()
    assert "turnstone_open_websockets 2.0" in shown.stdout.decode()
    # Both writers have exited: a web master starting now forgets their open sockets, not their counts.
    shown = subprocess.run(
        [sys.executable, "-c", read, "forget"], env=env, cwd=ROOT, check=True, capture_output=True
    )
    assert "turnstone_turns_started_total 6.0" in shown.stdout.decode()
    assert "turnstone_open_websockets" not in shown.stdout.decode() or "turnstone_open_websockets 0.0" in (
        shown.stdout.decode()
    )
