"""Pydantic schemas at the HTTP boundary (the contract in DESIGN.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9_.:@\-]+$")]
Metric = Literal["cpu", "bandwidth", "latency"]
Role = Literal["sensor", "app", "operator", "admin"]


class MeasurementIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    resource: Name
    metric: Metric
    peer: Name | None = None
    timestamp: Finite
    value: Finite


class MeasurementBatch(BaseModel):
    measurements: list[MeasurementIn]


class BatchAccepted(BaseModel):
    accepted: int = Field(description="items in the batch, all validated and stored")
    inserted: int = Field(description="new rows; the rest were already stored (idempotent)")
    duplicates: int


class Problem(BaseModel):
    index: int | None = Field(None, description="position of the offending item in the batch")
    field: str | None = None
    reason: str


class ProblemReport(BaseModel):
    detail: list[Problem]


class SeriesOut(BaseModel):
    metric: str
    peer: str | None
    samples: int
    latest_timestamp: float | None
    latest_value: float | None


class ResourceOut(BaseModel):
    name: str
    properties: dict[str, Any]
    series: list[SeriesOut]


class ResourceProperties(BaseModel):
    """Host properties; `benchmark` (dedicated s per element update) feeds the models."""

    model_config = ConfigDict(extra="allow")
    benchmark: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    memory_bytes: Annotated[int, Field(gt=0)] | None = None
    element_size: Annotated[int, Field(gt=0)] | None = None


class ResourcePut(BaseModel):
    properties: ResourceProperties


class TokenCreate(BaseModel):
    role: Role
    label: str = ""


class TokenCreated(BaseModel):
    token: str
    role: Role
