"""How the suite is spread over pytest-xdist workers: whole groups of tests on one worker each,
the longest lanes (`FIRST`), then the largest group first, then every other test on its own,
in collection order (slow ones first, `conftest.pytest_collection_modifyitems`).

`GroupScheduling` is a scheduler of xdist's public `Scheduling` protocol
(`xdist.scheduler.protocol`), handed to xdist by the `pytest_xdist_make_scheduler` hook for
`--dist loadgroup`. The controller sees node ids only, not markers, so a test's group is
found by the start of its node id (`GROUPS`). (`pytest.mark.xdist_group` does not group with
pytest 9: xdist 3.8 renames the item's node id where pytest 9 no longer reads it.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest
from xdist.report import report_collection_diff
from xdist.workermanage import WorkerController, parse_tx_spec_config

# Tests that run on one worker, one after another, by the start of their node id:
# - a module whose module or session fixture is expensive sets it up once (`make demo`; a
#   real Prometheus scraping the demo; a headless Chromium; a real Prometheus and
#   VictoriaMetrics taking remote writes, and the backfilled history that the remote-write
#   and end-to-end backfill tests share, `tests/backfill/conftest.py` `file_path`), not once
#   per worker;
# - "soak": the soak, alone on its worker: it is the longest test (1.5 simulated hours of
#   `bench.soak`), and its exporter's timeouts are a second of real time, so it gets no lane
#   mate to wait behind.
# - "heavy": long tests that bound a latency, a pace or a wait (50,000 jobs, 200 calls at
#   20/s), then the benchmarks' smoke runs, in turn on one more worker while the others run
#   the short tests. Four heavy tests at once starved each other (the soak's live set took over
#   30 s to show, the 50,000-job exporter's /-/healthy 1.4 s). The smoke runs assert no
#   timing, and each holds a third of a core or less on average (scale 4 CPU-s in 17 s).
GROUPS = {
    "tests/test_demo.py::": "demo",
    "tests/deploy/test_deploy_e2e_prometheus.py::": "prometheus-e2e",
    "tests/deploy/test_deploy_ranks_e2e.py::": "prometheus-ranks-e2e",
    "tests/web/test_status_browser.py::": "browser",
    "tests/backfill/test_remote_write_stores.py::": "remote-write-stores",
    "tests/backfill/test_remote_write_faults.py::": "remote-write-stores",
    "tests/backfill/test_backfill_e2e.py::": "remote-write-stores",
    "tests/test_soak.py::": "soak",
    "tests/work/test_bounded_work.py::test_fifty_thousand": "heavy",
    "tests/transport/test_rate_budget.py::test_twenty_per_second": "heavy",
    "tests/bench/": "heavy",
}
# The groups that take longest in all (the soak about 95 s, the heavy lane about 100 s),
# sent first.
FIRST = ("soak", "heavy")
# A worker is sent another unit while it has at most this many tests to run. It holds back
# its last test until it is sent more or told to shut down, so it needs two to keep going.
QUEUED = 2


def group_of(nodeid: str) -> str | None:
    return next((g for prefix, g in GROUPS.items() if nodeid.startswith(prefix)), None)


def units_of(collection: Sequence[str]) -> list[list[str]]:
    """The units a collection is sent in: each group whole (`FIRST` first, each with enough
    short tests to run alone on its worker, then the largest), then one unit per other test,
    in collection order."""
    groups: dict[str, list[str]] = {name: [] for name in FIRST}
    singles: list[list[str]] = []
    for nodeid in collection:
        group = group_of(nodeid)
        if group is None:
            singles.append([nodeid])
        else:
            groups.setdefault(group, []).append(nodeid)
    first = [groups.pop(name) for name in FIRST]
    for unit in first:
        # Filled up with the last (shortest) single tests to more than `QUEUED`: a worker is
        # sent more only while it has `QUEUED` or fewer left, so a one-test group (the soak)
        # has its worker to itself until it ends.
        while unit and len(unit) <= QUEUED and singles:
            unit.append(singles.pop()[0])
    rest = sorted(groups.values(), key=len, reverse=True)
    return [*(unit for unit in first if unit), *rest, *singles]


class GroupScheduling:
    """Sends each worker one unit at a time (`units_of`) while it has at most `QUEUED`
    tests queued, and tells it to shut down once no unit is left."""

    def __init__(self, config: pytest.Config, log: Any) -> None:
        self.config = config
        self.log = log
        self.numnodes = len(parse_tx_spec_config(config))
        self.collection: list[str] | None = None
        self.collections: dict[WorkerController, list[str]] = {}
        # Per worker: each node id's index in its collection, which is how tests are sent.
        self.indices: dict[WorkerController, dict[str, int]] = {}
        # Per worker: the node ids it was sent and has not completed, in order.
        self.queued: dict[WorkerController, list[str]] = {}
        self.units: deque[list[str]] = deque()

    @property
    def nodes(self) -> list[WorkerController]:
        return list(self.queued)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.collections) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.units:
            return False
        return all(len(queued) < 2 for queued in self.queued.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.units) or any(self.queued.values())

    def add_node(self, node: WorkerController) -> None:
        self.queued[node] = []

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        self.collections[node] = list(collection)
        self.indices[node] = {nodeid: i for i, nodeid in enumerate(collection)}

    def mark_test_complete(
        self, node: WorkerController, item_index: int, duration: float = 0
    ) -> None:
        self.queued[node].remove(self.collections[node][item_index])
        self.send(node)

    def mark_test_pending(self, item: str) -> None:
        raise NotImplementedError

    def remove_pending_tests_from_node(
        self, node: WorkerController, indices: Sequence[int]
    ) -> None:
        raise NotImplementedError

    def remove_node(self, node: WorkerController) -> str | None:
        """A worker gone: the test it was running (reported as its crash), the rest sent again."""
        queued = self.queued.pop(node)
        if not queued:
            return None
        if queued[1:]:
            self.units.appendleft(queued[1:])
        for other in self.nodes:
            self.send(other)
        return queued[0]

    def schedule(self) -> None:
        if self.collection is None:
            if not self.same_collections():
                return
            self.collection = next(iter(self.collections.values()))
            self.units = deque(units_of(self.collection))
        for node in self.nodes:
            self.send(node)

    def send(self, node: WorkerController) -> None:
        if node.shutting_down:
            return
        queued = self.queued[node]
        while self.units and len(queued) <= QUEUED:
            unit = self.units.popleft()
            node.send_runtest_some([self.indices[node][nodeid] for nodeid in unit])
            queued.extend(unit)
        if not self.units:
            node.shutdown()

    def same_collections(self) -> bool:
        """Whether every worker collected the same tests; each difference reported."""
        (first, collection), *others = self.collections.items()
        same = True
        for node, other in others:
            diff = report_collection_diff(collection, other, first.gateway.id, node.gateway.id)
            if diff:
                same = False
                self.log(diff)
                report = pytest.CollectReport(node.gateway.id, "failed", diff, [])
                self.config.hook.pytest_collectreport(report=report)
        return same
