"""edit_file: every rule of its spec section and RESOLUTIONS.md, on real files in tmp_path."""

import errno
import os

import pytest

from app.tools import diff_file, edit_file, read_file, write_file
from app.tools.core.base import ToolContext


@pytest.fixture
def ctx(tmp_path):
    return ToolContext("ws", str(tmp_path))


def make(ctx, name, text, read=True):
    path = os.path.join(ctx.working_dir, name)
    with open(path, "w", newline="") as file:
        file.write(text)
    if read:
        ctx.read_paths.add(os.path.realpath(path))
    return path


def content(path):
    with open(path, newline="") as file:
        return file.read()


def edit(ctx, **args):
    """Prepare then execute; the prepared refusal when there is one."""
    prep = edit_file.prepare({"path": "f.txt", **args}, ctx)
    if prep.error:
        return prep.error
    return edit_file.execute(prep.args, ctx).output


def test_single_replacement(ctx):
    path = make(ctx, "f.txt", "alpha\nbeta\ngamma\n")
    assert edit(ctx, old_string="beta", new_string="BETA") == "Edited f.txt: replaced 1 occurrence at line 2."
    assert content(path) == "alpha\nBETA\ngamma\n"


def test_new_string_may_be_empty_to_delete(ctx):
    path = make(ctx, "f.txt", "keep\ndrop\n")
    edit(ctx, old_string="drop\n", new_string="")
    assert content(path) == "keep\n"


def test_needs_approval_and_the_preview_is_a_unified_diff(ctx):
    make(ctx, "f.txt", "one\ntwo\nthree\n")
    prep = edit_file.prepare({"path": "f.txt", "old_string": "two", "new_string": "2"}, ctx)
    assert prep.needs_approval is True and prep.error is None
    assert prep.header == "edit_file f.txt"
    assert "--- f.txt\n+++ f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n" in prep.preview


def test_prepare_does_not_write(ctx):
    path = make(ctx, "f.txt", "one\n")
    edit_file.prepare({"path": "f.txt", "old_string": "one", "new_string": "1"}, ctx)
    assert content(path) == "one\n"


def test_not_found_is_refused(ctx):
    make(ctx, "f.txt", "alpha\n")
    error = edit(ctx, old_string="omega", new_string="x")
    assert error.startswith("Error: old_string was not found in f.txt")


def test_several_matches_are_refused_with_their_line_numbers(ctx):
    path = make(ctx, "f.txt", "x = 1\ny = 2\nx = 1\n\nx = 1\n")
    error = edit(ctx, old_string="x = 1", new_string="x = 0")
    assert "occurs 3 times in f.txt, at lines 1, 3, 5" in error
    assert "near_line" in error and "replace_all" in error
    assert content(path) == "x = 1\ny = 2\nx = 1\n\nx = 1\n"


def test_overlapping_occurrences_are_counted(ctx):
    make(ctx, "f.txt", "aaa\n")
    assert "occurs 2 times" in edit(ctx, old_string="aa", new_string="b")


def test_identical_strings_are_refused(ctx):
    make(ctx, "f.txt", "same\n")
    assert "identical" in edit(ctx, old_string="same", new_string="same")


def test_empty_old_string_is_refused(ctx):
    make(ctx, "f.txt", "text\n")
    assert "'old_string' must be a non-empty string" in edit(ctx, old_string="", new_string="x")


def test_missing_new_string_is_refused(ctx):
    make(ctx, "f.txt", "text\n")
    assert "'new_string' must be a string" in edit(ctx, old_string="text")


def test_neither_single_nor_batch_is_refused(ctx):
    make(ctx, "f.txt", "text\n")
    assert "needs old_string and new_string, or an edits list" in edit(ctx)


def test_near_line_picks_the_closest_occurrence(ctx):
    path = make(ctx, "f.txt", "v\n\n\n\nv\n\n\n\n\nv\n")  # lines 1, 5, 10
    edit(ctx, old_string="v", new_string="W", near_line=8)
    assert content(path) == "v\n\n\n\nv\n\n\n\n\nW\n"


def test_near_line_tie_goes_to_the_earlier_occurrence(ctx):
    path = make(ctx, "f.txt", "v\n\nv\n\nv\n")  # lines 1, 3, 5; line 4 is 1 from both 3 and 5
    edit(ctx, old_string="v", new_string="W", near_line=4)
    assert content(path) == "v\n\nW\n\nv\n"


def test_near_line_inside_a_multiline_occurrence_counts_as_distance_zero(ctx):
    path = make(ctx, "f.txt", "a\nb\nc\n" * 3)  # "a\nb\nc" spans lines 1-3, 4-6, 7-9
    edit(ctx, old_string="a\nb\nc", new_string="X", near_line=6)
    assert content(path) == "a\nb\nc\nX\na\nb\nc\n"


def test_near_line_with_a_single_occurrence_uses_it(ctx):
    path = make(ctx, "f.txt", "one\ntwo\n")
    edit(ctx, old_string="one", new_string="1", near_line=200)
    assert content(path) == "1\ntwo\n"


def test_near_line_must_be_a_positive_line_number(ctx):
    make(ctx, "f.txt", "one\n")
    assert "'near_line' must be a line number" in edit(ctx, old_string="one", new_string="1", near_line=0)


def test_replace_all_replaces_every_occurrence(ctx):
    path = make(ctx, "f.txt", "x x\nx\n")
    assert edit(ctx, old_string="x", new_string="y", replace_all=True) == (
        "Edited f.txt: replaced all 3 occurrences of old_string."
    )
    assert content(path) == "y y\ny\n"


def test_replace_all_preview_shows_the_occurrence_count(ctx):
    make(ctx, "f.txt", "x x\nx\n")
    prep = edit_file.prepare(
        {"path": "f.txt", "old_string": "x", "new_string": "y", "replace_all": True}, ctx
    )
    assert prep.preview.startswith("replaced all 3 occurrences")


def test_replace_all_not_found_is_refused(ctx):
    make(ctx, "f.txt", "text\n")
    assert "was not found" in edit(ctx, old_string="zzz", new_string="y", replace_all=True)


def test_replace_all_cannot_combine_with_near_line(ctx):
    make(ctx, "f.txt", "x\n")
    error = edit(ctx, old_string="x", new_string="y", replace_all=True, near_line=1)
    assert error == "Error: replace_all cannot be combined with near_line"


def test_replace_all_cannot_combine_with_edits(ctx):
    make(ctx, "f.txt", "x\n")
    error = edit(ctx, edits=[{"old_string": "x", "new_string": "y"}], replace_all=True)
    assert error == "Error: replace_all cannot be combined with edits"


def test_single_and_batch_together_are_refused(ctx):
    make(ctx, "f.txt", "x\n")
    error = edit(ctx, old_string="x", new_string="y", edits=[{"old_string": "x", "new_string": "z"}])
    assert "not both" in error


def test_batch_applies_every_edit(ctx):
    path = make(ctx, "f.txt", "one\ntwo\nthree\n")
    output = edit(
        ctx,
        edits=[{"old_string": "three", "new_string": "3"}, {"old_string": "one", "new_string": "1"}],
    )
    assert output == "Edited f.txt: applied 2 edits (at lines 1, 3)."
    assert content(path) == "1\ntwo\n3\n"


def test_batch_is_validated_against_the_original_content(ctx):
    # The second edit's text exists only after the first is applied: refused, not chained.
    path = make(ctx, "f.txt", "one\n")
    error = edit(
        ctx, edits=[{"old_string": "one", "new_string": "two"}, {"old_string": "two", "new_string": "3"}]
    )
    assert error.startswith("Error: edit 2: old_string was not found")
    assert content(path) == "one\n"


def test_batch_is_atomic_when_one_edit_fails(ctx):
    path = make(ctx, "f.txt", "one\ntwo\n")
    error = edit(
        ctx, edits=[{"old_string": "one", "new_string": "1"}, {"old_string": "nine", "new_string": "9"}]
    )
    assert "edit 2:" in error
    assert content(path) == "one\ntwo\n"


def test_batch_overlapping_edits_are_refused(ctx):
    path = make(ctx, "f.txt", "abcdef\n")
    error = edit(
        ctx, edits=[{"old_string": "abcd", "new_string": "X"}, {"old_string": "cdef", "new_string": "Y"}]
    )
    assert error == "Error: edits 1 and 2 overlap in f.txt (lines 1 and 1); merge them into one edit"
    assert content(path) == "abcdef\n"


def test_batch_two_edits_of_the_same_text_overlap(ctx):
    make(ctx, "f.txt", "abc\n")
    error = edit(ctx, edits=[{"old_string": "b", "new_string": "X"}, {"old_string": "b", "new_string": "Y"}])
    assert "overlap" in error


def test_batch_touching_edits_are_fine(ctx):
    path = make(ctx, "f.txt", "abcdef\n")
    edit(ctx, edits=[{"old_string": "abc", "new_string": "X"}, {"old_string": "def", "new_string": "Y"}])
    assert content(path) == "XY\n"


def test_batch_is_applied_in_reverse_position_order(ctx):
    # Growing an early edit must not shift where a later one lands.
    path = make(ctx, "f.txt", "a-b-c\n")
    edit(
        ctx,
        edits=[
            {"old_string": "a", "new_string": "AAAAAA"},
            {"old_string": "c", "new_string": "C"},
            {"old_string": "b", "new_string": ""},
        ],
    )
    assert content(path) == "AAAAAA--C\n"


def test_batch_entries_take_near_line(ctx):
    path = make(ctx, "f.txt", "v\nv\nv\n")
    edit(
        ctx,
        edits=[
            {"old_string": "v", "new_string": "1", "near_line": 1},
            {"old_string": "v", "new_string": "3", "near_line": 3},
        ],
    )
    assert content(path) == "1\nv\n3\n"


def test_batch_entry_with_several_matches_is_refused(ctx):
    make(ctx, "f.txt", "v\nv\n")
    assert "edit 1: old_string occurs 2 times" in edit(ctx, edits=[{"old_string": "v", "new_string": "w"}])


def test_batch_entry_with_identical_strings_is_refused(ctx):
    make(ctx, "f.txt", "v\n")
    assert "edit 1: old_string and new_string are identical" in edit(
        ctx, edits=[{"old_string": "v", "new_string": "v"}]
    )


def test_batch_entry_with_an_unknown_key_is_refused(ctx):
    make(ctx, "f.txt", "v\n")
    error = edit(ctx, edits=[{"old_string": "v", "new_string": "w", "replace_all": True}])
    assert "edit 1: unknown key(s) replace_all" in error


def test_empty_batch_is_refused(ctx):
    make(ctx, "f.txt", "v\n")
    assert "'edits' must be a non-empty list" in edit(ctx, edits=[])


def test_unread_path_is_refused(ctx):
    path = make(ctx, "f.txt", "text\n", read=False)
    assert edit(ctx, old_string="text", new_string="x") == "Error: must read_file f.txt before editing it"
    assert content(path) == "text\n"


def test_read_guard_matches_the_resolved_path(ctx, tmp_path):
    path = make(ctx, "f.txt", "text\n")
    prep = edit_file.prepare(
        {"path": str(tmp_path / "." / "f.txt"), "old_string": "text", "new_string": "x"}, ctx
    )
    assert prep.error is None
    edit_file.execute(prep.args, ctx)
    assert content(path) == "x\n"


def test_refusals_need_no_approval(ctx):
    make(ctx, "f.txt", "text\n", read=False)
    prep = edit_file.prepare({"path": "f.txt", "old_string": "text", "new_string": "x"}, ctx)
    assert prep.needs_approval is False and prep.error


def test_missing_file_is_refused(ctx, tmp_path):
    ctx.read_paths.add(str(tmp_path / "gone.txt"))
    prep = edit_file.prepare({"path": "gone.txt", "old_string": "a", "new_string": "b"}, ctx)
    assert prep.error == "Error: file not found: gone.txt"


def test_binary_file_is_refused(ctx, tmp_path):
    (tmp_path / "b.bin").write_bytes(b"ab\x00cd")
    ctx.read_paths.add(str(tmp_path / "b.bin"))
    prep = edit_file.prepare({"path": "b.bin", "old_string": "ab", "new_string": "x"}, ctx)
    assert "binary file" in prep.error


def test_relative_paths_resolve_against_the_working_directory(ctx, tmp_path):
    (tmp_path / "sub").mkdir()
    path = make(ctx, "sub/f.txt", "one\n")
    prep = edit_file.prepare({"path": "sub/f.txt", "old_string": "one", "new_string": "1"}, ctx)
    edit_file.execute(prep.args, ctx)
    assert content(path) == "1\n"


def test_execute_rereads_the_file_and_applies_to_what_is_there(ctx):
    path = make(ctx, "f.txt", "top\nmiddle\n")
    prep = edit_file.prepare({"path": "f.txt", "old_string": "middle", "new_string": "MIDDLE"}, ctx)
    with open(path, "a") as file:
        file.write("appended after approval\n")
    assert edit_file.execute(prep.args, ctx).is_error is False
    assert content(path) == "top\nMIDDLE\nappended after approval\n"


def test_execute_refuses_when_the_file_changed_so_the_edit_no_longer_applies(ctx):
    path = make(ctx, "f.txt", "old text\n")
    prep = edit_file.prepare({"path": "f.txt", "old_string": "old text", "new_string": "new"}, ctx)
    with open(path, "w") as file:
        file.write("rewritten by someone else\n")
    outcome = edit_file.execute(prep.args, ctx)
    assert outcome.is_error
    assert outcome.output.startswith("Error: f.txt changed after this edit was prepared")
    assert "left unchanged" in outcome.output
    assert content(path) == "rewritten by someone else\n"


def test_execute_refuses_when_the_change_made_the_match_ambiguous(ctx):
    path = make(ctx, "f.txt", "x\n")
    prep = edit_file.prepare({"path": "f.txt", "old_string": "x", "new_string": "y"}, ctx)
    with open(path, "w") as file:
        file.write("x\nx\n")
    outcome = edit_file.execute(prep.args, ctx)
    assert outcome.is_error and "occurs 2 times" in outcome.output
    assert content(path) == "x\nx\n"


def test_execute_refuses_when_the_file_was_deleted(ctx):
    path = make(ctx, "f.txt", "x\n")
    prep = edit_file.prepare({"path": "f.txt", "old_string": "x", "new_string": "y"}, ctx)
    os.unlink(path)
    outcome = edit_file.execute(prep.args, ctx)
    assert outcome.is_error and "file not found" in outcome.output


def test_writes_once(ctx, monkeypatch):
    make(ctx, "f.txt", "a b c\n")
    writes = []
    real = edit_file.save_text
    monkeypatch.setattr(edit_file, "save_text", lambda f, n, t: (writes.append(t), real(f, n, t)))
    edit(ctx, edits=[{"old_string": "a", "new_string": "1"}, {"old_string": "c", "new_string": "3"}])
    assert writes == ["1 b 3\n"]


def test_line_endings_and_undecodable_bytes_are_kept(ctx, tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"caf\xe9\r\nold\r\n")
    ctx.read_paths.add(str(path))
    edit(ctx, old_string="old", new_string="new")
    assert path.read_bytes() == b"caf\xe9\r\nnew\r\n"


def test_file_mode_is_kept(ctx):
    path = make(ctx, "f.sh", "echo old\n")
    os.chmod(path, 0o755)
    prep = edit_file.prepare({"path": "f.sh", "old_string": "old", "new_string": "new"}, ctx)
    edit_file.execute(prep.args, ctx)
    assert os.stat(path).st_mode & 0o777 == 0o755


def test_file_without_final_newline_diffs_cleanly(ctx):
    make(ctx, "f.txt", "one\ntwo")
    prep = edit_file.prepare({"path": "f.txt", "old_string": "two", "new_string": "2"}, ctx)
    assert "-two\n\\ No newline at end of file\n+2\n\\ No newline at end of file" in prep.preview


def test_read_file_prepared_in_the_same_batch_satisfies_the_guard(ctx):
    path = make(ctx, "f.txt", "one\n", read=False)
    read = read_file.prepare({"path": "f.txt"}, ctx)
    change = edit_file.prepare({"path": "f.txt", "old_string": "one", "new_string": "1"}, ctx)
    assert change.error is None
    read_file.execute(read.args, ctx)
    edit_file.execute(change.args, ctx)
    assert content(path) == "1\n"


def test_diff_file_satisfies_the_guard(ctx):
    path = make(ctx, "f.txt", "one\n", read=False)
    diff_file.prepare({"path_a": "f.txt", "content_b": "1\n"}, ctx)
    assert edit(ctx, old_string="one", new_string="1") == "Edited f.txt: replaced 1 occurrence at line 1."
    assert content(path) == "1\n"


def test_write_file_satisfies_the_guard(ctx):
    write_file.execute({"path": "f.txt", "content": "one\n", "mode": "overwrite"}, ctx)
    assert edit(ctx, old_string="one", new_string="1") == "Edited f.txt: replaced 1 occurrence at line 1."


def test_many_matches_list_the_first_20_lines_and_count_the_rest(ctx):
    make(ctx, "f.txt", "x\n" * 25)
    error = edit(ctx, old_string="x", new_string="y")
    lines = ", ".join(str(n) for n in range(1, 21))
    assert f"occurs 25 times in f.txt, at lines {lines} and 5 more;" in error


def test_replace_all_replaces_non_overlapping_occurrences(ctx):
    path = make(ctx, "f.txt", "aaa\n")
    assert edit(ctx, old_string="aa", new_string="b", replace_all=True).endswith(
        "replaced all 1 occurrence of old_string."
    )
    assert content(path) == "ba\n"


@pytest.mark.parametrize("edits", ["not a list", {"old_string": "v", "new_string": "w"}])
def test_edits_must_be_a_list(ctx, edits):
    make(ctx, "f.txt", "v\n")
    assert "'edits' must be a non-empty list" in edit(ctx, edits=edits)


def test_each_edit_must_be_an_object(ctx):
    make(ctx, "f.txt", "v\n")
    assert "edit 1: each edit must be an object" in edit(ctx, edits=["v"])


def test_execute_refuses_when_the_file_became_binary(ctx):
    path = make(ctx, "f.txt", "x\n")
    prep = edit_file.prepare({"path": "f.txt", "old_string": "x", "new_string": "y"}, ctx)
    with open(path, "wb") as file:
        file.write(b"x\x00\n")
    outcome = edit_file.execute(prep.args, ctx)
    assert outcome.is_error and "is a binary file" in outcome.output
    assert content(path) == "x\x00\n"


def test_a_failed_write_is_an_error_and_leaves_the_file(ctx, monkeypatch):
    path = make(ctx, "f.txt", "x\n")
    prep = edit_file.prepare({"path": "f.txt", "old_string": "x", "new_string": "y"}, ctx)

    def full_disk(_folder, _name, _text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(edit_file, "save_text", full_disk)
    outcome = edit_file.execute(prep.args, ctx)
    assert outcome.is_error and outcome.output == "Error: could not write f.txt: No space left on device"
    assert content(path) == "x\n"


@pytest.mark.timeout(10)
def test_a_fifo_is_refused_without_waiting_for_a_writer(ctx, tmp_path):
    os.mkfifo(tmp_path / "pipe")
    ctx.read_paths.add(str(tmp_path / "pipe"))
    prep = edit_file.prepare({"path": "pipe", "old_string": "a", "new_string": "b"}, ctx)
    assert prep.error == "Error: pipe is not a regular file (a pipe, socket or device)"


def test_lines_copied_from_read_file_match_a_crlf_file_and_keep_its_endings(ctx):
    path = make(ctx, "f.txt", "one\r\ntwo\r\nthree\r\n")
    shown = read_file.execute({"path": "f.txt"}, ctx).output
    assert "\r" not in shown  # what the model copies from has bare line breaks
    result = edit(ctx, old_string="one\ntwo\n", new_string="ONE\nTWO\nextra\n")
    assert result == "Edited f.txt: replaced 1 occurrence at line 1."
    assert content(path) == "ONE\r\nTWO\r\nextra\r\nthree\r\n"


def test_batch_and_replace_all_follow_crlf_line_endings_too(ctx):
    path = make(ctx, "f.txt", "a\r\nb\r\na\r\nb\r\n")
    edit(ctx, old_string="a\nb", new_string="c\nd", replace_all=True)
    assert content(path) == "c\r\nd\r\nc\r\nd\r\n"
    edit(ctx, edits=[{"old_string": "c\nd\nc", "new_string": "e\nf"}])
    assert content(path) == "e\r\nf\r\nd\r\n"


def test_an_edit_that_carries_a_cr_is_matched_as_written(ctx):
    path = make(ctx, "f.txt", "a\r\nb\r\n")
    assert "not found" in edit(ctx, old_string="a\nb\r\n", new_string="x")
    assert content(path) == "a\r\nb\r\n"


def test_a_file_with_mixed_line_endings_is_matched_as_written(ctx):
    path = make(ctx, "f.txt", "one\r\ntwo\nthree\r\n")
    assert "not found" in edit(ctx, old_string="one\ntwo", new_string="x")
    edit(ctx, old_string="one\r\ntwo", new_string="x")
    assert content(path) == "x\nthree\r\n"


# -- text only: what is approved is what is written --------------------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ({"old_string": "two", "new_string": "t\x00o"}, "'new_string' contains a NUL character"),
        ({"old_string": "t\x00o", "new_string": "2"}, "'old_string' contains a NUL character"),
        ({"old_string": "two", "new_string": "t\ud83do"}, "'new_string' contains a lone surrogate (U+D83D)"),
        (
            {
                "edits": [
                    {"old_string": "one", "new_string": "1"},
                    {"old_string": "two", "new_string": "\x00"},
                ]
            },
            "edit 2: 'new_string' contains a NUL character",
        ),
        (
            {"edits": [{"old_string": "o\udc80ne", "new_string": "1"}]},
            "edit 1: 'old_string' contains a lone surrogate (U+DC80)",
        ),
    ],
)
def test_nul_or_a_lone_surrogate_in_an_edit_is_refused_and_the_file_untouched(ctx, args, named):
    path = make(ctx, "f.txt", "one\ntwo\n")
    prep = edit_file.prepare({"path": "f.txt", **args}, ctx)
    assert prep.error is not None and prep.error.startswith(f"Error: {named}")
    assert prep.needs_approval is False
    if "NUL" in named:
        assert "edit_file handles text only, so write binary content with bash" in prep.error
    assert content(path) == "one\ntwo\n"


def test_an_edit_keeps_undecodable_bytes_of_the_file_itself(ctx):
    # The refusal is of the arguments: a file's own invalid UTF-8 still survives an edit.
    path = make(ctx, "f.txt", "", read=True)
    with open(path, "wb") as file:
        file.write(b"caf\xe9 one\n")
    assert edit(ctx, old_string="one", new_string="1").startswith("Edited f.txt")
    with open(path, "rb") as file:
        assert file.read() == b"caf\xe9 1\n"
