"""A context window read from a server's /models entry, in each server's spelling; anything else
(a boolean, a string, a number past reason) is no window."""

from __future__ import annotations

import pytest

from app.compaction.window import window_in


@pytest.mark.parametrize(
    ("entry", "window"),
    [
        ({"id": "m", "max_model_len": 32768}, 32768),  # vLLM
        ({"id": "m", "context_length": 8192}, 8192),  # LM Studio, OpenRouter
        ({"id": "m", "meta": {"n_ctx_train": 4096}}, 4096),  # llama.cpp
        ({"id": "m"}, None),
        ({"id": "m", "max_model_len": True}, None),
        ({"id": "m", "max_model_len": "32768"}, None),
        ({"id": "m", "max_model_len": -1}, None),
        ({"id": "m", "max_model_len": 10**12}, None),
        ({"id": "m", "meta": "n_ctx_train"}, None),
    ],
)
def test_a_window_is_read_in_each_spelling_and_nothing_else(entry, window):
    assert window_in(entry) == window
