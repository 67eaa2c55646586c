"""Write the Grafana dashboard, the rank rules and the Helm chart's copies of the dashboard,
alert and rank rules and example configuration.

    python deploy/generate.py          # rewrite the generated files
    python deploy/generate.py --check  # exit 1 naming each file that is out of date

The dashboard is built, not edited by hand, in `dashboard/` beside this file (its blocks, its
panels and the page), so that every panel uses the same label selectors and the same joins.
The chart cannot read files outside its own directory, so it carries byte-for-byte copies of
`grafana/training-jobs.json`, `prometheus/alerts.yaml`, `prometheus/ranks.yaml` and
`config/exporter.yaml` (its configuration defaults) under `files/`; tests/deploy runs `--check`
so no copy can drift. `prometheus/ranks.yaml` and `prometheus/lifecycle.yaml` are written from
`rank_rules.py` and `lifecycle_rules.py` beside this file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

DEPLOY = Path(__file__).resolve().parent
DASHBOARD_PATH = DEPLOY / "grafana" / "training-jobs.json"
ALERTS_PATH = DEPLOY / "prometheus" / "alerts.yaml"
RANKS_PATH = DEPLOY / "prometheus" / "ranks.yaml"
LIFECYCLE_PATH = DEPLOY / "prometheus" / "lifecycle.yaml"
EXAMPLE_CONFIG_PATH = DEPLOY.parent / "config" / "exporter.yaml"
CHART_FILES = DEPLOY / "helm" / "training-job-exporter" / "files"


def _sibling(name: str) -> ModuleType:
    """`name`.py beside this file, or the package `name`/, loaded by path as `deploy_<name>`
    (this script runs by path, not as a package)."""
    package = DEPLOY / name / "__init__.py"
    location = package if package.exists() else DEPLOY / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"deploy_{name}", location)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up by name, and a package's relative imports its own.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


rank_rules = _sibling("rank_rules")
lifecycle_rules = _sibling("lifecycle_rules")
dashboard = _sibling("dashboard").dashboard


def rendered_files() -> dict[Path, str]:
    """Every generated file and the text it must hold."""
    dashboard_text = json.dumps(dashboard(rank_rules), indent=2, ensure_ascii=False) + "\n"
    alerts_text = ALERTS_PATH.read_text(encoding="utf-8")
    ranks_text = rank_rules.text()
    lifecycle_text = lifecycle_rules.text()
    return {
        DASHBOARD_PATH: dashboard_text,
        CHART_FILES / DASHBOARD_PATH.name: dashboard_text,
        CHART_FILES / ALERTS_PATH.name: alerts_text,
        RANKS_PATH: ranks_text,
        CHART_FILES / RANKS_PATH.name: ranks_text,
        LIFECYCLE_PATH: lifecycle_text,
        CHART_FILES / LIFECYCLE_PATH.name: lifecycle_text,
        CHART_FILES / EXAMPLE_CONFIG_PATH.name: EXAMPLE_CONFIG_PATH.read_text(encoding="utf-8"),
    }


def out_of_date() -> list[Path]:
    return [
        path
        for path, text in rendered_files().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    if args.check:
        stale = out_of_date()
        for path in stale:
            print(
                f"{path.relative_to(DEPLOY.parent)} is out of date: run python deploy/generate.py",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path, text in rendered_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
