"""The shape of the code: no function of the server, the operator or the plugin is longer than a screen.

ruff bounds each function's complexity and statements (pyproject.toml); this bounds its length,
docstring included, so that every function can be read at once.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "apiserver", ROOT / "apiserver_operator", ROOT / "kubectl_coreio")
MAX_FUNCTION_LINES = 60


def long_functions(package: Path, root: Path = ROOT) -> list[str]:
    """`path:line name (N lines)` (the path relative to `root`) of each function in `package`
    longer than the bound."""
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            # A decorated function starts at its first decorator.
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_the_packages_are_where_this_test_looks() -> None:
    for package in PACKAGES:
        assert (package / "__init__.py").is_file(), package


def test_no_function_is_longer_than_60_lines() -> None:
    found = [entry for package in PACKAGES for entry in long_functions(package)]
    assert not found, f"functions longer than {MAX_FUNCTION_LINES} lines:\n" + "\n".join(found)


def test_long_functions_are_found(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "module.py").write_text(f"def short() -> None:\n    pass\n\n\ndef long() -> None:\n{body}\n")
    assert long_functions(tmp_path, tmp_path) == [f"module.py:5 long ({MAX_FUNCTION_LINES + 1} lines)"]
