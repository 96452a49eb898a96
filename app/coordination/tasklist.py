"""A coordinator's task list (the `tasks` tool): entries added, their status updated, listed;
stored, so that it outlives any worker and the web client shows it."""

from __future__ import annotations

from typing import Any

from sqlmodel import col, select

from app.errors import ConflictError, NotFoundError
from app.runtime import Runtime
from app.storage.models import CoordinatorTask, TaskStatus, utcnow

MAX_TASKS = 200  # entries of one coordinator's list
MAX_TITLE_CHARS = 500
STATUSES = tuple(s.value for s in TaskStatus)


def add(rt: Runtime, ws_id: str, title: str, child_ws_id: str | None = None) -> dict[str, Any]:
    with rt.db.session() as s:
        count = len(s.exec(select(CoordinatorTask.id).where(CoordinatorTask.ws_id == ws_id)).all())
        if count >= MAX_TASKS:
            raise ConflictError(f"the task list holds at most {MAX_TASKS} entries")
        task = CoordinatorTask(ws_id=ws_id, title=title, child_ws_id=child_ws_id)
        s.add(task)
        s.flush()
        return as_dict(task)


def update(
    rt: Runtime, ws_id: str, task_id: int, status: str | None, child_ws_id: str | None = None
) -> dict[str, Any]:
    with rt.db.session() as s:
        task = s.get(CoordinatorTask, task_id, with_for_update=True)
        if task is None or task.ws_id != ws_id:
            raise NotFoundError(f"no task {task_id} in this list")
        if status is not None:
            task.status = status
        if child_ws_id is not None:
            task.child_ws_id = child_ws_id
        task.updated_at = utcnow()
        s.add(task)
        s.flush()
        return as_dict(task)


def listing(rt: Runtime, ws_id: str) -> list[dict[str, Any]]:
    with rt.db.reader() as s:
        rows = s.exec(
            select(CoordinatorTask).where(CoordinatorTask.ws_id == ws_id).order_by(col(CoordinatorTask.id))
        ).all()
    return [as_dict(t) for t in rows]


def as_dict(task: CoordinatorTask) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "title": task.title,
        "status": task.status,
        "child_ws_id": task.child_ws_id,
        "updated_at": task.updated_at.isoformat(),
    }
