"""Alaya NeW Cloud: `client`, `models`, `mapping`, `discovery` (which jobs: configured,
`jobsfile`, `listing`) and `provider`."""

from exporter.providers.alaya.discovery import JobSource, JobTarget, StaticJobs
from exporter.providers.alaya.provider import AlayaProvider

__all__ = ["AlayaProvider", "JobSource", "JobTarget", "StaticJobs"]
