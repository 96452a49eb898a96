"""Wall time of the file tools on big inputs: search over 10,000 files (ripgrep and grep), edit_file on 5 MB.

Run: python bench/file_tools.py [--files N] [--megabytes M]. Each figure is the best of 3 runs
after one warm-up run (a warm file cache). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from app.settings import ToolSettings
from app.tools import edit_file, search
from app.tools.core.base import ToolContext, ToolOutcome

T = TypeVar("T")

FOLDERS = 100  # files are spread over this many folders
SKIPPED_FILES = 500  # extra files under node_modules/ and .git/ that a search must not read


def make_tree(root: Path, files: int) -> None:
    for n in range(files):
        folder = root / "src" / f"pkg{n % FOLDERS:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def function_{n}_{i}(value):\n    return value + {i}\n\n" for i in range(20))
        marker = "# TODO: needle here\n" if n % 100 == 0 else ""
        (folder / f"module_{n}.py").write_text(marker + body)
    for skipped in ("node_modules/lib", ".git/objects"):
        folder = root / skipped
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(SKIPPED_FILES):
            (folder / f"f{n}.js").write_text("// TODO: needle in a skipped folder\n" * 50)


def timed(fn: Callable[[], T], repeat: int = 3) -> tuple[float, T]:
    best, result = float("inf"), fn()
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def bench_search(root: Path, files: int) -> None:
    ctx = ToolContext("bench", str(root), settings=ToolSettings())
    backends = [("ripgrep", search.locate_ripgrep()), ("grep", None)]
    for name, rg in backends:
        if name == "ripgrep" and rg is None:
            print("search, ripgrep: not installed, skipped")
            continue
        for query in ("needle", r"function_[0-9]*77_19\("):

            def find(rg: str | None = rg, query: str = query) -> ToolOutcome:
                return search.run({"query": query, "path": "."}, ctx, rg)

            seconds, outcome = timed(find)
            lines = outcome.output.count("\n") + 1
            figure = f"{seconds * 1000:8.1f} ms ({lines:,} lines out)"
            print(f"search, {name:7}  {files:,} files, /{query}/: {figure}")


def bench_edit(root: Path, megabytes: int) -> None:
    path = root / "big.py"
    line = "x = compute(alpha, beta, gamma)  # a typical line of code, about 60 chars\n"
    count = megabytes * 1024 * 1024 // len(line)
    lines = [line] * count
    lines[count // 2] = "MIDDLE_MARKER = 1\n"
    original = "".join(lines)
    ctx = ToolContext("bench", str(root), settings=ToolSettings())
    ctx.read_paths.add(str(path.resolve()))
    cases: dict[str, dict[str, Any]] = {
        "single edit (unique, mid-file)": {
            "old_string": "MIDDLE_MARKER = 1",
            "new_string": "MIDDLE_MARKER = 2",
        },
        "replace_all (every line)": {"old_string": "alpha", "new_string": "ALPHA", "replace_all": True},
        "near_line among all lines": {"old_string": "beta", "new_string": "BETA", "near_line": count // 3},
    }
    for label, args in cases.items():
        path.write_text(original)
        full = {"path": "big.py", **args}

        def run(full: dict[str, Any] = full) -> ToolOutcome:
            path.write_text(original)
            prep = edit_file.prepare(full, ctx)
            assert prep.error is None, prep.error
            return edit_file.execute(prep.args, ctx)

        seconds, _ = timed(run)
        size = len(original.encode()) / 1e6
        print(f"edit_file, {size:.1f} MB, {label}: {seconds * 1000:8.1f} ms (prepare + execute)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--megabytes", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-file-tools-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        make_tree(root, options.files)
        made = time.perf_counter() - start
        print(f"tree of {options.files:,} files made in {made:.1f} s ({os.cpu_count()} CPUs)")
        bench_search(root, options.files)
        bench_edit(root, options.megabytes)


if __name__ == "__main__":
    main()
