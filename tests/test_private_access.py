"""Tests and benchmarks drive public paths only: nothing in tests/ or bench/ reads or sets a
`_`-prefixed attribute of the package or of a dependency (the house rule; `test_collector`
holds the exporter itself to the same rule for prometheus-client)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def own_names(tree: ast.AST) -> set[str]:
    """The `_` names a file defines itself: its functions, classes, and attributes it assigns
    on `self` or `cls` or in a class body. A test's own helper may keep private members."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return {n for n in names if private(n)}


def private_accesses(source: str) -> list[str]:
    """Each read or write of another's private member: `x._name` (unless x is `self` or `cls`
    and the file defines `_name` itself), `from m import _name`, and getattr, setattr,
    hasattr, delattr or `monkeypatch.setattr` of "_name"."""
    tree = ast.parse(source)
    own = own_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            mine = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not (mine and node.attr in own):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and not (node.module or "").startswith("tests"):
            names = [alias.name for alias in node.names if private(alias.name)]
            found += [f"from {node.module} import {name}" for name in names]
        elif isinstance(node, ast.Call) and len(node.args) > 1:
            function = ast.unparse(node.func).split(".")[-1]
            name = node.args[1]
            if (
                function in ("getattr", "setattr", "hasattr", "delattr")
                and isinstance(name, ast.Constant)
                and private(str(name.value))
            ):
                found.append(ast.unparse(node))
    return found


def found_in(*folders: Path) -> set[tuple[str, str]]:
    return {
        (str(path.relative_to(REPO)), access)
        for folder in folders
        for path in sorted(folder.rglob("*.py"))
        for access in private_accesses(path.read_text())
    }


def test_the_detector_finds_each_kind_of_private_access() -> None:
    source = """
from exporter.x import _hidden, shown
from tests.helpers import _ours
queue._first = 3
runner._read(unit)
super()._split_scope(nodeid)
getattr(store, "_lock")
monkeypatch.setattr(module, "_LIMIT", 1)


class Own:
    def __init__(self) -> None:
        self._jobs = 0

    def _step(self) -> int:
        return self._jobs + self._inherited + self.__class__.__name__.count("x")
"""
    assert sorted(private_accesses(source)) == sorted(
        [
            "from exporter.x import _hidden",
            "queue._first",
            "runner._read",
            "super()._split_scope",
            "getattr(store, '_lock')",
            "monkeypatch.setattr(module, '_LIMIT', 1)",
            "self._inherited",
        ]
    )


def test_no_test_or_benchmark_reads_or_sets_a_private_member_of_ours_or_a_dependencys() -> None:
    assert found_in(TESTS, REPO / "bench") == set()
