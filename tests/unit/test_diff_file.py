"""diff_file: against a file or a string, context lines, the refusals, and the read mark."""

import os

import pytest

from app.settings import ToolSettings
from app.tools import diff_file
from app.tools.core.base import ToolContext
from app.tools.core.truncation import truncate


@pytest.fixture
def ctx(tmp_path):
    (tmp_path / "a.txt").write_text("".join(f"{n}\n" for n in range(1, 11)))
    return ToolContext("ws", str(tmp_path))


def diff(ctx, **args):
    prep = diff_file.prepare(args, ctx)
    if prep.error:
        return prep.error
    return diff_file.execute(prep.args, ctx)


def numbers(changed=None):
    return "".join(f"{changed if n == 5 and changed else n}\n" for n in range(1, 11))


def test_diff_against_a_second_file(ctx, tmp_path):
    (tmp_path / "b.txt").write_text(numbers("five"))
    output = diff(ctx, path_a="a.txt", path_b="b.txt").output
    assert output == "--- a.txt\n+++ b.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8"


def test_diff_against_a_string(ctx):
    output = diff(ctx, path_a="a.txt", content_b=numbers("five")).output
    assert output.startswith("--- a.txt\n+++ content_b\n")
    assert "-5\n+five" in output


def test_context_lines_defaults_to_3(ctx):
    lines = diff(ctx, path_a="a.txt", content_b=numbers("five")).output.splitlines()
    assert lines[3:6] == [" 2", " 3", " 4"]


def test_context_lines_is_used(ctx):
    output = diff(ctx, path_a="a.txt", content_b=numbers("five"), context_lines=1).output
    assert "@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6" in output


def test_context_lines_is_clamped_to_20(ctx):
    prep = diff_file.prepare({"path_a": "a.txt", "content_b": "", "context_lines": 500}, ctx)
    assert prep.args["context_lines"] == 20


def test_context_lines_is_clamped_to_0(ctx):
    prep = diff_file.prepare({"path_a": "a.txt", "content_b": "", "context_lines": -4}, ctx)
    assert prep.args["context_lines"] == 0
    assert (
        "@@ -5 +5 @@\n-5\n+five" in diff_file.execute({**prep.args, "content_b": numbers("five")}, ctx).output
    )


def test_context_lines_must_be_a_number(ctx):
    assert "'context_lines' must be a whole number" in diff(
        ctx, path_a="a.txt", content_b="", context_lines="3"
    )


def test_no_differences(ctx, tmp_path):
    outcome = diff(ctx, path_a="a.txt", content_b=numbers())
    assert outcome.output == "(no differences)" and not outcome.is_error


def test_path_b_and_content_b_together_are_refused(ctx):
    assert (
        diff(ctx, path_a="a.txt", path_b="a.txt", content_b="x")
        == "Error: give path_b or content_b, not both"
    )


def test_neither_path_b_nor_content_b_is_refused(ctx):
    assert "needs path_b (a second file) or content_b" in diff(ctx, path_a="a.txt")


def test_empty_content_b_is_a_comparison_with_nothing(ctx):
    assert "-10" in diff(ctx, path_a="a.txt", content_b="").output


def test_binary_file_is_refused(ctx, tmp_path):
    (tmp_path / "b.bin").write_bytes(b"\x00\x01")
    outcome = diff(ctx, path_a="a.txt", path_b="b.bin")
    assert outcome.is_error and "b.bin is a binary file" in outcome.output


def test_binary_path_a_is_refused(ctx, tmp_path):
    (tmp_path / "b.bin").write_bytes(b"\x00\x01")
    assert "binary file" in diff(ctx, path_a="b.bin", content_b="x").output


def test_missing_file_is_an_error(ctx):
    outcome = diff(ctx, path_a="nope.txt", content_b="x")
    assert outcome.is_error and outcome.output == "Error: file not found: nope.txt"


def test_auto_approved(ctx):
    prep = diff_file.prepare({"path_a": "a.txt", "content_b": "x"}, ctx)
    assert prep.needs_approval is False and prep.header == "diff_file a.txt vs the given content"


def test_satisfies_the_read_guard_at_prepare(ctx, tmp_path):
    (tmp_path / "b.txt").write_text("b\n")
    diff_file.prepare({"path_a": "a.txt", "path_b": "b.txt"}, ctx)
    assert ctx.read_paths == {os.path.realpath(tmp_path / "a.txt"), os.path.realpath(tmp_path / "b.txt")}


def test_missing_final_newline_is_marked(ctx, tmp_path):
    (tmp_path / "c.txt").write_text("x")
    assert diff(ctx, path_a="c.txt", content_b="y").output.endswith(
        "-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file"
    )


def test_large_diff_stops_early_at_the_truncation_limit(tmp_path):
    ctx = ToolContext("ws", str(tmp_path), settings=ToolSettings(truncation=500))
    (tmp_path / "big.txt").write_text("".join(f"old {n}\n" for n in range(10_000)))
    output = diff(ctx, path_a="big.txt", content_b="").output
    assert len(output) < 700 and output.endswith(
        "[... diff stopped here: it is longer than 500 characters ...]"
    )


def test_large_diff_fits_within_the_truncation_limit(tmp_path):
    ctx = ToolContext("ws", str(tmp_path), settings=ToolSettings(truncation=1024))
    (tmp_path / "big.txt").write_text("".join(f"old {n}\n" for n in range(10_000)))
    output = diff(ctx, path_a="big.txt", content_b="").output
    assert len(output) <= 1024 and truncate(output, 1024) == output
    assert output.endswith("[... diff stopped here: it is longer than 1,024 characters ...]")
    assert output.splitlines()[-2].startswith("-old ")  # stopped at a whole line


def test_diff_just_within_the_limit_is_whole(tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    whole = "--- a.txt\n+++ content_b\n@@ -1 +1 @@\n-a\n+" + "b" * 990
    ctx = ToolContext("ws", str(tmp_path), settings=ToolSettings(truncation=len(whole) + 1))
    assert diff(ctx, path_a="a.txt", content_b="b" * 990 + "\n").output == whole


def test_missing_path_b_is_an_error(ctx):
    outcome = diff(ctx, path_a="a.txt", path_b="nope.txt")
    assert outcome.is_error and outcome.output == "Error: file not found: nope.txt"


def test_an_empty_path_b_counts_as_not_given(ctx):
    assert diff(ctx, path_a="a.txt", path_b="", content_b=numbers()).output == "(no differences)"


def test_a_missing_file_is_not_marked_read(ctx):
    diff_file.prepare({"path_a": "nope.txt", "content_b": "x"}, ctx)
    assert not ctx.read_paths


@pytest.mark.timeout(10)
def test_a_fifo_is_refused_without_waiting_for_a_writer(ctx, tmp_path):
    os.mkfifo(tmp_path / "pipe")
    outcome = diff(ctx, path_a="a.txt", path_b="pipe")
    assert (
        outcome.is_error and outcome.output == "Error: pipe is not a regular file (a pipe, socket or device)"
    )
