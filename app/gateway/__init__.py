"""The notification channel gateway: its own process (Procfile `gateway`), delivering what the
notify tool sends to Discord, JSON webhooks and ntfy, and registered in `services` while it lives."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from app.settings import Settings

GATEWAY_MAX_BODY_BYTES = 64 * 1024

if TYPE_CHECKING:
    from flask import Flask
    from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, heartbeat: bool = True) -> Flask:
    """The gateway's WSGI application (gunicorn serves it); with `heartbeat`, it registers itself
    in `services` and keeps its row fresh on a thread."""
    # Flask is imported here: the worker imports this package (the notify tool's client) and
    # has no use for a web framework's memory.
    from flask import Flask
    from werkzeug.exceptions import HTTPException

    from app.gateway.heartbeat import Heartbeat
    from app.gateway.routes import gateway
    from app.storage.database import Database

    settings = settings or Settings.load()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its INFO lines quote URLs: webhook tokens
    db = Database(settings.database_url)
    flask_app = Flask(__name__, static_folder=None)
    flask_app.config["MAX_CONTENT_LENGTH"] = GATEWAY_MAX_BODY_BYTES
    flask_app.extensions["gateway_db"] = db
    flask_app.extensions["notify_settings"] = settings.notify
    flask_app.extensions["heartbeat"] = None
    flask_app.register_blueprint(gateway)
    flask_app.register_error_handler(HTTPException, _http_error)
    flask_app.register_error_handler(Exception, _internal_error)
    if heartbeat:
        beat = Heartbeat(db, settings.notify)
        beat.start()
        flask_app.extensions["heartbeat"] = beat
    return flask_app


def _http_error(exc: HTTPException) -> Any:
    from flask import jsonify

    return jsonify(error=exc.name.lower()), exc.code or 500


def _internal_error(exc: Exception) -> Any:
    # The HTTP boundary: the type only (a message could quote a webhook URL).
    from flask import jsonify

    log.error("gateway: %s", type(exc).__name__)
    return jsonify(error="internal error"), 500
