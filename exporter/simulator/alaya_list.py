"""The fake Alaya's job list: a job as the list shows it (`ListedJob`), the finished and
pending jobs a world's list starts with, the records the list serves, and the gateway's check
of the access-key signature.

`exporter.simulator.alaya` holds the list in its world and serves these.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.simulator.alaya_pods import GPU_MODEL

LIST_SIGNATURE_SKEW_MS = 5 * 60 * 1000
# Finished and pending jobs of the list's history: (end status or None for pending, reason).
HISTORY: tuple[tuple[str | None, str], ...] = (
    ("SUCCEEDED", "Completed"),
    ("FAILED", "OOMKilled: worker-1 exited with code 137"),
    ("STOPPED", "Stopped by user"),
    (None, ""),
)


@dataclass
class ListedJob:
    """A job as the job list shows it; its status follows the world's clock."""

    id: str
    name: str
    workers: int
    created: float
    # None: not started (PENDING) / not finished.
    start: float | None = None
    end: float | None = None
    end_status: str = "SUCCEEDED"
    aidc_id: int = 1
    reason: str = ""

    def status(self, now: float) -> str:
        if self.end is not None and now >= self.end:
            return self.end_status
        if self.start is not None and now >= self.start:
            return "RUNNING"
        return "PENDING"


def new_job_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def job_name(rng: random.Random) -> str:
    model = rng.choice(("llama3-8b", "qwen2-72b", "glm4-9b", "mixtral-8x7b"))
    task = rng.choice(("sft", "pretrain", "dpo", "eval"))
    return f"{model}-{task}-{rng.randrange(1000):03d}"


def seeded_list(
    rng: random.Random, running: Mapping[str, Sequence[str]], started_at: int
) -> list[ListedJob]:
    """A world's job list, newest first: its `running` jobs (job id -> pods), started at
    `started_at`, then the HISTORY jobs, created a day apart before them."""
    listed = [
        ListedJob(job_id, job_name(rng), len(pods), started_at - 120, start=started_at)
        for job_id, pods in running.items()
    ]
    for offset, (end_status, reason) in enumerate(HISTORY):
        created = started_at - 86400 * (offset + 1)
        job = ListedJob(new_job_id(rng), job_name(rng), 2, created, start=created + 60)
        if end_status is None:
            job.start = None
        else:
            job.end, job.end_status, job.reason = created + 3600, end_status, reason
        listed.append(job)
    return listed


def list_record(job: ListedJob, now: float, format_time: Callable[[float], str]) -> dict[str, Any]:
    """`job` as a record of the list at `now`."""
    status = job.status(now)
    record: dict[str, Any] = {
        "id": job.id,
        "name": job.name,
        "status": status,
        "aidcId": job.aidc_id,
        "resource": {"workerCount": job.workers, "gpuCount": 8, "gpuName": GPU_MODEL},
        "createdTime": format_time(job.created),
        "startTime": format_time(job.start) if job.start and now >= job.start else None,
    }
    finished = job.end is not None and now >= job.end
    # Both spellings the client was seen reading: endTime, else finishTime.
    end_key = "finishTime" if status == "FAILED" else "endTime"
    record[end_key] = format_time(job.end) if finished and job.end else None
    record["message" if status == "FAILED" else "reason"] = job.reason if finished else ""
    return record


def signature_refusal(
    authorization: str, path: str, access_key_id: str, secret_access_key: str
) -> tuple[int, str] | None:
    """None when `authorization` signs `path` with the key pair; else the gateway's
    (code, message)."""
    scheme, _, credential = authorization.partition(" ")
    parts = credential.split(":")
    if scheme != "alayanew-HMAC-SHA256" or len(parts) != 3 or not parts[1].isdigit():
        return 40001, "invalid Authorization header"
    ak, millis, sig = parts
    if abs(time.time() * 1000 - int(millis)) > LIST_SIGNATURE_SKEW_MS:
        return 40002, "timestamp outside +/-5 minutes of the server time"
    if ak != access_key_id:
        return 40006, "access key not found"
    message = f"{millis}|GET|{path}".encode()
    expected = hmac.new(secret_access_key.encode(), message, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, sig):
        return 40003, "signature mismatch"
    return None
