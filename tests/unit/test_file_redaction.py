"""The file tools' output loses the service's secrets as bash's does: read_file, search, diff_file,
and the approval previews of write_file and edit_file."""

from __future__ import annotations

import pytest

from app.settings import ModelSettings
from app.tools import diff_file, edit_file, read_file, search, write_file
from app.tools.core.base import ToolContext
from app.tools.files.reach import Roots

MODEL_KEY = "sk-model-key-0123456789abcdef"  # held by the service, in no variable of that name
API_TOKEN = "api-token-for-the-service-42"
DB_PASSWORD = "db-password-9876"
LEAKED = f"model={MODEL_KEY}\ntoken={API_TOKEN}\ndb=postgresql://app:{DB_PASSWORD}@db/app\n"


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    monkeypatch.setenv("TURNSTONE_API_TOKEN", API_TOKEN)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://app:{DB_PASSWORD}@db/app")
    (tmp_path / "leak.txt").write_text(LEAKED)
    model = ModelSettings("m", "openai", "gpt", api_key=MODEL_KEY)
    roots = Roots(read_only=(), never=(), data_root=str(tmp_path / "data"))
    return ToolContext("ws", str(tmp_path), model=model, roots=roots)


def assert_clean(text: str) -> None:
    assert MODEL_KEY not in text and API_TOKEN not in text and DB_PASSWORD not in text
    assert "[redacted]" in text


def test_read_file_shows_the_file_with_the_secrets_redacted(ctx):
    out = read_file.execute(read_file.prepare({"path": "leak.txt"}, ctx).args, ctx).output
    assert out == "   1\tmodel=[redacted]\n   2\ttoken=[redacted]\n   3\tdb=[redacted]"  # the whole URL
    assert_clean(out)


@pytest.mark.parametrize("backend", ["ripgrep", "grep"])
def test_search_shows_matching_lines_with_the_secrets_redacted(ctx, backend):
    rg = search.locate_ripgrep() if backend == "ripgrep" else None
    if backend == "ripgrep" and rg is None:
        pytest.skip("ripgrep is not installed")
    out = search.run({"query": "model|token|db"}, ctx, rg).output
    assert out.splitlines()[0] == "leak.txt:1: model=[redacted]"
    assert_clean(out)


def test_search_for_the_secret_itself_does_not_echo_it(ctx):
    out = search.run({"query": MODEL_KEY[:12]}, ctx, None).output
    assert out == "leak.txt:1: model=[redacted]"


def test_diff_file_redacts_both_sides(ctx):
    args = diff_file.prepare({"path_a": "leak.txt", "content_b": f"model={MODEL_KEY}x\n"}, ctx).args
    out = diff_file.execute(args, ctx).output
    assert "-token=[redacted]" in out
    assert_clean(out)


def test_the_write_and_edit_previews_redact_the_file_they_show(ctx):
    ctx.read_paths.add(str(ctx.working_dir) + "/leak.txt")
    write = write_file.prepare({"path": "leak.txt", "content": "gone\n"}, ctx)
    assert write.error is None and "-token=[redacted]" in write.preview
    assert_clean(write.preview)
    edit = edit_file.prepare({"path": "leak.txt", "old_string": "token=", "new_string": "t="}, ctx)
    assert edit.error is None and f"-token={API_TOKEN}" not in edit.preview
    assert_clean(edit.preview)
