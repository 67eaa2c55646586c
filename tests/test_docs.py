"""The metric reference in README.md, the code's SPECS and shared/design/metrics.md agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exporter.docs import END, START, metric_reference
from exporter.metrics import SPEC_BY_NAME
from tests.conftest import REPO

CONTRACT = REPO.parent / "shared" / "design" / "metrics.md"


def test_readme_reference_is_generated_from_the_code() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start, end = readme.index(START), readme.index(END) + len(END)
    assert readme[start:end] == metric_reference(), (
        "README's metric reference is out of date: run `python -m exporter.docs --write README.md`"
    )


def contract_rows() -> list[list[str]]:
    if not CONTRACT.exists():
        pytest.skip("shared/design/metrics.md is not beside the repository")
    """Metric rows as [name, type, labels]; labels '' where the table has no label column."""
    rows = []
    header: list[str] = []
    for line in CONTRACT.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "metric":
            header = cells
        elif len(cells) >= 2 and re.fullmatch(r"`[a-z_]+`", cells[0]):
            has_labels = len(header) > 2 and "labels" in header[2]
            rows.append([cells[0], cells[1], cells[2] if has_labels else ""])
    return rows


def test_every_contract_metric_exists_with_its_type_and_labels() -> None:
    rows = contract_rows()
    names = [row[0].strip("`") for row in rows if row[0].startswith("`training_")]
    assert len(names) >= 40
    for row in rows:
        name = row[0].strip("`")
        if not name.startswith("training_"):
            continue
        spec = SPEC_BY_NAME.get(name)
        assert spec is not None, f"{name} is in metrics.md but not in exporter/metrics.py"
        assert row[1].split()[0] == spec.kind, name
        if row[2]:
            without_notes = re.sub(r"\(.*?\)", "", row[2]).split(":")[0]
            declared = re.findall(r"\b([a-z][a-z_]*)\b", without_notes)
            for label in declared:
                assert label in spec.labels, (name, label)


def test_window_metrics_of_the_contract_exist() -> None:
    for base in ("gpu", "gpu_memory", "cpu", "memory"):
        for stat in ("max", "avg"):
            assert f"training_pod_{base}_utilization_window_{stat}_ratio" in SPEC_BY_NAME
    assert "training_alaya_query_window_seconds" in SPEC_BY_NAME


def test_readme_names_both_commands_and_ci_runs_the_test_one() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    assert blocks[0].strip() == "make demo"
    assert blocks[1].strip() == "make test"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "\nmake test\n" in ci


def test_contract_path_is_where_ci_puts_it() -> None:
    assert Path(CONTRACT).name == "metrics.md"
