"""Skill fields as the admin API and SKILL.md files give them; rendering; the risk warning."""

from __future__ import annotations

import pytest

from app.errors import BadRequestError
from app.skills.fields import checked, render, risk_warning
from app.skills.importer import SkillFileError, parse

GOOD = (
    "---\nname: pdf-tools\ndescription: Fill PDF forms\ntags: pdf, forms\ncategory: docs\n---\n"
    "\n# PDF\nUse pdftk.\n"
)


def test_a_skill_md_becomes_fields():
    assert parse(GOOD) == {
        "name": "pdf-tools",
        "description": "Fill PDF forms",
        "tags": ["pdf", "forms"],
        "category": "docs",
        "content": "# PDF\nUse pdftk.",
    }


def test_unknown_front_matter_keys_are_ignored_and_a_bom_is_fine():
    text = "\ufeff---\nname: x\ndescription: y\nlicense: MIT\nallowed-tools: [bash]\n---\nbody\n"
    assert parse(text)["name"] == "x"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("# no front matter\n", "no YAML front matter"),
        ("---\nname: x\n", "no closing '---'"),
        ("---\nname: [x\n---\nbody", "not valid YAML"),
        ("---\n- a\n- b\n---\nbody", "must be a mapping"),
        ("---\nname: x\n---\nbody", "needs 'description'"),
        ("---\nname: 7\ndescription: d\n---\nbody", "needs 'name'"),
        ("---\nname: x\ndescription: d\n---\n\n", "content: must not be empty"),
        ("---\nname: bad name\ndescription: d\n---\nbody", "name: must be"),
        ('---\nname: "trailing\\n"\ndescription: d\n---\nbody', "name: must be"),
        ("---\nname: x\ndescription: d\nrisk_level: extreme\n---\nbody", "risk_level: must be one of"),
        ("---\nname: x\ndescription: d\ntags: {a: b}\n---\nbody", "tags: expected a list"),
        ("---\nname: !!python/object:os.system x\ndescription: d\n---\nb", "not valid YAML"),
        ("---\n" + "a: " + "[" * 5000 + "\n---\nb", "not valid YAML"),
    ],
)
def test_bad_skill_files_say_why(text, error):
    with pytest.raises(SkillFileError, match=error.replace("(", r"\(").replace("[", r"\[")):
        parse(text)


def test_checked_refuses_fields_a_person_may_not_set():
    with pytest.raises(BadRequestError, match="readonly: not a skill field"):
        checked({"name": "x", "content": "y", "readonly": True})
    assert checked({"risk_level": "high"}, partial=True) == {"risk_level": "high"}


def test_render_fills_the_three_placeholders_only():
    text = "{{model}} {{ ws_id }} {{node_id}} {{other}} {model}"
    assert render(text, "gpt-x", "ws1", "node-a") == "gpt-x ws1 node-a {{other}} {model}"


def test_high_and_critical_risk_carry_a_warning():
    assert risk_warning("s", "low") is None and risk_warning("s", "medium") is None
    assert "rated high risk" in (risk_warning("s", "high") or "")
    assert "rated critical risk" in (risk_warning("s", "critical") or "")
