"""write_file: overwrite and append, parent folders, approval, the unread-overwrite warning."""

import os

import pytest

from app.tools import write_file
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import prepare_call
from app.tools.core.registry import build_registry


@pytest.fixture
def ctx(tmp_path):
    return ToolContext("ws", str(tmp_path))


def write(ctx, **args):
    prep = write_file.prepare(args, ctx)
    if prep.error:
        return prep.error
    return write_file.execute(prep.args, ctx).output


def test_creates_a_new_file(ctx, tmp_path):
    assert write(ctx, path="new.txt", content="hello\n") == "Wrote 6 bytes to new.txt (new file)"
    assert (tmp_path / "new.txt").read_text() == "hello\n"


def test_overwrite_is_the_default_and_replaces_the_file(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("old content\n")
    assert write(ctx, path="f.txt", content="new\n") == "Wrote 4 bytes to f.txt"
    assert (tmp_path / "f.txt").read_text() == "new\n"


def test_append_adds_to_the_end(ctx, tmp_path):
    (tmp_path / "log.txt").write_text("one\n")
    assert write(ctx, path="log.txt", content="two\n", mode="append") == "Appended 4 bytes to log.txt"
    assert (tmp_path / "log.txt").read_text() == "one\ntwo\n"


def test_append_creates_a_missing_file(ctx, tmp_path):
    write(ctx, path="log.txt", content="first\n", mode="append")
    assert (tmp_path / "log.txt").read_text() == "first\n"


def test_parent_folders_are_created(ctx, tmp_path):
    write(ctx, path="a/b/c/deep.txt", content="x")
    assert (tmp_path / "a" / "b" / "c" / "deep.txt").read_text() == "x"


def test_empty_content_makes_an_empty_file(ctx, tmp_path):
    write(ctx, path="empty.txt", content="")
    assert (tmp_path / "empty.txt").read_bytes() == b""


def test_content_is_written_exactly(ctx, tmp_path):
    write(ctx, path="f.txt", content="crlf\r\nünïcödé\n")
    assert (tmp_path / "f.txt").read_bytes() == "crlf\r\nünïcödé\n".encode()


def test_needs_approval(ctx):
    prep = write_file.prepare({"path": "f.txt", "content": "x"}, ctx)
    assert prep.needs_approval is True and prep.header == "write_file f.txt (overwrite)"


def test_prepare_does_not_write(ctx, tmp_path):
    write_file.prepare({"path": "f.txt", "content": "x"}, ctx)
    assert not (tmp_path / "f.txt").exists()


def test_preview_of_a_new_file_shows_its_content(ctx):
    prep = write_file.prepare({"path": "f.txt", "content": "line 1\nline 2\n"}, ctx)
    assert prep.preview == "Creates f.txt (2 lines, 14 bytes):\nline 1\nline 2\n"


def test_preview_of_an_overwrite_is_a_diff(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("one\ntwo\n")
    ctx.read_paths.add(str(tmp_path / "f.txt"))
    prep = write_file.prepare({"path": "f.txt", "content": "one\n2\n"}, ctx)
    assert "WARNING" not in prep.preview
    assert "--- f.txt\n+++ f.txt\n" in prep.preview and "-two\n+2\n" in prep.preview


def test_overwriting_a_never_read_file_is_flagged_in_the_preview(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("precious\n")
    prep = write_file.prepare({"path": "f.txt", "content": "gone\n"}, ctx)
    assert prep.preview.startswith(
        "WARNING: f.txt already exists and has not been read in this workstream; "
        "its current content will be replaced unseen."
    )


def test_appending_to_a_never_read_file_is_not_flagged(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("kept\n")
    prep = write_file.prepare({"path": "f.txt", "content": "more\n", "mode": "append"}, ctx)
    assert "WARNING" not in prep.preview and prep.preview.startswith(
        "Appends 1 line, 5 bytes to the end of f.txt"
    )


def test_preview_of_an_identical_overwrite_says_so(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("same\n")
    ctx.read_paths.add(str(tmp_path / "f.txt"))
    assert (
        "(no change to its content)"
        in write_file.prepare({"path": "f.txt", "content": "same\n"}, ctx).preview
    )


def test_preview_of_replacing_a_binary_file(ctx, tmp_path):
    (tmp_path / "f.bin").write_bytes(b"\x00\x01")
    assert (
        "Replaces a binary file of 2 bytes"
        in write_file.prepare({"path": "f.bin", "content": "t"}, ctx).preview
    )


def test_marks_the_path_as_read_once_written(ctx, tmp_path):
    prep = write_file.prepare({"path": "f.txt", "content": "x"}, ctx)
    assert not ctx.read_paths
    write_file.execute(prep.args, ctx)
    assert ctx.read_paths == {os.path.realpath(tmp_path / "f.txt")}


def test_invalid_mode_is_refused(ctx):
    assert write(ctx, path="f.txt", content="x", mode="prepend") == (
        "Error: 'mode' must be 'overwrite' or 'append', not 'prepend'"
    )


def test_missing_content_is_refused(ctx):
    assert "needs a 'content' string" in write(ctx, path="f.txt")


def test_missing_path_is_refused(ctx):
    assert write(ctx, content="x") == "Error: write_file needs a non-empty 'path' string"


def test_a_directory_is_refused(ctx, tmp_path):
    (tmp_path / "sub").mkdir()
    prep = write_file.prepare({"path": "sub", "content": "x"}, ctx)
    assert prep.error == "Error: sub is a directory, not a file" and prep.needs_approval is False


def test_relative_paths_resolve_against_the_working_directory(ctx, tmp_path, monkeypatch):
    monkeypatch.chdir("/")
    write(ctx, path="rel.txt", content="x")
    assert (tmp_path / "rel.txt").exists()


def test_append_creates_missing_parent_folders(ctx, tmp_path):
    write(ctx, path="logs/today/run.log", content="started\n", mode="append")
    assert (tmp_path / "logs" / "today" / "run.log").read_text() == "started\n"


def test_a_new_file_gets_the_usual_permissions(ctx, tmp_path):
    old = os.umask(0o027)
    try:
        write(ctx, path="f.txt", content="x")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "f.txt").st_mode & 0o777 == 0o640


def test_overwrite_keeps_the_files_permissions(ctx, tmp_path):
    (tmp_path / "secret.txt").write_text("old\n")
    os.chmod(tmp_path / "secret.txt", 0o600)
    write(ctx, path="secret.txt", content="new\n")
    assert os.stat(tmp_path / "secret.txt").st_mode & 0o777 == 0o600


def test_overwrite_leaves_no_temporary_file_behind(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("old\n")
    write(ctx, path="f.txt", content="new\n")
    assert os.listdir(tmp_path) == ["f.txt"]


@pytest.mark.timeout(10)
def test_a_fifo_is_refused_without_waiting_for_a_reader(ctx, tmp_path):
    os.mkfifo(tmp_path / "pipe")
    for mode in ("overwrite", "append"):
        prep = write_file.prepare({"path": "pipe", "content": "x", "mode": mode}, ctx)
        assert prep.error == "Error: pipe is not a regular file (a pipe, socket or device)"


def test_a_parent_that_is_a_file_is_an_error(ctx, tmp_path):
    (tmp_path / "notes").write_text("a file\n")
    prep = write_file.prepare({"path": "notes/today.txt", "content": "x"}, ctx)
    outcome = write_file.execute(prep.args, ctx)
    assert outcome.is_error and outcome.output.startswith("Error: could not write notes/today.txt:")
    assert not ctx.read_paths


def test_an_appended_file_counts_as_read(ctx, tmp_path):
    prep = write_file.prepare({"path": "log.txt", "content": "x", "mode": "append"}, ctx)
    write_file.execute(prep.args, ctx)
    assert ctx.read_paths == {os.path.realpath(tmp_path / "log.txt")}


def test_a_bare_string_argument_is_the_content(ctx):
    registry = build_registry()
    call = prepare_call(registry, "c1", "write_file", "just text", ctx)
    assert call.args == {"content": "just text"}
    assert call.error == "Error: write_file needs a non-empty 'path' string"


# -- text only: what is approved is what is written --------------------------------------


def test_content_with_a_nul_is_refused_and_points_to_bash(ctx, tmp_path):
    prep = write_file.prepare({"path": "n.bin", "content": "a\x00b"}, ctx)
    assert prep.error == (
        "Error: 'content' contains a NUL character; write_file handles text only, so write binary "
        "content with bash (printf with \\x escapes, or base64 -d)"
    )
    assert prep.needs_approval is False
    assert not (tmp_path / "n.bin").exists()


@pytest.mark.parametrize("surrogate", ["\ud800", "\udcff", "\udfff"])
def test_content_with_a_lone_surrogate_is_refused(ctx, tmp_path, surrogate):
    prep = write_file.prepare({"path": "s.txt", "content": f"x{surrogate}y"}, ctx)
    code = f"U+{ord(surrogate):04X}"
    assert prep.error is not None
    assert prep.error.startswith(
        f"Error: 'content' contains a lone surrogate ({code}), which is not a character"
    )
    assert not (tmp_path / "s.txt").exists()


def test_a_path_with_a_lone_surrogate_is_refused(ctx, tmp_path):
    prep = write_file.prepare({"path": "a\udcffb.txt", "content": "x"}, ctx)
    assert (
        prep.error
        == "Error: 'path' contains a lone surrogate (U+DCFF), which is not a character; send the path as text"
    )
    assert os.listdir(tmp_path) == []


def test_text_that_only_looks_like_an_escape_is_written_as_sent(ctx, tmp_path):
    text = "literal \\x00 and \\u0000, U+FFFD \ufffd, an emoji \U0001f600, \x01\x1b[0m\x7f\u2028\ufeff\n"
    assert write(ctx, path="t.txt", content=text).startswith("Wrote ")
    assert (tmp_path / "t.txt").read_bytes() == text.encode("utf-8")
