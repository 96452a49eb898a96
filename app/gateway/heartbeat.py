"""The gateway's registration: a row in `services` at start, refreshed on a thread, removed at exit."""

from __future__ import annotations

import atexit
import logging
import threading
import time

from app.gateway import registry
from app.settings import GATEWAY_KIND, NotifySettings
from app.storage.database import Database

log = logging.getLogger(__name__)

REGISTRATION_GRACE_SECONDS = 60.0  # a first start's migrations take a few seconds; a minute is wrong


class Heartbeat:
    def __init__(self, db: Database, settings: NotifySettings) -> None:
        self.db = db
        self.url = settings.advertised_url
        self.interval = settings.heartbeat_seconds
        self.service_id: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gateway-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()
        atexit.register(self.stop)

    def stop(self) -> None:
        self._stop.set()
        if self.service_id is not None:
            try:
                registry.unregister(self.db, self.service_id)
            except Exception:  # noqa: BLE001 - at exit: the row goes stale and is skipped anyway
                log.warning("gateway: could not remove its services row")

    def _run(self) -> None:
        # Before the migrations ran (the web process runs them, at the same start) the table may
        # be missing: a failed first registration is tried again each second, quietly for the
        # migrations' first minute; any later failure is logged. Never fatal.
        quiet_until = time.monotonic() + REGISTRATION_GRACE_SECONDS
        while not self._stop.is_set():
            try:
                if self.service_id is None:
                    self.service_id = registry.register(self.db, GATEWAY_KIND, self.url)
                    log.info("gateway: registered as %s at %s", self.service_id, self.url)
                else:
                    registry.heartbeat(self.db, self.service_id, GATEWAY_KIND, self.url)
            except Exception as exc:  # noqa: BLE001 - the database may be down a while
                waiting = self.service_id is None and time.monotonic() < quiet_until
                level = logging.DEBUG if waiting else logging.WARNING
                log.log(level, "gateway: heartbeat failed: %s", type(exc).__name__)
            self._stop.wait(self.interval if self.service_id else min(self.interval, 1.0))
