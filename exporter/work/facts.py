"""What a reading says of its job for the status pages: its name, its status and its pods.

Read from the samples as they come in (the listing's job info, a pod list, a pod's details),
not from the snapshot, whose series go when they are stale: the jobs page keeps naming a job
through an outage, with the age of what it knows (`exporter.status.JobReads`).
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.model import Sample, Samples
from exporter.status import JobFacts

JOB_INFO = "training_job_info"
JOB_STATUS = "training_job_status"
POD_INFO = "training_pod_info"
_FACTS = frozenset({JOB_INFO, JOB_STATUS, POD_INFO})
NOTHING = JobFacts()


def facts_of(samples: Iterable[Sample]) -> JobFacts:
    if isinstance(samples, Samples) and _FACTS.isdisjoint(samples.shape.names):
        # A metric type's samples, packed by the provider: nothing of the job, none made.
        return NOTHING
    name = status = None
    pods: set[str] | None = None
    for sample in samples:
        if sample.name == JOB_INFO:
            name = _label(sample, "job_name")
        elif sample.name == JOB_STATUS and sample.value == 1:
            status = _label(sample, "status")
        elif sample.name == POD_INFO:
            pods = pods if pods is not None else set()
            pods.add(_label(sample, "pod") or "")
    if pods is not None:
        pods.discard("")
    elif name is None and status is None:
        # Most readings (a metric type's) say nothing of the job: one value for them all.
        return NOTHING
    return JobFacts(name, status, None if pods is None else frozenset(pods))


def _label(sample: Sample, name: str) -> str | None:
    names = sample.label_names
    return sample.label_values[names.index(name)] if name in names else None
