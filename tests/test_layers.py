"""The import contracts of `make lint` (pyproject.toml, `[tool.importlinter]`) hold for the
package, and fail when a forbidden import or a cycle is added to a copy of it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def copy_of_the_package(tmp_path: Path) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(REPO / "exporter", root / "exporter", ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(REPO / "pyproject.toml", root)
    return root


def lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the copy at `root`, limited to `contracts` (their ids) if named."""
    only = [f"--contract={c}" for c in contracts]
    # `python -c` puts the working directory first on sys.path: the copy is what is analysed.
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo", *only],
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def add_import(module: Path, line: str) -> None:
    text = module.read_text(encoding="utf-8")
    head, marker, rest = text.partition("from __future__ import annotations\n")
    assert marker, module
    module.write_text(f"{head}{marker}\n{line}\n{rest}", encoding="utf-8")


def test_the_package_keeps_its_contracts(tmp_path: Path) -> None:
    result = lint_imports(copy_of_the_package(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # The kit reaching up into the server: below the providers, below the poll core.
        ("providers/kit/labels.py", "import exporter.server", "layers"),
        # A provider naming another provider's module.
        (
            "providers/alaya/mapping.py",
            "import exporter.providers.aihc.models",
            "providers",
        ),
        # The transport importing a provider.
        ("transport/http.py", "import exporter.providers.aihc.signer", "layers"),
        # A cycle inside one layer: the gate imports the client that holds it.
        ("transport/gate.py", "import exporter.transport.limited", "acyclic"),
    ],
)
def test_a_forbidden_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    root = copy_of_the_package(tmp_path)
    add_import(root / "exporter" / module, line)
    result = lint_imports(root, broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 broken" in result.stdout
