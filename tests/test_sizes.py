"""Modules small enough to read whole: in exporter/, the simulator included, no class is over
200 lines and no function over 40, counted from its `def` or `class` line to its last."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "exporter"
MAX_CLASS = 200
MAX_FUNCTION = 40


def oversized(source: str, where: str) -> list[str]:
    """Each class over MAX_CLASS lines and function over MAX_FUNCTION in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            cap = MAX_CLASS
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            cap = MAX_FUNCTION
        else:
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > cap:
            found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_the_counter_finds_a_long_function_and_a_long_class() -> None:
    body = "".join(f"    x{k} = {k}\n" for k in range(40))
    assert oversized(f"def f():\n{body}", "m") == ["m:1 f (41 lines)"]
    assert oversized(f"def f():\n{body[: -len('    x39 = 39') - 1]}", "m") == []
    methods = "".join(f"    def m{k}(self):\n        return {k}\n" for k in range(100))
    assert oversized(f"class C:\n{methods}", "m") == ["m:1 C (201 lines)"]


def test_no_class_over_200_lines_and_no_function_over_40_in_the_package() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += oversized(path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE)))
    assert found == []
