"""turnstone-jobs: tool-using LLM agents run as durable jobs. `create_app` is the web entry point."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask

    from app.settings import Settings

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> Flask:
    """The web application; configures nothing at import time."""
    # Flask and the settings are imported here, not at the top: the worker and beat import this
    # package too (app.settings, app.runtime, ...) and have no use for a web framework's memory,
    # and the gunicorn master imports it only to load our worker class (app/web/gunicorn_worker.py).
    from flask import Flask

    from app.runtime import Runtime
    from app.sandbox import folders
    from app.settings import Settings
    from app.web import access, websocket
    from app.web.accounts import accounts
    from app.web.api import api
    from app.web.approval_links import approval_links
    from app.web.branches import branches
    from app.web.channels import channel_api
    from app.web.client import client
    from app.web.client_tools import client_tools
    from app.web.compaction import compaction
    from app.web.health import health
    from app.web.mcp_api import mcp_api
    from app.web.memories import memories
    from app.web.metrics import metrics
    from app.web.policies import policies
    from app.web.previews import previews
    from app.web.reference import reference
    from app.web.runs import runs
    from app.web.schedules import schedules
    from app.web.skills import skills
    from app.web.triggers import triggers
    from app.web.usage import usage_api
    from app.web.webhooks import webhooks

    settings = settings or Settings.load()
    rt = Runtime.create(settings)
    rt.waits_out_outages = False  # a request meeting an outage is answered 503 to retry
    rt.data_root_problem = folders.check_shared(settings, rt.db)
    if rt.data_root_problem is not None:
        log.error("workstream folders made here will not be where workers look: %s", rt.data_root_problem)
    rt.sandbox.warn_if_unjailed()
    flask_app = Flask(__name__, static_folder=None)
    max_body = settings.max_body_bytes
    flask_app.config["MAX_CONTENT_LENGTH"] = max_body
    flask_app.extensions["runtime"] = rt
    flask_app.register_blueprint(api)
    flask_app.register_blueprint(branches)
    flask_app.register_blueprint(runs)
    flask_app.register_blueprint(webhooks)
    flask_app.register_blueprint(schedules)
    flask_app.register_blueprint(triggers)
    flask_app.register_blueprint(approval_links)
    flask_app.register_blueprint(compaction)
    flask_app.register_blueprint(client_tools)
    flask_app.register_blueprint(usage_api)
    flask_app.register_blueprint(accounts)
    flask_app.register_blueprint(health)
    flask_app.register_blueprint(previews)
    flask_app.register_blueprint(client)
    flask_app.register_blueprint(mcp_api)
    flask_app.register_blueprint(memories)
    flask_app.register_blueprint(metrics)
    flask_app.register_blueprint(skills)
    flask_app.register_blueprint(policies)
    flask_app.register_blueprint(channel_api)
    flask_app.register_blueprint(reference)
    websocket.init_app(flask_app, rt)  # the same body cap for a websocket message
    access.init_app(flask_app)  # every endpoint's rule (app/web/access.py), checked before its view
    _register_errors(flask_app)
    return flask_app


def _register_errors(flask_app: Flask) -> None:
    from flask import jsonify
    from werkzeug.exceptions import HTTPException

    from app.errors import ServiceError
    from app.web import faults
    from app.web.requests import discard_body

    @flask_app.after_request
    def _read_the_rest(response: Any) -> Any:
        # Whatever the answer (a 401, a 413, a 404), read what the client is still sending
        # first: most clients send the whole body before reading, and would otherwise see
        # a broken pipe instead of the answer.
        discard_body()
        return response

    @flask_app.errorhandler(ServiceError)
    def _service_error(exc: ServiceError) -> Any:
        return jsonify(error=exc.message, **exc.details), exc.status

    @flask_app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Any:
        response = jsonify(error=exc.description or exc.name)
        response.status_code = exc.code or 500
        for name, value in exc.get_headers():  # Allow on a 405, Retry-After, ...
            if name.lower() != "content-type":
                response.headers[name] = value
        return response

    @flask_app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Any:  # the HTTP boundary: log it, say little
        status, body = faults.answer(exc)
        response = jsonify(body)
        if status == 503:
            response.headers["Retry-After"] = str(faults.RETRY_AFTER_SECONDS)
        return response, status
