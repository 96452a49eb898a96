"""Lanes: calls on a common file run in order, the rest in parallel."""

from __future__ import annotations

from app.tools.core.ordering import lanes, paths_named


def _lanes(calls: list[dict], working_dir: str = "/w") -> list[list[str]]:
    grouped = lanes(calls, lambda c: paths_named(c["args"], working_dir))
    return [[c["id"] for c in lane] for lane in grouped]


def test_calls_on_one_file_share_a_lane_in_batch_order():
    calls = [
        {"id": "read", "args": {"path": "a.py"}},
        {"id": "bash", "args": {"command": "ls"}},
        {"id": "edit", "args": {"path": "/w/a.py"}},  # the same file, written absolutely
    ]
    assert _lanes(calls) == [["read", "edit"], ["bash"]]


def test_calls_naming_no_path_each_get_a_lane():
    calls = [{"id": str(n), "args": {"command": "true"}} for n in range(4)]
    assert _lanes(calls) == [["0"], ["1"], ["2"], ["3"]]


def test_a_diff_of_two_files_joins_the_lanes_of_both():
    calls = [
        {"id": "read-a", "args": {"path": "a"}},
        {"id": "read-b", "args": {"path": "b"}},
        {"id": "diff", "args": {"path_a": "a", "path_b": "b"}},
        {"id": "read-c", "args": {"path": "c"}},
    ]
    assert _lanes(calls) == [["read-a", "read-b", "diff"], ["read-c"]]


def test_paths_resolve_against_the_working_directory(tmp_path):
    (tmp_path / "real.txt").write_text("x")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    assert paths_named({"path": "link.txt"}, str(tmp_path)) == {str(tmp_path / "real.txt")}
    assert paths_named({"path": ""}, str(tmp_path)) == set()
