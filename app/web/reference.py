"""The API's description, public: the OpenAPI document (app/web/document.py), the websocket's
AsyncAPI document (app/web/events_document.py), and a browsable page (Swagger UI, from the pinned
`swagger-ui-py` package: no CDN, nothing fetched from elsewhere)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import swagger_ui
from flask import Blueprint, current_app, jsonify, send_from_directory

from app.web import document, events_document
from app.web.contract import operation

PAGE_DIR = Path(__file__).with_name("static") / "reference"
SWAGGER_DIR = Path(swagger_ui.__file__).with_name("static")
SWAGGER_FILES = frozenset({"swagger-ui-bundle.js", "swagger-ui.css"})
PAGE_FILES = frozenset({"start.js"})
OPENAPI = "openapi_document"  # app.extensions: the document, built at the first request
# Swagger UI sets inline styles on its elements; scripts stay this service's own files.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

reference = Blueprint("reference", __name__, url_prefix="/v1/api")


@reference.get("/openapi.json")
@operation("This document: every route of the API (public)", answers={200: "OpenAPI 3.1"})
def openapi() -> Any:
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    if OPENAPI not in app.extensions:
        app.extensions[OPENAPI] = document.build(app)
    return jsonify(app.extensions[OPENAPI])


@reference.get("/asyncapi.json")
@operation(
    "The websocket's messages and events, as an AsyncAPI 3.0 document (public)", answers={200: "AsyncAPI 3.0"}
)
def asyncapi() -> Any:
    return jsonify(events_document.build())


@reference.get("/docs")
@operation(
    "A browsable page over the OpenAPI document (public)", answers={200: "an HTML page"}, content="text/html"
)
def browse() -> Any:
    return _secured(send_from_directory(PAGE_DIR, "index.html"))


@reference.get("/docs/<name>")
@operation("The page's script and style files (public)", answers={200: "a file"}, content=None)
def browse_file(name: str) -> Any:
    if name in SWAGGER_FILES:
        return _secured(send_from_directory(SWAGGER_DIR, name))
    if name in PAGE_FILES:
        return _secured(send_from_directory(PAGE_DIR, name))
    return jsonify(error=f"no file {name[:60]!r} here"), 404


def _secured(response: Any) -> Any:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
