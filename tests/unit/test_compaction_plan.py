"""Compaction's pure parts: `[compaction]` settings with hostile values, where a cut may fall
(never between a call and its result), what the model is sent after a summary, the transcript."""

from __future__ import annotations

import pytest

from app.compaction import plan
from app.settings import Settings, SettingsError
from app.storage.models import Message

MODELS = {
    "local": {
        "provider": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:1/v1",
        "context_window": 32768,
    }
}


def test_compaction_settings_merge_defaults_a_models_window_and_its_own_section():
    config = {
        "models": MODELS,
        "compaction": {"reserve": 1000, "keep_last": 2, "models": {"local": {"reserve": 500}}},
        "roles": {"compactor": "local"},
    }
    s = Settings.from_mapping(config, {})
    local = s.compaction.rules("local")
    assert (local.context_window, local.reserve, local.keep_last, local.threshold) == (32768, 500, 2, 32268)
    assert s.compaction.rules("default").threshold is None  # no window: only the provider's error
    assert s.compaction.compactor == "local"


@pytest.mark.parametrize(
    "section",
    [
        {"reserve": -1},
        {"reserve": True},
        {"keep_last": 10**9},
        {"keep_last": "6"},
        {"context_window": 0},
        {"context_window": 2**70},
        {"context_window": 1.5},
        {"enabled": "yes"},
        {"unknown\x00": 1},
        {"models": []},
        {"models": {"local": "x"}},
        {"models": {"local": {"reserve": "\ud800"}}},
    ],
)
def test_hostile_compaction_settings_are_refused_with_the_key_named(section):
    with pytest.raises(SettingsError, match=r"\[compaction"):
        Settings.from_mapping({"models": MODELS, "compaction": section}, {})


@pytest.mark.parametrize("name", ["nosuch", 3, "\x00", ["local"]])
def test_a_compactor_must_be_a_configured_chat_model(name):
    with pytest.raises(SettingsError, match="compactor"):
        Settings.from_mapping({"models": MODELS, "roles": {"compactor": name}}, {})


def _row(n: int, role: str, **fields) -> Message:
    return Message(id=n, ws_id="w", role=role, content=fields.pop("content", f"m{n}"), **fields)


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}


def test_a_cut_never_separates_a_call_from_its_result():
    rows = [
        _row(1, "user"),
        _row(2, "assistant", tool_calls=[_call("a"), _call("b")]),
        _row(3, "tool", tool_call_id="a", name="bash"),
        _row(4, "tool", tool_call_id="b", name="bash"),
        _row(5, "assistant", tool_calls=[_call("c")]),
        _row(6, "tool", tool_call_id="c", name="bash"),
        _row(7, "assistant"),
    ]
    # keep_last = 4 would cut after row 3, between b's call and its result: the cut moves back
    chosen = plan.cover(rows, keep_last=4)
    assert chosen is not None and [r.id for r in chosen.rows] == [1]
    chosen = plan.cover(rows, keep_last=1)
    assert chosen is not None and [r.id for r in chosen.rows] == [1, 2, 3, 4, 5, 6]
    unanswered = plan.cover(rows[:2], keep_last=0)  # calls still waiting for their results
    assert unanswered is not None and unanswered.rows == [rows[0]]
    assert plan.cover(rows, keep_last=7) is None


def test_the_model_sees_the_summary_covering_the_most_then_what_it_does_not_cover():
    rows = [_row(n, "user") for n in range(1, 6)]
    first = _row(6, "summary", content="S1", covers_from=1, covers_to=2, covers_count=2)
    second = _row(7, "summary", content="S2", covers_from=1, covers_to=4, covers_count=4)
    late_small = _row(8, "summary", content="S0", covers_from=1, covers_to=1, covers_count=1)
    pairs = [(r, {"role": r.role, "content": r.content}) for r in [*rows, first, second, late_small]]
    pairs = [(r, plan.summary_entry(r) if r.role == "summary" else e) for r, e in pairs]
    shown = plan.visible(pairs)
    assert "S2" in shown[0]["content"] and "4 earlier messages" in shown[0]["content"]
    assert [e["content"] for e in shown[1:]] == ["m5"]
    again = plan.cover([*rows, first, second], keep_last=0)
    assert again is not None and again.previous is second and [r.id for r in again.rows] == [5]
    assert (again.first_id, again.last_id, again.count) == (1, 5, 5)


def test_the_transcript_cuts_long_outputs_first_and_keeps_every_message():
    rows = [_row(1, "user", content="short question"), _row(2, "tool", name="bash", content="x" * 100_000)]
    chosen = plan.Cover(None, rows)
    text = plan.transcript(chosen, budget_chars=2000)
    assert "short question" in text and "characters left out" in text and len(text) < 3000
