"""/v1/api/skills: the skills admin API (thin routes over app.skills). Read-only skills answer 403."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import NotFoundError
from app.skills import fields, store
from app.storage.database import Database
from app.web.requests import json_body

skills = Blueprint("skills", __name__, url_prefix="/v1/api/skills")


def _db() -> Database:
    return current_app.extensions["runtime"].db


def _name(name: str) -> str:
    """A name no skill can have (a NUL from `%00`, too long) is a 404 before a query sees it."""
    if not fields.NAME.fullmatch(name):
        raise NotFoundError(f"no skill {name[:64]!r}")
    return name


@skills.get("")
def list_skills() -> Any:
    return jsonify(skills=[store.as_dict(row, with_content=False) for row in store.all_skills(_db())])


@skills.post("")
def create_skill() -> Any:
    row = store.create(_db(), fields.checked(json_body()))
    return jsonify(store.as_dict(row)), 201


@skills.get("/<name>")
def get_skill(name: str) -> Any:
    return jsonify(store.as_dict(store.need(_db(), _name(name))))


@skills.put("/<name>")
def put_skill(name: str) -> Any:
    return jsonify(store.as_dict(store.change(_db(), _name(name), fields.checked(json_body(), partial=True))))


@skills.delete("/<name>")
def delete_skill(name: str) -> Any:
    store.delete(_db(), _name(name))
    return jsonify(deleted=name)
