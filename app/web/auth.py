"""Bearer-token authentication for the API and the websocket."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from flask import current_app, g, jsonify, request

from app import tokens


def presented_token() -> str | None:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.args.get("token") or None


def require_token(view: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        name = tokens.verify(current_app.extensions["runtime"], presented_token())
        if name is None:
            response = jsonify(error="unauthorized: send Authorization: Bearer <token>")
            response.status_code = 401
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        g.token_name = name
        return view(*args, **kwargs)

    return guarded
