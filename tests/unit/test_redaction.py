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


# -- with shapes: credentials of known shapes go from the live stream too (app/tools/core/guard.py)

KEY = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78"
BLOCK = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\nqWTHkRKNbWr0\n"
    "-----END RSA PRIVATE KEY-----"
)
SHAPED = f"start\nexport OPENAI_API_KEY={KEY} # set\n{BLOCK}\nend of output\n"
WANTED = "start\nexport OPENAI_API_KEY=[redacted: openai key] # set\n[redacted: private key]\nend of output\n"


@pytest.mark.parametrize("cut", range(0, len(SHAPED) + 1, 3))
def test_a_shaped_credential_split_between_two_reads_goes_whole(cut):
    r = StreamRedactor([], shapes=True)
    assert r.feed(SHAPED[:cut]) + r.feed(SHAPED[cut:]) + r.end() == WANTED


@pytest.mark.parametrize("size", [1, 2, 5, 17, 64])
def test_shaped_credentials_fed_in_small_pieces_never_show(size):
    r = StreamRedactor(["hunter2-hunter2"], shapes=True)
    text = SHAPED + "pw=hunter2-hunter2\n"
    pieces = [r.feed(text[i : i + size]) for i in range(0, len(text), size)] + [r.end()]
    out = "".join(pieces)
    assert out == WANTED + "pw=[redacted]\n"
    for piece in pieces:  # no piece carries a fragment a later redaction would have hidden
        assert "Ab12Cd34" not in piece and "MIIEpAIB" not in piece and "qWTHk" not in piece


def test_a_long_unfinished_line_is_never_cut_inside_a_key():
    r = StreamRedactor([], shapes=True)
    head = "x " * 1000
    released = r.feed(head + KEY[:20])
    assert released and "sk-" not in released  # the key's start is held back, the text before it goes
    assert (released + r.feed(KEY[20:] + " done") + r.end()) == head + "[redacted: openai key] done"


def test_an_unended_key_block_is_held_then_redacted_when_the_stream_ends():
    r = StreamRedactor([], shapes=True)
    assert r.feed("ok\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n") == "ok\n"
    assert r.feed("BgkqhkiG9w0B\n") == ""
    assert r.end() == "[redacted: private key]\n"
