"""search: both backends (ripgrep and grep) on real trees, every rule of the spec and RESOLUTIONS.md."""

import os
import shutil

import pytest

from app.settings import ToolSettings
from app.tools import search
from app.tools.core.base import ToolContext
from app.tools.core.pipeline import execute_call, prepare_call
from app.tools.core.registry import build_registry
from app.tools.files.reach import Roots

RIPGREP = search.locate_ripgrep()
BACKENDS = [
    pytest.param(
        RIPGREP, id="ripgrep", marks=pytest.mark.skipif(RIPGREP is None, reason="ripgrep not installed")
    ),
    pytest.param(None, id="grep"),
]


@pytest.fixture(params=BACKENDS)
def rg(request):
    return request.param


@pytest.fixture
def ctx(tmp_path):
    return ToolContext("ws", str(tmp_path), settings=ToolSettings(timeout=30))


def find(ctx, rg, **args):
    prep = search.prepare(args, ctx)
    if prep.error:
        return prep.error
    return search.run(prep.args, ctx, rg)


def write(root, name, text):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_matches_are_path_line_text_relative_to_the_working_directory(ctx, tmp_path, rg):
    write(tmp_path, "src/app.py", "import os\ndef main():\n    return os.getcwd()\n")
    write(tmp_path, "README", "nothing here\n")
    assert find(ctx, rg, query="os").output == "src/app.py:1: import os\nsrc/app.py:3:     return os.getcwd()"


def test_extended_regex(ctx, tmp_path, rg):
    write(tmp_path, "f.txt", "color\ncolour\ncolr\n")
    assert find(ctx, rg, query="colou?r$").output == "f.txt:1: color\nf.txt:2: colour"


def test_alternation_and_groups_without_backslashes(ctx, tmp_path, rg):
    write(tmp_path, "f.txt", "cat\ndog\nbird\n")
    assert find(ctx, rg, query="^(cat|dog)$").output == "f.txt:1: cat\nf.txt:2: dog"


def test_searches_the_working_directory_by_default(ctx, tmp_path, rg):
    write(tmp_path, "deep/er/f.txt", "needle\n")
    assert find(ctx, rg, query="needle").output == "deep/er/f.txt:1: needle"


def test_path_may_be_a_folder(ctx, tmp_path, rg):
    write(tmp_path, "a/f.txt", "needle\n")
    write(tmp_path, "b/f.txt", "needle\n")
    assert find(ctx, rg, query="needle", path="b").output == "b/f.txt:1: needle"


def test_path_may_be_one_file(ctx, tmp_path, rg):
    write(tmp_path, "a/f.txt", "needle\n")
    write(tmp_path, "a/g.txt", "needle\n")
    assert find(ctx, rg, query="needle", path="a/g.txt").output == "a/g.txt:1: needle"


def test_a_path_outside_the_working_directory_is_shown_absolute(tmp_path, rg):
    write(tmp_path, "out/f.txt", "needle\n")
    (tmp_path / "work").mkdir()
    roots = Roots(read_only=(str(tmp_path / "out"),), never=(), data_root=str(tmp_path / "data"))
    ctx = ToolContext("ws", str(tmp_path / "work"), roots=roots)  # out/ is a read-only root
    assert (
        find(ctx, rg, query="needle", path=str(tmp_path / "out")).output == f"{tmp_path}/out/f.txt:1: needle"
    )


def test_no_match_is_not_an_error(ctx, tmp_path, rg):
    write(tmp_path, "f.txt", "hay\n")
    outcome = find(ctx, rg, query="needle")
    assert outcome.output == "(no matches)" and outcome.is_error is False


def test_bad_regex_is_a_clear_error(ctx, tmp_path, rg):
    write(tmp_path, "f.txt", "hay\n")
    outcome = find(ctx, rg, query="(unclosed")
    assert outcome.is_error and outcome.output.startswith(
        "Error: search failed; is the query a valid extended"
    )


def test_missing_path_is_an_error(ctx, rg):
    outcome = find(ctx, rg, query="x", path="nowhere")
    assert outcome.is_error and outcome.output == "Error: no such file or folder: nowhere"


@pytest.mark.parametrize("folder", search.SKIPPED_DIRS)
def test_skipped_folders(ctx, tmp_path, rg, folder):
    write(tmp_path, f"{folder}/f.txt", "needle\n")
    write(tmp_path, f"src/{folder}/f.txt", "needle\n")
    write(tmp_path, "kept.txt", "needle\n")
    assert find(ctx, rg, query="needle").output == "kept.txt:1: needle"


def test_a_file_named_like_a_skipped_folder_is_searched(ctx, tmp_path, rg):
    write(tmp_path, "build", "needle\n")
    assert find(ctx, rg, query="needle").output == "build:1: needle"


def test_a_skipped_folder_named_as_the_path_is_searched(ctx, tmp_path, rg):
    write(tmp_path, "build/out.txt", "needle\n")
    assert find(ctx, rg, query="needle", path="build").output == "build/out.txt:1: needle"


def test_hidden_files_and_ignored_files_are_searched(ctx, tmp_path, rg):
    write(tmp_path, ".gitignore", "ignored.txt\n")
    write(tmp_path, "ignored.txt", "needle\n")
    write(tmp_path, ".env.example", "needle\n")
    assert find(ctx, rg, query="needle").output == ".env.example:1: needle\nignored.txt:1: needle"


def test_binary_files_are_skipped(ctx, tmp_path, rg):
    (tmp_path / "data.bin").write_bytes(b"needle\x00\x01\x02")
    write(tmp_path, "f.txt", "needle\n")
    assert find(ctx, rg, query="needle").output == "f.txt:1: needle"


def test_at_most_100_matches_per_file(ctx, tmp_path, rg):
    write(tmp_path, "many.txt", "hit\n" * 150)
    write(tmp_path, "few.txt", "hit\n")
    lines = find(ctx, rg, query="hit").output.splitlines()
    assert sum(1 for line in lines if line.startswith("many.txt:")) == 100
    assert "few.txt:1: hit" in lines
    assert lines[-1].startswith("[1 file reached the cap of 100 matches per file")


def test_total_cap_stops_the_search(ctx, tmp_path, rg, monkeypatch):
    monkeypatch.setattr(search, "MAX_MATCHES", 30)
    for n in range(10):
        write(tmp_path, f"f{n}.txt", "hit\n" * 5)
    lines = find(ctx, rg, query="hit").output.splitlines()
    assert len([line for line in lines if ": hit" in line]) == 30
    assert lines[-1] == "[stopped after 30 matches; narrow the query or the path]"


def test_long_lines_are_cut(ctx, tmp_path, rg):
    write(tmp_path, "f.txt", "needle" + "x" * 1000 + "\n")
    output = find(ctx, rg, query="needle").output
    assert output == "f.txt:1: needle" + "x" * (search.MAX_LINE_CHARS - 6) + " [... 706 more characters]"


def test_results_are_sorted_by_path_then_line(ctx, tmp_path, rg):
    for name in ("c.txt", "a.txt", "b/z.txt"):
        write(tmp_path, name, "x\nhit\nhit\n")
    paths = [line.split(":")[0] for line in find(ctx, rg, query="hit").output.splitlines()]
    assert paths == ["a.txt", "a.txt", "b/z.txt", "b/z.txt", "c.txt", "c.txt"]


def test_file_names_with_colons_and_spaces(ctx, tmp_path, rg):
    write(tmp_path, "odd: name 1.txt", "needle\n")
    assert find(ctx, rg, query="needle").output == "odd: name 1.txt:1: needle"


def test_query_starting_with_a_dash(ctx, tmp_path, rg):
    write(tmp_path, "f.txt", "--flag\n")
    assert find(ctx, rg, query="--flag").output == "f.txt:1: --flag"


def test_cancelled_search_stops(ctx, tmp_path, rg):
    write(tmp_path, "f.txt", "hay\n")
    ctx.is_cancelled = lambda: True
    outcome = find(ctx, rg, query="needle")
    assert outcome.output in ("(no matches)", "Error: search cancelled before finding anything")


def test_empty_query_is_refused(ctx, rg):
    assert find(ctx, rg, query="") == "Error: search needs a non-empty 'query' (a regular expression)"


def test_auto_approved(ctx):
    prep = search.prepare({"query": "x"}, ctx)
    assert prep.needs_approval is False and prep.header == "search /x/ in ."


def test_ripgrep_is_used_when_installed(monkeypatch, ctx, tmp_path):
    calls = []
    monkeypatch.setattr(search, "locate_ripgrep", lambda: "/opt/rg")
    monkeypatch.setattr(search, "run", lambda args, c, rg: calls.append(rg))
    search.execute({"query": "x", "path": "."}, ctx)
    assert calls == ["/opt/rg"]


def test_grep_is_used_without_ripgrep(monkeypatch, ctx):
    calls = []
    monkeypatch.setattr(search, "locate_ripgrep", lambda: None)
    monkeypatch.setattr(search, "run", lambda args, c, rg: calls.append(rg))
    search.execute({"query": "x", "path": "."}, ctx)
    assert calls == [None]


def test_locate_ripgrep_finds_rg_on_the_path(monkeypatch, tmp_path):
    fake = tmp_path / "rg"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert search.locate_ripgrep() == str(fake)


def test_grep_backend_is_grep_rnIE():
    argv = search._grep_argv("q", ".")
    assert argv[:2] == ["grep", "-rnHIE"] and shutil.which("grep")


def test_a_ripgrep_config_in_the_environment_changes_nothing(ctx, tmp_path, rg, monkeypatch):
    config = tmp_path / "rgconfig"
    config.write_text("--ignore-case\n--column\n--max-columns=3\n")
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    write(tmp_path, "f.txt", "needle\nNEEDLE\n")
    assert find(ctx, rg, query="needle").output == "f.txt:1: needle"


@pytest.mark.parametrize("query", ["one\ntwo", "one\r\n"])
def test_a_query_with_a_line_break_is_refused(ctx, rg, query):
    assert find(ctx, rg, query=query).startswith(
        "Error: search matches one line at a time, so 'query' cannot contain a line break"
    )


def test_an_empty_path_means_the_working_directory(ctx, tmp_path, rg):
    write(tmp_path, "sub/f.txt", "needle\n")
    assert find(ctx, rg, query="needle", path="").output == "sub/f.txt:1: needle"


@pytest.mark.timeout(10)
def test_a_fifo_path_is_refused_without_waiting_for_a_writer(ctx, tmp_path, rg):
    os.mkfifo(tmp_path / "pipe")
    outcome = find(ctx, rg, query="x", path="pipe")
    assert outcome.is_error and outcome.output == "Error: pipe is not a regular file or a folder"


@pytest.mark.timeout(10)
def test_a_fifo_inside_the_tree_is_skipped(ctx, tmp_path, rg):
    os.mkfifo(tmp_path / "pipe")
    write(tmp_path, "f.txt", "needle\n")
    assert find(ctx, rg, query="needle").output == "f.txt:1: needle"


def test_a_path_resolves_against_the_working_directory_not_the_process(ctx, tmp_path, rg, monkeypatch):
    monkeypatch.chdir("/")
    write(tmp_path, "sub/f.txt", "needle\n")
    assert find(ctx, rg, query="needle", path="sub").output == "sub/f.txt:1: needle"


def test_a_bare_string_argument_is_the_query(ctx, tmp_path):
    write(tmp_path, "f.txt", "needle\n")
    registry = build_registry()
    call = prepare_call(registry, "c1", "search", "needle", ctx)
    assert execute_call(registry, call, ctx).output == "f.txt:1: needle"


def test_a_result_over_the_truncation_limit_keeps_its_head_and_tail(tmp_path):
    ctx = ToolContext("ws", str(tmp_path), settings=ToolSettings(truncation=1024))
    write(tmp_path, "a.txt", "hit first\n")
    write(tmp_path, "m.txt", "hit\n" * 90)
    write(tmp_path, "z.txt", "hit last\n")
    registry = build_registry()
    output = execute_call(
        registry, prepare_call(registry, "c1", "search", '{"query": "hit"}', ctx), ctx
    ).output
    assert output.startswith("a.txt:1: hit first") and output.endswith("z.txt:1: hit last")
    assert "characters cut from the middle of this output" in output


def test_ripgrep_is_told_to_ignore_its_config_file():
    assert "--no-config" in search._ripgrep_argv("rg", "q", ".")
