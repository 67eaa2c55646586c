"""The exporter's own metrics: prometheus-client instruments in the app's registry.

These are the only metrics kept as live instruments; everything about jobs is rebuilt from
snapshots on each render (see `exporter.collector`).

prometheus-client's `_created` series are switched off (`disable_created_metrics`, for the
whole process: these are the only prometheus-client instruments it has). In the 0.0.4 text format
they are plain gauges, one beside every counter and histogram child, doubling the counters'
series. In OpenMetrics they are part of the format, but Prometheus 2.42 (Debian 12's) still
stores each `_created` line as a series of its own (checked by scraping an OpenMetrics
counter); only the experimental `created-timestamp-zero-ingestion` of later releases reads
them as created timestamps. Ours would all say the same thing, the process start, and
`rate()` already copes with the counter resets a restart makes: they cost series and tell
nothing.

A target removed by a reload takes its series with it, and the last target of a provider
takes the provider's (`forget_target`): a removed account must not keep reporting its last
`training_exporter_series` or request counts as if it were still polled.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from exporter import __version__
from exporter.metrics import SPEC_BY_NAME

_API_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_POLL_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class _Instruments:
    """Makes each instrument in one registry with its help and labels from `SPEC_BY_NAME`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def gauge(self, name: str) -> Gauge:
        spec = SPEC_BY_NAME[name]
        return Gauge(name, spec.help, spec.labels, registry=self.registry)

    def counter(self, name: str) -> Counter:
        spec = SPEC_BY_NAME[name]
        return Counter(name, spec.help, spec.labels, registry=self.registry)

    def histogram(self, name: str, buckets: tuple[float, ...]) -> Histogram:
        spec = SPEC_BY_NAME[name]
        return Histogram(name, spec.help, spec.labels, registry=self.registry, buckets=buckets)


class SelfMetrics:
    """One set per running exporter, so tests can run several in one process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry(auto_describe=True)
        make = _Instruments(self.registry)
        gauge, counter, histogram = make.gauge, make.counter, make.histogram
        self.build_info = gauge("training_exporter_build_info")
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self.up = gauge("training_exporter_up")
        self.last_success = gauge("training_exporter_last_success_timestamp_seconds")
        self.poll_duration = histogram("training_exporter_poll_duration_seconds", _POLL_BUCKETS)
        self.poll_overruns = counter("training_exporter_poll_overruns_total")
        self.api_requests = counter("training_exporter_api_requests_total")
        self.api_request_duration = histogram(
            "training_exporter_api_request_duration_seconds", _API_BUCKETS
        )
        self.api_retries = counter("training_exporter_api_retries_total")
        self.api_calls_dropped = counter("training_exporter_api_calls_dropped_total")
        self.dropped_values = counter("training_exporter_dropped_values_total")
        self.series = gauge("training_exporter_series")
        self.jobs_left_out = counter("training_exporter_jobs_left_out_total")
        self.stale_parts = gauge("training_exporter_stale_parts")
        self.duplicate_series = gauge("training_exporter_duplicate_series")
        self._providers: set[str] = set()
        self._targets: set[tuple[str, str]] = set()
        self.reload_ok = gauge("training_exporter_config_last_reload_successful")
        self.reload_ok.set(1)
        self.reload_at = gauge("training_exporter_config_last_reload_success_timestamp_seconds")
        self.reload_at.set_to_current_time()
        self.discovery_errors = counter("training_exporter_discovery_errors_total")
        self.budget_required = gauge("training_exporter_budget_required_requests_per_second")
        self.budget = gauge("training_exporter_budget_requests_per_second")
        self.tier_interval = gauge("training_exporter_tier_interval_seconds")

    # Families with a (provider, target, ...) child per target.
    def _per_target(self) -> list[Gauge | Counter | Histogram]:
        return [
            self.up,
            self.last_success,
            self.poll_duration,
            self.poll_overruns,
            self.api_requests,
            self.api_calls_dropped,
            self.jobs_left_out,
            self.stale_parts,
            self.discovery_errors,
            self.budget_required,
            self.budget,
            self.tier_interval,
        ]

    # Families with a (provider, ...) child per provider, whatever its targets.
    def _per_provider(self) -> list[Gauge | Counter | Histogram]:
        return [
            self.api_request_duration,
            self.api_retries,
            self.dropped_values,
            self.series,
            self.duplicate_series,
        ]

    def forget_target(self, provider: str, target: str) -> None:
        """A target removed by a reload: its series go, as its jobs' do; with the provider's
        last target, the provider's own series go too."""
        self._targets.discard((provider, target))
        for family in self._per_target():
            family.remove_by_labels({"provider": provider, "target": target})
        if any(p == provider for p, _ in self._targets):
            return
        self._providers.discard(provider)
        for family in self._per_provider():
            family.remove_by_labels({"provider": provider})

    def register_target(self, provider: str, target: str) -> None:
        """Make a target's series exist from the start (up 0 until its first good poll). A
        target rebuilt by a reload keeps its values: no gap, no reset."""
        if (provider, target) in self._targets:
            return
        self._targets.add((provider, target))
        self.up.labels(provider, target).set(0)
        self.poll_overruns.labels(provider, target)
        self.jobs_left_out.labels(provider, target)
        self.stale_parts.labels(provider, target).set(0)
        self.discovery_errors.labels(provider, target)
        self.series.labels(provider)
        self.duplicate_series.labels(provider)
        self._providers.add(provider)

    def drop(self, provider: str, reason: str, count: int = 1) -> None:
        self.dropped_values.labels(provider, reason).inc(count)

    def set_duplicates(self, counts: Mapping[str, int]) -> None:
        """The duplicate guard's count of the latest rendering (see `exporter.collector`)."""
        for provider in self._providers | set(counts):
            self.duplicate_series.labels(provider).set(counts.get(provider, 0))
