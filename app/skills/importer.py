"""`turnstone-jobs skills import DIR`: skills from folders in the common SKILL.md format.

A SKILL.md opens with YAML front matter between `---` lines (`name` and `description`
required; `tags`, `category`, `risk_level`, `activation` optional) and its Markdown body
is the skill's content. DIR may be one such folder or hold several.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.errors import ServiceError
from app.skills import fields, store
from app.storage.database import Database

FILE_NAME = "SKILL.md"
MAX_FILE_BYTES = 1024 * 1024
FRONT_MATTER_KEYS = ("name", "description", "tags", "category", "risk_level", "activation")


class SkillFileError(ValueError):
    """A SKILL.md that cannot be read as a skill; the message says why."""


@dataclass(frozen=True)
class Outcome:
    path: Path
    name: str | None
    result: str  # created, updated, or the reason it was skipped
    ok: bool


def skill_files(folder: Path) -> list[Path]:
    own = folder / FILE_NAME
    if own.is_file():
        return [own]
    return sorted(p for p in folder.glob(f"*/{FILE_NAME}") if p.is_file())


def parse(text: str) -> dict[str, Any]:
    """The skill's fields from a SKILL.md's text, checked as the admin API checks them."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillFileError("no YAML front matter: the file must start with a '---' line")
    end = next((n for n, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise SkillFileError("the front matter has no closing '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise SkillFileError(f"the front matter is not valid YAML: {exc}") from None
    except RecursionError:
        raise SkillFileError("the front matter is not valid YAML: nested too deeply") from None
    if not isinstance(meta, dict):
        raise SkillFileError("the front matter must be a mapping of keys to values")
    for key in ("name", "description"):
        if not isinstance(meta.get(key), str) or not meta[key].strip():
            raise SkillFileError(f"the front matter needs '{key}', a non-empty string")
    body = {key: meta[key] for key in FRONT_MATTER_KEYS if key in meta}
    if isinstance(body.get("tags"), str):
        body["tags"] = [t.strip() for t in body["tags"].split(",") if t.strip()]
    body["content"] = "".join(lines[end + 1 :]).strip("\n")
    try:
        return fields.checked(body)
    except ServiceError as exc:
        raise SkillFileError(exc.message) from None


def import_folder(db: Database, folder: Path) -> list[Outcome]:
    """Every SKILL.md under `folder`, each created or updated (or skipped, saying why)."""
    outcomes = []
    for path in skill_files(folder):
        name = None
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise SkillFileError(f"larger than {MAX_FILE_BYTES} bytes")
            skill = parse(path.read_text(encoding="utf-8"))
            name = skill["name"]
            outcomes.append(Outcome(path, name, store.save_manual(db, skill), True))
        except (SkillFileError, ServiceError, OSError, UnicodeDecodeError) as exc:
            reason = exc.message if isinstance(exc, ServiceError) else str(exc)
            outcomes.append(Outcome(path, name, reason, False))
    return outcomes
