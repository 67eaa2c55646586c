"""From the fake's replies to samples of the metric contract (`exporter.metrics`)."""

from __future__ import annotations

from exporter.model import JOB_LABELS, POD_LABELS, Sample
from exporter.providers.kit.labels import label
from tests.providers.fake.models import FakeJob
from tests.providers.fake.target import LOAD, NAME

# The fake's one metric type, and the family it fills.
METRIC_BY_TYPE = {LOAD: "training_pod_gpu_utilization_ratio"}


def status_samples(job: FakeJob) -> tuple[Sample, ...]:
    labels = (NAME, "", "", label(job.id), label(job.state))
    return (Sample("training_job_status", (*JOB_LABELS, "status"), labels, 1.0),)


def load_samples(job_id: str, pod: str, gpu: float) -> tuple[Sample, ...]:
    if not 0.0 <= gpu <= 1.0:
        return ()
    labels = (NAME, "", "", label(job_id), label(pod))
    return (Sample(METRIC_BY_TYPE[LOAD], POD_LABELS, labels, gpu),)
