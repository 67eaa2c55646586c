"""Why a job failed: one class from a closed set, from the job's events and pods' reasons.

A provider gives a table of `Rule`s (its own spellings of event reasons and messages); the
`Classifier` matches every piece of `Evidence` a failed job left against every rule and
returns the class that comes first in `CLASSES` among those that matched, or `UNKNOWN`. The
order puts causes before symptoms: a GPU that fell off the bus makes NCCL time out and the
rank exit 1, so `hardware` beats `collective`, which beats `user_exit`; an eviction kills
with the same exit code 137 as the OOM killer, so `preempted` beats `oom`; a job that never
ran has no exit code, so `image_pull` and `scheduling` only decide when nothing else did.

Each rule says where its spelling comes from (`PROVENANCE`): the provider's documentation,
the examples of the provider's pages (`observed`), or Kubernetes, Kubeflow and PyTorch
conventions (`inferred`). docs/metrics.md carries the same table; a test holds them together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

HARDWARE: Final = "hardware"
PREEMPTED: Final = "preempted"
OOM: Final = "oom"
COLLECTIVE: Final = "collective"
USER_EXIT: Final = "user_exit"
IMAGE_PULL: Final = "image_pull"
SCHEDULING: Final = "scheduling"
UNKNOWN: Final = "unknown"
# The closed set of the `class` label, causes first: the first that matched wins.
CLASSES: Final = (
    HARDWARE,
    PREEMPTED,
    OOM,
    COLLECTIVE,
    USER_EXIT,
    IMAGE_PULL,
    SCHEDULING,
    UNKNOWN,
)
MEANING: Final = {
    HARDWARE: "node or GPU hardware: Xid, ECC, a node not ready, fault tolerance that "
    "could not start",
    PREEMPTED: "preempted or evicted by the scheduler or the node",
    OOM: "out of memory: the OOM killer (exit code 137, OOMKilled) or CUDA out of memory",
    COLLECTIVE: "collective communication: NCCL errors and timeouts, the watchdog, a hang",
    USER_EXIT: "the job's own process exited non-zero",
    IMAGE_PULL: "the image could not be pulled",
    SCHEDULING: "the job could not be scheduled (no room, unschedulable)",
    UNKNOWN: "no rule matched what the job left",
}

Provenance = Literal["documented", "observed", "inferred"]
PROVENANCE: Final[dict[str, str]] = {
    "documented": "documented by the provider",
    "observed": "observed in the examples of the provider's pages",
    "inferred": "inferred from Kubernetes, Kubeflow and PyTorch conventions",
}
# Text kept per piece of evidence: enough for any pattern of a table, bounded whatever comes.
MAX_EVIDENCE_CHARS: Final = 512


@dataclass(frozen=True, slots=True)
class Rule:
    """Evidence whose reason fully matches `reason` (when set) and whose message contains a
    match of `message` (when set) points at `failure_class`."""

    failure_class: str
    reason: str | None
    message: str | None
    provenance: Provenance
    example: str

    def __post_init__(self) -> None:
        if self.failure_class not in CLASSES or self.failure_class == UNKNOWN:
            raise ValueError(f"no rule may point at {self.failure_class!r}")
        if self.reason is None and self.message is None:
            raise ValueError("a rule matches a reason, a message or both")

    def matches(self, evidence: Evidence) -> bool:
        if self.reason is not None and re.fullmatch(self.reason, evidence.reason) is None:
            return False
        return self.message is None or re.search(self.message, evidence.message) is not None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One thing a failed job left: an event's reason and message, or a pod's reason.
    `warning`: it would be worth a rule (a Warning event, a pod's failure reason)."""

    reason: str
    message: str = ""
    warning: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    failure_class: str
    # Reasons of warning evidence no rule matched: what a new rule would need.
    unmapped: frozenset[str]


class Classifier:
    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self._rank = {name: index for index, name in enumerate(CLASSES)}

    def classify(self, evidence: Iterable[Evidence]) -> Verdict:
        best = UNKNOWN
        unmapped: set[str] = set()
        for item in evidence:
            found = [r.failure_class for r in self.rules if r.matches(item)]
            if not found and item.warning:
                unmapped.add(item.reason)
            for name in found:
                if self._rank[name] < self._rank[best]:
                    best = name
        return Verdict(best, frozenset(unmapped) if best == UNKNOWN else frozenset())
