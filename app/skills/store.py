"""Skills (`prompt_templates` rows): created, changed and deleted by name; found; made active.

Read-only skills (synced from MCP servers) refuse changes here with `ForbiddenError`. A
workstream keeps its active skill's name and its content as rendered when it was chosen,
so editing or deleting a skill later leaves running workstreams as they were.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from app.bm25 import Index, without_punctuation
from app.errors import ConflictError, ForbiddenError, NotFoundError, UnprocessableError
from app.reranking import retrieval
from app.settings import RERANK_BM25_POOL, SKILL_SEARCH_RESULTS, ToolSettings
from app.skills.fields import render
from app.storage.database import Database
from app.storage.models import PromptTemplate, Workstream, utcnow
from app.storage.types import storable


def all_skills(db: Database, enabled_only: bool = False) -> list[PromptTemplate]:
    with db.reader() as s:
        query = select(PromptTemplate).order_by(col(PromptTemplate.name))
        if enabled_only:
            query = query.where(col(PromptTemplate.enabled).is_(True))
        return list(s.exec(query).all())


def get(db: Database, name: str) -> PromptTemplate | None:
    with db.reader() as s:
        return s.exec(select(PromptTemplate).where(PromptTemplate.name == name)).first()


def need(db: Database, name: str) -> PromptTemplate:
    row = get(db, name)
    if row is None:
        raise NotFoundError(f"no skill {name!r}")
    return row


def create(db: Database, fields: dict[str, Any]) -> PromptTemplate:
    row = PromptTemplate(**fields)
    try:
        with db.session() as s:
            s.add(row)
    except IntegrityError:
        name = fields["name"]
        raise ConflictError(f"skill {name!r} exists; PUT /v1/api/skills/{name} changes it") from None
    return row


def change(db: Database, name: str, fields: dict[str, Any]) -> PromptTemplate:
    """Apply `fields` to the skill `name` (a manual one); 404, 403 read-only, 409 renamed onto another."""
    try:
        with db.session() as s:
            row = s.exec(select(PromptTemplate).where(PromptTemplate.name == name)).first()
            _check_writable(row, name)
            assert row is not None
            for key, value in fields.items():
                setattr(row, key, value)
            row.updated_at = utcnow()
            s.add(row)
    except IntegrityError:
        raise ConflictError(f"a skill named {fields.get('name')!r} exists already") from None
    return row


def delete(db: Database, name: str) -> None:
    with db.session() as s:
        row = s.exec(select(PromptTemplate).where(PromptTemplate.name == name)).first()
        _check_writable(row, name)
        s.delete(row)


def save_manual(db: Database, fields: dict[str, Any]) -> str:
    """Create or replace a manual skill (an import); 'created' or 'updated'."""
    if get(db, fields["name"]) is None:
        try:
            create(db, fields)
            return "created"
        except ConflictError:
            pass  # created meanwhile: replace it
    change(db, fields["name"], fields)
    return "updated"


def _check_writable(row: PromptTemplate | None, name: str) -> None:
    if row is None:
        raise NotFoundError(f"no skill {name!r}")
    if row.readonly:
        source = f" (from MCP server {row.mcp_server!r})" if row.mcp_server else ""
        raise ForbiddenError(f"skill {name!r} is read-only{source}: it is kept in step with its source")


def search(
    db: Database, query: str, most: int = SKILL_SEARCH_RESULTS, tools: ToolSettings | None = None
) -> list[PromptTemplate]:
    """Enabled skills by BM25 relevance over name, description, tags and category (BM25's best
    in the reranker's order, with `tools` that rerank); with no query, the first `most` by name."""
    skills = all_skills(db, enabled_only=True)
    if not query.strip():
        return skills[:most]
    index = Index(
        (n, without_punctuation(f"{k.name} {k.description} {' '.join(k.tags)} {k.category}"))
        for n, k in enumerate(skills)
    )
    hits = index.search(without_punctuation(query), max(most, RERANK_BM25_POOL))
    found = [skills[n] for n, _score in hits]
    if tools is not None:
        found = retrieval.ordered(tools, query, found, document)
    return found[:most]


def document(skill: PromptTemplate) -> str:
    """A skill as a reranker reads it: what BM25 matched, its name, description, tags and category."""
    lines = [skill.name, skill.description]
    if skill.tags:
        lines.append(f"tags: {', '.join(skill.tags)}")
    if skill.category:
        lines.append(f"category: {skill.category}")
    return "\n".join(line for line in lines if line)


def default_skill(db: Database) -> PromptTemplate | None:
    """The skill a workstream created without one takes on: the first enabled `default` one."""
    with db.reader() as s:
        return s.exec(
            select(PromptTemplate)
            .where(PromptTemplate.activation == "default", col(PromptTemplate.enabled).is_(True))
            .order_by(col(PromptTemplate.name))
        ).first()


def chosen_at_creation(db: Database, name: str | None) -> PromptTemplate | None:
    """The skill a new workstream starts with: the one asked for (400 when it is not an
    enabled skill), else the default one, if any."""
    if name is None:
        return default_skill(db)
    row = get(db, name) if storable(name) == name else None
    if row is None or not row.enabled:
        raise UnprocessableError(f"skill: no enabled skill named {name[:100]!r}", field="skill")
    return row


def activate(db: Database, ws_id: str, skill: PromptTemplate, model: str) -> str:
    """Make `skill` the workstream's active one (replacing any); the content as rendered."""
    content = render(skill.content, model, ws_id)
    with db.session() as s:
        s.exec(
            update(Workstream)
            .where(col(Workstream.id) == ws_id)
            .values(skill=skill.name, skill_content=content, updated_at=utcnow())
        )
    return content


def as_dict(row: PromptTemplate, with_content: bool = True) -> dict[str, Any]:
    out = {
        "name": row.name,
        "description": row.description,
        "tags": list(row.tags),
        "category": row.category,
        "risk_level": row.risk_level,
        "activation": row.activation,
        "origin": row.origin,
        "mcp_server": row.mcp_server,
        "readonly": row.readonly,
        "enabled": row.enabled,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
    }
    if with_content:
        out["content"] = row.content
    return out
