"""/v1/api/skills: the skills admin API (thin routes over app.skills). Read-only skills answer 403."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify

from app.errors import NotFoundError
from app.skills import fields, store
from app.storage.database import Database
from app.web import shapes
from app.web.contract import operation

skills = Blueprint("skills", __name__, url_prefix="/v1/api/skills")


def _db() -> Database:
    return current_app.extensions["runtime"].db


def _name(name: str) -> str:
    """A name no skill can have (a NUL from `%00`, too long) is a 404 before a query sees it."""
    if not fields.NAME.fullmatch(name):
        raise NotFoundError(f"no skill {name[:64]!r}")
    return name


@skills.get("")
@operation("Every skill, without its content", answers={200: shapes.SkillList})
def list_skills() -> Any:
    return jsonify(skills=[store.as_dict(row, with_content=False) for row in store.all_skills(_db())])


@skills.post("")
@operation(
    "Add a skill",
    body=shapes.NewSkill,
    answers={201: shapes.Skill},
    errors={409: "A skill of that name exists"},
    examples={"reviewer": {"name": "reviewer", "content": "Review the diff for bugs.", "tags": ["review"]}},
)
def create_skill(body: shapes.NewSkill) -> Any:
    row = store.create(_db(), fields.checked(body.given()))
    return jsonify(store.as_dict(row)), 201


@skills.get("/<name>")
@operation("One skill, with its content", answers={200: shapes.Skill})
def get_skill(name: str) -> Any:
    return jsonify(store.as_dict(store.need(_db(), _name(name))))


@skills.put("/<name>")
@operation(
    "Change a skill's fields (those given)",
    body=shapes.SkillFields,
    answers={200: shapes.Skill},
    examples={"turned off": {"enabled": False}},
    errors={403: "A read-only skill (from an MCP server)", 409: "A skill of the new name exists"},
)
def put_skill(name: str, body: shapes.SkillFields) -> Any:
    changes = fields.checked(body.given(), partial=True)
    return jsonify(store.as_dict(store.change(_db(), _name(name), changes)))


@skills.delete("/<name>")
@operation(
    "Delete a skill",
    answers={200: shapes.SkillDeleted},
    errors={403: "A read-only skill (from an MCP server)"},
)
def delete_skill(name: str) -> Any:
    store.delete(_db(), _name(name))
    return jsonify(deleted=name)
