"""Pydantic schemas at the HTTP boundary (the contract in docs/architecture.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ppe.pipeline import DEFAULT_LINK

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
    index: int | None = Field(
        default=None, description="position of the offending item in the batch"
    )
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


Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Confidence = Annotated[float, Field(gt=0, lt=1)]


class HostIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name
    benchmark: Positive | None = Field(default=None, description="dedicated s per element update")
    min_rows: Annotated[int, Field(ge=0)] = 0
    max_rows: Annotated[int, Field(ge=0)] | None = None


class RowsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: Name
    rows: Annotated[int, Field(ge=0)]


class ScheduleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    app: str = Field(default="sor", description="sor, jacobi2d or a registered model's name")
    n: Annotated[int, Field(ge=1, le=10_000_000)]
    iterations: Annotated[int, Field(ge=1, le=100_000_000)] = 100
    hosts: Annotated[list[Name | HostIn], Field(min_length=1, max_length=1024)]
    strategy: str = "mean"
    k: Annotated[float, Field(ge=0, le=100)] = 2.0
    quantile: Confidence = 0.95
    bandwidth: Positive = Field(
        default=DEFAULT_LINK.bandwidth, description="bytes/s for links with no measurements"
    )
    latency: NonNegative = Field(
        default=DEFAULT_LINK.latency, description="s per message for links with no measurements"
    )
    confidence: Confidence = 0.95
    at: Annotated[float, Field(ge=0)] | None = None
    select: bool = Field(default=False, description="choose the subset and chain order (AppLeS)")
    params: dict[str, float] = Field(default_factory=dict, description="extra model parameters")
    replan_every_s: Positive | None = Field(
        default=None,
        description="the run checks its progress this often and asks again when behind: "
        "forecast that far ahead only (scheduler.ReplanPolicy)",
    )
    current: Annotated[list[RowsIn], Field(min_length=1, max_length=1024)] | None = Field(
        default=None,
        description="a running application's rows per host (iterations = those left): "
        "the answer says whether moving to the new schedule pays",
    )


class AllocationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: Name
    rows: Annotated[int, Field(ge=0)]
    benchmark: Positive | None = None


class PredictionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str = Field(default="sor", description="a built-in or registered model name")
    grammar: str | None = Field(default=None, description="inline model text instead of a name")
    params: dict[str, float] = Field(default_factory=dict)
    allocation: Annotated[list[AllocationIn], Field(min_length=1, max_length=1024)]
    bandwidth: Positive = DEFAULT_LINK.bandwidth
    latency: NonNegative = DEFAULT_LINK.latency
    confidence: Confidence = 0.95
    at: Annotated[float, Field(ge=0)] | None = None
    engine: Literal["auto", "analytic", "mc"] = "auto"
    samples: Annotated[int, Field(ge=100, le=200_000)] = 20_000
    seed: int = 0


class ModelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z][A-Za-z0-9_\-]*$")]
    text: Annotated[str, Field(min_length=1, max_length=100_000)]
    description: str = ""
