"""What a coordinator's tools are given (`ToolContext.coordination`): its children, its waits, its
task list and the live workers, bound to the coordinator and the runtime, so that the handlers
stay free of Celery, Flask and Redis."""

from __future__ import annotations

from typing import Any

from app import presence
from app.coordination import children, tasklist, waits
from app.engine.life import workstreams
from app.runtime import Runtime
from app.storage.models import Workstream


class Coordination:
    """The coordinator `ws` as its tools reach it; every method answers a JSON-ready dict and
    raises an app.errors.ServiceError for anything refused."""

    def __init__(self, rt: Runtime, ws: Workstream) -> None:
        self._rt = rt
        self._ws = ws

    @property
    def _by(self) -> str:
        return f"coordinator {self._ws.id}"

    def spawn(self, spec: dict[str, Any]) -> dict[str, Any]:
        return children.spawn(self._rt, self._ws, **spec)

    def inspect(self, ws_id: str) -> dict[str, Any]:
        return children.described(self._rt, children.child(self._rt, self._ws.id, ws_id))

    def send(self, ws_id: str, message: str) -> dict[str, Any]:
        return children.send(self._rt, self._ws.id, ws_id, message)

    def cancel(self, ws_id: str) -> dict[str, Any]:
        children.child(self._rt, self._ws.id, ws_id)
        return {"ws_id": ws_id, "was_working": children.stop(self._rt, ws_id, self._by)}

    def close(self, ws_id: str) -> dict[str, Any]:
        children.child(self._rt, self._ws.id, ws_id)
        return {"closed": children.close(self._rt, ws_id, self._by)}

    def close_all(self) -> dict[str, Any]:
        return {"closed": children.close_all(self._rt, self._ws.id, self._by)}

    def delete(self, ws_id: str) -> dict[str, Any]:
        children.child(self._rt, self._ws.id, ws_id)
        return {"deleted": workstreams.delete(self._rt, ws_id)}

    def listing(self, with_closed: bool) -> dict[str, Any]:
        return {"workstreams": children.listing(self._rt, self._ws.id, with_closed)}

    def nodes(self) -> dict[str, Any]:
        live = presence.members(self._rt.redis)
        return {
            "count": len(live),
            "nodes": [{"name": name, "seen_seconds_ago": round(ago, 1)} for name, ago in live],
        }

    def wait_check(self, ws_ids: list[str], mode: str) -> dict[str, Any]:
        """Where the children stand now; NotFoundError when one is not this coordinator's."""
        for ws_id in ws_ids:
            children.child(self._rt, self._ws.id, ws_id)
        with self._rt.db.reader() as s:
            return waits.report(s, self._ws.id, ws_ids, mode)

    def tasks(self, action: str, args: dict[str, Any]) -> dict[str, Any]:
        rt, ws_id = self._rt, self._ws.id
        if args.get("child_ws_id") is not None:
            children.child(rt, ws_id, args["child_ws_id"])
        if action == "add":
            changed = tasklist.add(rt, ws_id, args["title"], args.get("child_ws_id"))
        elif action == "update":
            changed = tasklist.update(rt, ws_id, args["task_id"], args.get("status"), args.get("child_ws_id"))
        else:
            return {"tasks": tasklist.listing(rt, ws_id)}
        listed = tasklist.listing(rt, ws_id)
        rt.events.publish(ws_id, "tasks_changed", tasks=listed)
        return {"task": changed, "tasks": listed}
