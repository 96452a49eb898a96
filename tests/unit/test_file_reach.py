"""Where the file tools may go: the table of paths the reach module lets through or refuses, the
re-check when a file is opened, the hard-link rule, and the tools refusing before anyone is asked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.sandbox import reach as sandbox_reach
from app.settings import Settings
from app.tools import diff_file, edit_file, open_preview, read_file, search, write_file
from app.tools.core.base import ToolContext
from app.tools.files import reach
from app.tools.files.paths import FileToolError


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """A service's files laid out as in production: the data root holds every workstream's folder;
    the database and the config file sit beside it; a read-only root; a file outside everything."""
    paths = {
        "data": tmp_path / "data",
        "folder": tmp_path / "data" / "alice" / "ws1",
        "other": tmp_path / "data" / "bob" / "ws2",
        "ro": tmp_path / "ro",
        "outside": tmp_path / "outside",
    }
    for path in paths.values():
        path.mkdir(parents=True)
    (paths["other"] / "plan.txt").write_text("bob's plan\n")
    (paths["ro"] / "lib.txt").write_text("shared library text\n")
    (paths["outside"] / "secret.txt").write_text("outside secret\n")
    (tmp_path / "service.db").write_text("database pages\n")
    (tmp_path / "config.toml").write_text('database_url = "sqlite:///service.db"\n')
    (paths["folder"] / "notes.txt").write_text("my notes\n")
    return paths


@pytest.fixture
def settings(tmp_path: Path, place: dict[str, Path]) -> Settings:
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'service.db'}",
        "TURNSTONE_CONFIG": str(tmp_path / "config.toml"),
        "TURNSTONE_DATA_ROOT": str(place["data"]),
    }
    config = {"sandbox": {"read_only_roots": [str(place["ro"]), "/etc", "/usr"]}}
    return Settings.from_mapping(config, env)


@pytest.fixture
def ctx(place: dict[str, Path], settings: Settings) -> ToolContext:
    return ToolContext("ws1", str(place["folder"]), roots=sandbox_reach.Roots.from_settings(settings))


def verdict(path: str, ctx: ToolContext, access: str) -> str:
    try:
        reach.check(path, ctx, access)
    except FileToolError as exc:
        return str(exc)
    return "ok"


# (path, read verdict, write verdict): "ok", or a piece of the refusal the model sees
ROWS = [
    ("notes.txt", "ok", "ok"),
    ("new/deeper/file.txt", "ok", "ok"),
    ("./sub/../notes.txt", "ok", "ok"),
    ("{folder}/notes.txt", "ok", "ok"),
    ("{folder}", "ok", "ok"),
    ("../../../outside/secret.txt", "outside the folders the file tools may read", "outside the workstream"),
    ("{outside}/secret.txt", "outside the folders the file tools may read", "outside the workstream"),
    ("{ro}/lib.txt", "ok", "outside the workstream's folder"),
    ("../../bob/ws2/plan.txt", "service's data folder", "service's data folder"),
    ("{other}/plan.txt", "service's data folder", "service's data folder"),
    ("{data}", "service's data folder", "service's data folder"),
    ("..", "service's data folder", "service's data folder"),
    ("../../../service.db", "service's own files", "service's own files"),
    ("{tmp}/service.db-wal", "service's own files", "service's own files"),
    ("{tmp}/config.toml", "service's own files", "service's own files"),
    ("/proc/self/environ", "kernel's views", "kernel's views"),
    ("/proc/{pid}/environ", "kernel's views", "kernel's views"),
    ("/proc/1/root/etc/passwd", "kernel's views", "kernel's views"),
    ("/sys/kernel/mm", "kernel's views", "kernel's views"),
    ("/etc/shadow", "password or key files", "password or key files"),
    ("/etc/ssh/sshd_config", "password or key files", "password or key files"),
    ("/etc/hostname", "ok", "outside the workstream's folder"),
    ("/", "outside the folders the file tools may read", "outside the workstream's folder"),
]


@pytest.mark.parametrize(("path", "read", "write"), ROWS)
def test_the_table_of_paths(path, read, write, ctx, place, tmp_path):
    given = path.format(pid=os.getpid(), tmp=tmp_path, **place)
    for access, expected in ((reach.READ, read), (reach.WRITE, write)):
        got = verdict(given, ctx, access)
        if expected == "ok":
            assert got == "ok", (access, got)
        else:
            assert got.startswith(f"Error: {given}") and expected in got, (access, got)
            # the refusal says where the tools may go instead
            assert f"They write in the workstream's folder, {place['folder']}, and read there and in" in got


def test_a_link_in_the_folder_pointing_out_is_judged_by_where_it_leads(ctx, place):
    (place["folder"] / "shortcut").symlink_to(place["outside"] / "secret.txt")
    got = verdict("shortcut", ctx, reach.READ)
    assert got.startswith(f"Error: shortcut (which leads to {place['outside']}/secret.txt) is outside")


def test_a_chain_of_links_is_followed_to_its_end(ctx, place):
    (place["folder"] / "c").symlink_to(place["other"])  # into another workstream's folder
    (place["folder"] / "b").symlink_to("c")
    (place["folder"] / "a").symlink_to("b/plan.txt")
    assert "service's data folder" in verdict("a", ctx, reach.READ)
    (place["folder"] / "in").symlink_to("notes.txt")  # a link that stays inside is fine
    assert verdict("in", ctx, reach.READ) == "ok"


def test_a_link_to_a_folder_out_is_refused_for_whatever_lies_below_it(ctx, place):
    (place["folder"] / "up").symlink_to(place["data"])
    assert "service's data folder" in verdict("up/bob/ws2/plan.txt", ctx, reach.READ)


def test_a_folder_that_is_the_whole_data_root_opens_nothing_in_it(settings, place):
    ctx = ToolContext("ws", str(place["data"]), roots=sandbox_reach.Roots.from_settings(settings))
    assert "service's data folder" in verdict("bob/ws2/plan.txt", ctx, reach.READ)


def test_a_folder_that_holds_the_database_still_never_opens_it(settings, tmp_path):
    ctx = ToolContext("ws", str(tmp_path), roots=sandbox_reach.Roots.from_settings(settings))
    assert "service's own files" in verdict("service.db", ctx, reach.READ)
    assert "service's own files" in verdict("config.toml", ctx, reach.WRITE)
    assert verdict("outside/secret.txt", ctx, reach.WRITE) == "ok"


@pytest.mark.parametrize(
    ("path", "expected"),
    [("a\x00b", "cannot be used as a path"), ("a\ud800b", "cannot be used as a path")],
)
def test_a_path_no_system_call_can_take_is_an_error(ctx, path, expected):
    assert expected in verdict(path, ctx, reach.READ)


def test_a_path_of_100_kb_is_an_error_not_a_crash(ctx):
    huge = "a/" * 50_000 + "f.txt"
    prep = read_file.prepare({"path": huge}, ctx)
    assert prep.error is None  # inside the folder: judged by its text; it just is not there
    assert read_file.execute(prep.args, ctx).output.startswith("Error: file not found: a/a/a/")
    climbing = "../" * 33_000 + "etc/shadow"
    refused = read_file.prepare({"path": climbing}, ctx).error
    assert (
        refused is not None
        and "characters) is never opened by the file tools: it is one of the host" in refused
    )
    assert f"({len(climbing):,} characters)" in refused and len(refused) < 2000


def test_the_process_roots_come_from_its_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("TURNSTONE_DATA_ROOT", str(tmp_path / "d"))
    monkeypatch.setenv("TURNSTONE_CONFIG", str(tmp_path / "none.toml"))
    sandbox_reach.process_roots.cache_clear()
    try:
        ctx = ToolContext("ws", str(tmp_path / "d" / "u" / "w"))  # no roots: this process's own
        assert verdict("/proc/self/environ", ctx, reach.READ).startswith("Error: /proc/self/environ")
        assert "service's data folder" in verdict(str(tmp_path / "d" / "u" / "x"), ctx, reach.READ)
        assert verdict("/usr", ctx, reach.READ) == "ok"
    finally:
        sandbox_reach.process_roots.cache_clear()


# -- opened, then judged again ---------------------------------------------------------------


def test_a_link_swapped_in_for_the_file_after_the_check_is_not_followed(ctx, place):
    target = place["folder"] / "notes.txt"
    resolved = reach.check("notes.txt", ctx, reach.READ)
    target.unlink()
    target.symlink_to(place["outside"] / "secret.txt")
    with pytest.raises(FileToolError, match="became a symbolic link after it was checked"):
        reach.open_file(resolved, "notes.txt", ctx)


def test_a_link_swapped_in_for_a_folder_on_the_way_is_caught_by_what_was_opened(ctx, place):
    (place["folder"] / "sub").mkdir()
    (place["folder"] / "sub" / "secret.txt").write_text("mine\n")
    resolved = reach.check("sub/secret.txt", ctx, reach.READ)
    (place["folder"] / "sub").rename(place["folder"] / "sub.old")
    (place["folder"] / "sub").symlink_to(place["outside"])
    with pytest.raises(FileToolError, match="changed while it was being opened"):
        reach.open_file(resolved, "sub/secret.txt", ctx)
    with pytest.raises(FileToolError, match="changed while it was being opened"):
        reach.open_folder(os.path.dirname(resolved), "sub/secret.txt", ctx)
    assert (place["outside"] / "secret.txt").read_text() == "outside secret\n"


def test_folders_are_created_below_the_checked_one_without_following_a_link(ctx, place):
    fd = reach.open_folder(str(place["folder"] / "a" / "b"), "a/b/f.txt", ctx)
    os.close(fd)
    assert (place["folder"] / "a" / "b").is_dir()


def test_a_fifo_swapped_in_is_refused_without_blocking(ctx, place):
    resolved = reach.check("notes.txt", ctx, reach.READ)
    (place["folder"] / "notes.txt").unlink()
    os.mkfifo(place["folder"] / "notes.txt")
    with pytest.raises(FileToolError, match="not a regular file"):
        reach.open_file(resolved, "notes.txt", ctx)


# -- the tools refuse, and refuse before anyone is asked ------------------------------------


def prepared(tool, args, ctx):
    return tool.prepare(args, ctx)


def test_every_file_tool_refuses_a_link_out_at_prepare_without_asking(ctx, place):
    (place["folder"] / "out").symlink_to(place["outside"] / "secret.txt")
    ctx.read_paths.add(str(place["outside"] / "secret.txt"))  # even a path marked as read
    calls = [
        (read_file, {"path": "out"}),
        (write_file, {"path": "out", "content": "pwned\n"}),
        (edit_file, {"path": "out", "old_string": "outside", "new_string": "pwned"}),
        (diff_file, {"path_a": "notes.txt", "path_b": "out"}),
        (search, {"query": "secret", "path": "out"}),
        (open_preview, {"target": "out"}),
    ]
    for tool, args in calls:
        prep = tool.prepare(args, ctx)
        assert prep.error is not None and prep.needs_approval is False, tool.TOOL
        expected = (
            "Error: out is outside the workstream's folder" if tool is open_preview else "Error: out (which"
        )
        assert prep.error.startswith(expected), (tool.TOOL, prep.error)
    assert (place["outside"] / "secret.txt").read_text() == "outside secret\n"


def test_a_link_planted_after_approval_is_refused_at_execute(ctx, place):
    ctx.read_paths.add(str(place["folder"] / "notes.txt"))
    write = write_file.prepare({"path": "notes.txt", "content": "new\n"}, ctx)
    edit = edit_file.prepare({"path": "notes.txt", "old_string": "my", "new_string": "our"}, ctx)
    assert write.error is None and edit.error is None and write.needs_approval
    (place["folder"] / "notes.txt").unlink()
    (place["folder"] / "notes.txt").symlink_to(place["outside"] / "secret.txt")
    for outcome in (write_file.execute(write.args, ctx), edit_file.execute(edit.args, ctx)):
        assert outcome.is_error and "is outside the workstream's folder" in outcome.output
    assert (place["outside"] / "secret.txt").read_text() == "outside secret\n"


def test_a_write_reaching_the_open_through_a_folder_swapped_after_the_check_is_refused(
    ctx, place, monkeypatch
):
    (place["folder"] / "sub").mkdir()
    prep = write_file.prepare({"path": "sub/new.txt", "content": "x\n"}, ctx)
    real_check = reach.check

    def check_then_swap(path, ctx, access):
        resolved = real_check(path, ctx, access)
        (place["folder"] / "sub").rename(place["folder"] / "sub.old")
        (place["folder"] / "sub").symlink_to(place["outside"])
        return resolved

    monkeypatch.setattr(reach, "check", check_then_swap)
    outcome = write_file.execute(prep.args, ctx)
    assert outcome.is_error and "changed while it was being opened" in outcome.output
    assert sorted(p.name for p in place["outside"].iterdir()) == ["secret.txt"]


def test_a_file_with_another_hard_link_is_neither_read_nor_written(ctx, place):
    outside = place["outside"] / "secret.txt"
    os.link(outside, place["folder"] / "linked.txt")
    ctx.read_paths.add(str(place["folder"] / "linked.txt"))
    read = read_file.execute(read_file.prepare({"path": "linked.txt"}, ctx).args, ctx)
    assert read.is_error and read.output.startswith("Error: linked.txt has 2 hard links")
    assert "outside secret" not in read.output
    diff = diff_file.execute(diff_file.prepare({"path_a": "linked.txt", "content_b": ""}, ctx).args, ctx)
    assert diff.is_error and "hard links" in diff.output
    for tool, args in (
        (write_file, {"path": "linked.txt", "content": "pwned\n"}),
        (write_file, {"path": "linked.txt", "content": "pwned\n", "mode": "append"}),
        (edit_file, {"path": "linked.txt", "old_string": "outside", "new_string": "pwned"}),
    ):
        prep = tool.prepare(args, ctx)
        assert prep.error is not None and "has 2 hard links" in prep.error and not prep.needs_approval
    appended = write_file.execute({"path": "linked.txt", "content": "pwned\n", "mode": "append"}, ctx)
    assert appended.is_error and "hard links" in appended.output  # and at execute, if it got there
    found = search.run({"query": "secret"}, ctx, None)
    assert found.output.startswith("(no matches)") and "1 match left out" in found.output
    assert outside.read_text() == "outside secret\n"


def test_a_read_only_root_is_read_and_searched_but_never_written(ctx, place):
    shown = str(place["ro"] / "lib.txt")
    assert read_file.execute(read_file.prepare({"path": shown}, ctx).args, ctx).output == (
        "   1\tshared library text"
    )
    assert search.run({"query": "library", "path": str(place["ro"])}, ctx, None).output == (
        f"{shown}:1: shared library text"
    )
    prep = write_file.prepare({"path": shown, "content": "x"}, ctx)
    assert prep.error is not None and "outside the workstream's folder" in prep.error


def test_search_leaves_out_matches_behind_a_link_and_never_opened_files(ctx, place, settings, tmp_path):
    (place["folder"] / "peek").symlink_to(place["outside"])  # rg and grep -r do not follow it
    (place["folder"] / "mine.txt").write_text("secret of mine\n")
    for rg in ("rg", None):
        assert search.run({"query": "secret"}, ctx, rg).output == "mine.txt:1: secret of mine"
    # a folder holding the database: its matches are dropped, the rest shown
    wide = ToolContext("ws", str(tmp_path), roots=sandbox_reach.Roots.from_settings(settings))
    out = search.run({"query": "database|secret"}, wide, None).output
    assert "service.db" not in out and "database pages" not in out
    assert "outside/secret.txt:1: outside secret" in out and "left out" in out


def test_in_a_read_only_root_only_what_every_user_may_read_is_read(ctx, place):
    private = place["ro"] / "private.key"
    private.write_text("a private key\n")
    private.chmod(0o600)  # the worker may be root: the tools still read no more than anyone may
    out = read_file.execute(read_file.prepare({"path": str(private)}, ctx).args, ctx)
    assert out.is_error and out.output == (
        f"Error: {private} is not readable by every user, and outside the workstream's folder the file "
        "tools read only what any user may"
    )
    found = search.run({"query": "key|library", "path": str(place["ro"])}, ctx, None).output
    assert "private key" not in found and "1 match left out" in found and "lib.txt:1:" in found
    mine = place["folder"] / "mine.key"
    mine.write_text("my key\n")
    mine.chmod(0o600)  # in the workstream's own folder, its own files are read whatever their mode
    assert read_file.execute({"path": "mine.key"}, ctx).output == "   1\tmy key"
