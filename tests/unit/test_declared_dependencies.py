"""Every library the service imports is declared in pyproject.toml: one that arrives only as
another's dependency can vanish or change under us with that one's next release."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = {"app", "workers", "beat", "turnstone_jobs"}


def _imported_modules() -> dict[str, str]:
    """Top-level modules imported by the service's code, each with one file that imports it."""
    found: dict[str, str] = {}
    for folder in OURS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_library_is_a_declared_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = (re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0] for spec in project["dependencies"])
    declared = {_normalized(name) for name in names}
    providers = packages_distributions()
    missing = []
    for module, where in sorted(_imported_modules().items()):
        if module in OURS or module in sys.stdlib_module_names or module == "__future__":
            continue
        distributions = {_normalized(d) for d in providers.get(module, [module])}
        if not distributions & declared:
            missing.append(f"{module} (imported by {where}; from {', '.join(sorted(distributions))})")
    assert not missing, "imported but not declared in [project] dependencies: " + "; ".join(missing)
