"""README.md, the code's SPECS and the contract in docs/ agree, in both directions.

The contract lives in the repository (docs/metrics.md, docs/configuration.md,
docs/providers.md), so nothing here depends on files beside the checkout and nothing skips.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from exporter.config import load_settings
from exporter.docs import END, START, metric_reference
from exporter.metrics import SPEC_BY_NAME, MetricSpec
from exporter.model import JOB_LABELS, POD_LABELS
from exporter.providers.aihc.target import METRIC_BY_TYPE
from tests.conftest import REPO

DOCS = REPO / "docs"
METRICS = DOCS / "metrics.md"


def test_readme_reference_is_generated_from_the_code() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start, end = readme.index(START), readme.index(END) + len(END)
    assert readme[start:end] == metric_reference(), (
        "README's metric reference is out of date: run `python -m exporter.docs --write README.md`"
    )


def contract_rows() -> list[tuple[str, str, str, set[str]]]:
    """(metric, type, labels header, labels) of every metric row of docs/metrics.md."""
    rows = []
    header: list[str] = []
    for line in METRICS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "metric":
            header = cells
        elif len(cells) >= 3 and re.fullmatch(r"`training_[a-z_]+`", cells[0]):
            without_notes = re.sub(r"\(.*?\)", "", cells[2])
            labels = set(re.findall(r"\b([a-z][a-z_]*)\b", without_notes))
            rows.append((cells[0].strip("`"), cells[1].split()[0], header[2], labels))
    return rows


def expected_labels(spec: MetricSpec, header: str) -> set[str]:
    labels = set(spec.labels) | ({"gpu"} if spec.per_card else set())
    if header == "labels beyond identity":
        identity = POD_LABELS if "pod" in spec.labels else JOB_LABELS
        return labels - set(identity)
    assert header == "labels", header
    return labels


def test_every_metric_of_the_contract_is_in_the_code_with_its_type_and_labels() -> None:
    rows = contract_rows()
    assert len(rows) >= 50
    for name, kind, header, labels in rows:
        spec = SPEC_BY_NAME.get(name)
        assert spec is not None, f"{name} is in docs/metrics.md but not in exporter/metrics.py"
        assert kind == spec.kind, name
        assert labels == expected_labels(spec, header), name


def test_every_metric_of_the_code_is_in_the_contract_once() -> None:
    names = [row[0] for row in contract_rows()]
    assert len(names) == len(set(names))
    missing = sorted(set(SPEC_BY_NAME) - set(names))
    assert missing == [], f"add these to docs/metrics.md: {missing}"


def test_every_aihc_metric_type_is_in_the_contract() -> None:
    text = METRICS.read_text(encoding="utf-8")
    for metric_type, name in METRIC_BY_TYPE.items():
        (row,) = [line for line in text.splitlines() if line.startswith(f"| `{name}` |")]
        assert re.search(rf"\b{metric_type}\b", row), (name, metric_type)


def test_window_metrics_of_the_contract_exist() -> None:
    for base in ("gpu", "gpu_memory", "cpu", "memory"):
        for stat in ("max", "avg"):
            assert f"training_pod_{base}_utilization_window_{stat}_ratio" in SPEC_BY_NAME
    assert "training_alaya_query_window_seconds" in SPEC_BY_NAME


def test_the_configuration_contract_s_example_loads(tmp_path: Path) -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    path = tmp_path / "exporter.yaml"
    path.write_text(block, encoding="utf-8")
    settings = load_settings(path)
    assert [t.name for t in settings.targets()] == ["bj-pool-a", "alaya-main"]
    assert set(yaml.safe_load(block)) <= set(type(settings).model_fields)


def test_provider_notes_mark_what_is_only_observed() -> None:
    text = (DOCS / "providers.md").read_text(encoding="utf-8")
    assert text.count("**Observed:**") >= 5
    facts = ("`rateInterval` must be JSON", "`queueID` is required", "percentages", "/api/osm/")
    for fact in facts:
        paragraph = next(p for p in re.split(r"\n\s*- ", text) if fact in p)
        assert "**Observed:**" in paragraph or "**observed**" in paragraph.lower(), fact


def test_readme_names_both_commands_and_ci_runs_the_test_one() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    assert blocks[0].strip() == "make demo"
    assert blocks[1].strip() == "make test"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "\nmake test\n" in ci


@pytest.mark.parametrize(
    "page", ["metrics.md", "configuration.md", "providers.md", "status-pages.md"]
)
def test_readme_links_the_contract(page: str) -> None:
    assert f"(docs/{page})" in (REPO / "README.md").read_text(encoding="utf-8")


def test_nothing_points_outside_the_repository_for_the_contract() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout.split()
    this = Path(__file__).relative_to(REPO).as_posix()
    pointing = [
        path
        for path in listed
        if path != this
        and (REPO / path).is_file()
        and "shared/design" in (REPO / path).read_text(encoding="utf-8", errors="replace")
    ]
    assert pointing == [], f"point these at docs/ instead: {pointing}"
