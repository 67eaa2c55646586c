"""The fake service's replies, as pydantic reads them."""

from __future__ import annotations

from pydantic import BaseModel, Field


class FakeJob(BaseModel):
    id: str = Field(min_length=1, max_length=128)
    state: str = Field(max_length=64)
    pods: list[str] = Field(default=[], max_length=64)


class JobList(BaseModel):
    jobs: list[FakeJob] = Field(max_length=1000)


class Load(BaseModel):
    gpu: float
