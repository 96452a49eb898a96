"""Redacting output that arrives in pieces: every split of a secret, and text held no longer than needed."""

from __future__ import annotations

import pytest

from app.tools.core.redaction import StreamRedactor

SECRET = "sk-live-0123456789"
TEXT = f"before\nkey={SECRET} and again {SECRET}\nafter\n"


@pytest.mark.parametrize("cut", range(len(TEXT) + 1))
def test_a_secret_split_between_two_reads_is_redacted_whole(cut):
    r = StreamRedactor([SECRET, "pw-abcdefgh"])
    out = r.feed(TEXT[:cut]) + r.feed(TEXT[cut:]) + r.end()
    assert out == "before\nkey=[redacted] and again [redacted]\nafter\n"


def test_a_secret_fed_one_character_at_a_time_is_redacted():
    r = StreamRedactor([SECRET])
    out = "".join(r.feed(ch) for ch in TEXT) + r.end()
    assert SECRET[:4] not in out and out.count("[redacted]") == 2


def test_a_finished_line_goes_out_at_once():
    r = StreamRedactor([SECRET])
    assert r.feed("ok\nsk-li") == "ok\n"  # the unfinished line could be a secret's start
    assert r.feed("ve-0123456789 done\n") == "[redacted] done\n"


def test_a_long_unfinished_line_is_held_back_only_by_the_longest_secret():
    r = StreamRedactor([SECRET])
    line = "x" * 100
    assert r.feed(line) == "x" * (100 - len(SECRET) + 1)
    assert r.end() == "x" * (len(SECRET) - 1)


def test_a_secret_holding_a_newline_is_redacted_across_reads():
    secret = "-----BEGIN KEY-----\nabcdef0123456789"
    r = StreamRedactor([secret])
    text = f"a\n{secret}\nb\n"
    out = "".join(r.feed(text[i : i + 7]) for i in range(0, len(text), 7)) + r.end()
    assert out == "a\n[redacted]\nb\n"


def test_without_secrets_nothing_is_held():
    r = StreamRedactor([])
    assert r.feed("partial") == "partial"
    assert r.end() == ""
