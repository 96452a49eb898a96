"""A fork's copy of its working folder is refused past `fork_copy_max_bytes`, before anything
is copied or made; links are counted as links, not followed."""

from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace

import pytest

from app.engine.life import branches
from app.errors import PayloadTooLargeError
from app.settings import Settings
from app.storage.models import Workstream


def test_a_folder_past_the_limit_is_refused_and_nothing_is_made(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "big.bin").write_bytes(b"x" * 4096)
    data_root = tmp_path / "data"
    settings = Settings()
    settings = dataclasses.replace(
        settings,
        fork_copy_max_bytes=1024,
        sandbox=dataclasses.replace(settings.sandbox, data_root=str(data_root)),
    )
    rt = SimpleNamespace(settings=settings)
    ws = Workstream(id="w1", name="w", working_dir=str(origin))
    with pytest.raises(PayloadTooLargeError) as refused:
        branches._copy_folder(rt, ws, "w2")  # type: ignore[arg-type]
    assert "TURNSTONE_FORK_COPY_MAX_BYTES" in refused.value.message
    assert not data_root.exists()


def test_links_are_counted_not_followed(tmp_path):
    big = tmp_path / "elsewhere"
    big.mkdir()
    (big / "huge.bin").write_bytes(b"x" * 100_000)
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "small.txt").write_text("hi")
    os.symlink(big, folder / "link-to-dir")
    os.symlink(big / "huge.bin", folder / "link-to-file")
    assert branches._size(str(folder), 10_000) < 1_000
