"""Pydantic schemas at the HTTP boundary (the contract in docs/architecture.md).

Every value a request carries is bounded here, where the request is validated, not by the store:
SQLite takes what PostgreSQL refuses (NUL bytes, over-long text, integers beyond 64 bits), so a
limit left to the database answers differently per store, and too late. Each kind of value has
one constrained type below, used by every route that takes it: a resource name is the same
:data:`ResourceName` in a measurement, a resource path, a schedule's hosts and a link's peer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from ppe.pipeline import DEFAULT_LINK

# ---------------------------------------------------------------------------- text

#: Resource (host) names: letters, digits and ``_ . : @ -`` (no spaces, slashes or control
#: characters), 1-255 characters (the store's column).
NAME_PATTERN = r"^[A-Za-z0-9_.:@\-]+$"
NAME_MAX = 255
#: One line of free text: no control characters at all (NUL included).
LINE_PATTERN = r"^[^\x00-\x1f\x7f]*$"
#: Free text over several lines: tab, newline and carriage return are the only control
#: characters allowed.
TEXT_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$"

#: What each pattern means, for error messages people read.
PATTERN_RULES = {
    NAME_PATTERN: "only letters, digits and _ . : @ - are allowed",
    LINE_PATTERN: "one line without control characters (NUL, tab, newline...)",
    TEXT_PATTERN: "no control characters other than tab and newline (no NUL)",
}

ResourceName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=NAME_MAX,
        pattern=NAME_PATTERN,
        description="a host's name: 1-255 of A-Z a-z 0-9 _ . : @ -",
    ),
]
#: Model (and signature) names.
MODEL_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_\-]{0,127}$"
ModelName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=MODEL_NAME_PATTERN,
        description="a model's name: a letter, then letters, digits, _ or -; at most 128",
    ),
]
#: Model parameter and resource property names: ASCII identifiers of at most 64 characters.
PARAM_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
ParamName = Annotated[str, Field(min_length=1, max_length=64, pattern=PARAM_PATTERN)]
Description = Annotated[
    str, Field(max_length=4096, pattern=TEXT_PATTERN, description="text, at most 4096 chars")
]
ModelText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=100_000,
        pattern=TEXT_PATTERN,
        description="performance-grammar text, at most 100 000 chars",
    ),
]
StrategyName = Annotated[str, Field(min_length=1, max_length=64, pattern=LINE_PATTERN)]

# ------------------------------------------------------------------------- numbers

INT64_MAX = 2**63 - 1
#: The largest grid side (and so rows per host) a request may ask for.
MAX_GRID = 10_000_000
#: Seeds of the Monte Carlo engines: 32 bits.
MAX_SEED = 2**32 - 1
#: The latest time a request may name: 2100-01-01 (unix seconds).
MAX_TIMESTAMP = 4_102_444_800.0
#: The longest horizon or re-planning period: a year, in seconds.
MAX_DURATION_S = 365 * 86_400.0
#: Parameter and property values: finite and at most this large in magnitude.
MAX_PARAM = 1e15

Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Confidence = Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]
Timestamp = Annotated[
    float,
    Field(ge=0, le=MAX_TIMESTAMP, allow_inf_nan=False, description="unix seconds, up to 2100"),
]
Duration = Annotated[
    float,
    Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False, description="seconds, at most a year"),
]
Rows = Annotated[int, Field(ge=0, le=MAX_GRID, description=f"grid rows, 0 to {MAX_GRID:,}")]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED, description="Monte Carlo seed, 0 to 2**32-1")]
Benchmark = Annotated[
    float,
    Field(
        ge=1e-12,
        le=1e3,
        allow_inf_nan=False,
        description="dedicated seconds per element update, 1e-12 to 1000",
    ),
]
ParamValue = Annotated[float, Field(ge=-MAX_PARAM, le=MAX_PARAM, allow_inf_nan=False)]
Params = Annotated[
    dict[ParamName, ParamValue],
    Field(max_length=64, description="model parameters: at most 64, finite, |value| <= 1e15"),
]
#: Path parameters: a row id (64-bit, positive) and a resource name.
IdPath = Annotated[int, Path(ge=1, le=INT64_MAX, description="a positive 64-bit id", examples=[1])]
NamePath = Annotated[ResourceName, Path(examples=["h0"])]
GroupPath = Annotated[ResourceName, Path(examples=["cluster-a"])]
#: Members of one named group of resources.
MAX_GROUP = 1024


class GroupIn(BaseModel):
    """A named group of registered resources (one system made of several hosts)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"members": ["h0", "h1"], "description": "rack 1"}]},
    )
    members: Annotated[list[ResourceName], Field(min_length=1, max_length=MAX_GROUP)]
    description: Description = ""


class GroupOut(BaseModel):
    name: str
    members: list[str]
    description: str
    updated_at: float


# ------------------------------------------------------------------------- metrics

Metric = Literal["cpu", "bandwidth", "latency"]
Role = Literal["sensor", "app", "operator", "admin"]


@dataclass(frozen=True)
class MetricRange:
    """The physically meaningful values of one metric; ingestion refuses the rest."""

    low: float
    high: float
    unit: str
    low_open: bool = False

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        return math.isfinite(value) and above and value <= self.high

    def __str__(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}] {self.unit}"


#: The one home of the metric bounds (README "The service and its API"): cpu is the available
#: fraction of a CPU; bandwidth is positive and at most 1 TB/s (a measured zero is a dead
#: link, which no forecast can divide by); latency is at most a minute per message.
METRIC_RANGES: dict[str, MetricRange] = {
    "cpu": MetricRange(0.0, 1.0, "(fraction of a CPU available)"),
    "bandwidth": MetricRange(0.0, 1e12, "bytes/s", low_open=True),
    "latency": MetricRange(0.0, 60.0, "s"),
}
_BW, _LAT = METRIC_RANGES["bandwidth"], METRIC_RANGES["latency"]
Bandwidth = Annotated[
    float, Field(gt=_BW.low, le=_BW.high, allow_inf_nan=False, description=f"bytes/s in {_BW}")
]
Latency = Annotated[
    float, Field(ge=_LAT.low, le=_LAT.high, allow_inf_nan=False, description=f"s in {_LAT}")
]

# ---------------------------------------------------------------------------- errors


class Problem(BaseModel):
    """One thing wrong with a request, or that the data cannot back: where, and why."""

    index: int | None = Field(
        default=None, description="position of the offending item in a measurement batch"
    )
    offset: int | None = Field(
        default=None, description="character offset in the body where its JSON is malformed"
    )
    field: str | None = Field(
        default=None,
        description="the offending field: a body path such as 'hosts[2].name' (relative to "
        "the item for batch items), or 'path.name' / 'query.horizon'",
    )
    reason: str


class ProblemReport(BaseModel):
    """Every 4xx body the service's routes produce, except model-text errors and auth."""

    detail: list[Problem]


class ModelProblem(BaseModel):
    """A problem in a model's text, parameters or evaluation (``ppe.core.ModelError``)."""

    type: Literal["model", "grammar", "parameter", "evaluation"]
    message: str
    line: int | None = None
    column: int | None = None
    token: str | None = None
    name: str | None = Field(default=None, description="the parameter or input concerned")


class ModelProblemReport(BaseModel):
    detail: list[ModelProblem]


class Message(BaseModel):
    """Authentication and authorisation failures (401, 403)."""

    detail: str


# --------------------------------------------------------------------- measurements


class MeasurementIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    resource: ResourceName
    metric: Metric
    peer: ResourceName | None = Field(default=None, description="the link's other end")
    timestamp: Finite = Field(
        description="unix seconds, >= 0 and at most the server's clock skew allowance ahead"
    )
    value: Finite = Field(
        description="; ".join(f"{m}: {r}" for m, r in METRIC_RANGES.items()),
    )


class MeasurementBatch(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "measurements": [
                        {"resource": "h0", "metric": "cpu", "timestamp": 1.7322e9, "value": 0.62},
                        {
                            "resource": "h0",
                            "metric": "bandwidth",
                            "peer": "h1",
                            "timestamp": 1.7322e9,
                            "value": 1.1e7,
                        },
                    ]
                }
            ]
        }
    )
    measurements: list[MeasurementIn]


class BatchAccepted(BaseModel):
    accepted: int = Field(description="items in the batch, all validated and stored")
    inserted: int = Field(description="new rows; the rest were already stored (idempotent)")
    duplicates: int


# ------------------------------------------------------------------------ resources


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


def _property_value(value: Any) -> Any:
    """A property other than the known ones: a JSON scalar the store keeps on every dialect."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise ValueError("integers must fit in 64 bits")
        return value
    if isinstance(value, float):
        if not (math.isfinite(value) and abs(value) <= MAX_PARAM):
            raise ValueError(f"numbers must be finite and at most {MAX_PARAM:g} in magnitude")
        return value
    if isinstance(value, str):
        if len(value) > 255 or not re.fullmatch(LINE_PATTERN, value):
            raise ValueError("text must be one line of at most 255 chars, no control characters")
        return value
    raise ValueError("a property is a boolean, an integer, a number, a line of text or null")


PropertyValue = Annotated[Any, AfterValidator(_property_value)]


class ResourceProperties(BaseModel):
    """Host properties; `benchmark` (dedicated s per element update) feeds the models. Other
    properties are kept as given: at most 64, named like identifiers, each a boolean, a
    64-bit integer, a finite number (|x| <= 1e15) or one line of text."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, PropertyValue] = Field(init=False)  # type: ignore[assignment]
    benchmark: Benchmark | None = None
    memory_bytes: Annotated[int, Field(gt=0, le=2**60, description="bytes, up to 1 EiB")] | None = (
        None
    )
    element_size: Annotated[int, Field(gt=0, le=2**20, description="bytes per element")] | None = (
        None
    )

    @model_validator(mode="after")
    def _extra_names(self) -> ResourceProperties:
        extra = self.__pydantic_extra__ or {}
        if len(extra) > 64:
            raise ValueError(f"at most 64 properties, got {len(extra)}")
        for key in extra:
            if not re.fullmatch(PARAM_PATTERN, key):
                raise ValueError(
                    f"property names are identifiers of at most 64 chars: {key[:80]!r}"
                )
        return self


class ResourcePut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"properties": {"benchmark": 2e-8, "memory_bytes": 8_000_000_000}}]
        }
    )
    properties: ResourceProperties


# Token schemas (labels included) live in schemas_tokens.py.


# ------------------------------------------------------------------------- planning


class HostIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: ResourceName
    benchmark: Benchmark | None = None
    min_rows: Rows = 0
    max_rows: Rows | None = None


def _host_kind(value: Any) -> str:
    return "~name" if isinstance(value, str) else "~host"


#: Union branch tags: they appear in validation error locations but name no field.
UNION_TAGS = frozenset({"~name", "~host"})
#: A schedule's host: its name, or an object with the name and its figures.
HostRef = Annotated[
    Annotated[ResourceName, Tag("~name")] | Annotated[HostIn, Tag("~host")],
    Discriminator(_host_kind),
]


class RowsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: ResourceName
    rows: Rows


class ScheduleRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "app": "sor",
                    "n": 1000,
                    "iterations": 10,
                    "hosts": ["h0", {"name": "h1", "benchmark": 3e-8}],
                    "strategy": "conservative",
                    "k": 2,
                }
            ]
        },
    )
    app: ModelName = Field(default="sor", description="sor, jacobi2d or a registered model's name")
    n: Annotated[int, Field(ge=1, le=MAX_GRID, description="grid side (rows), 1 to 10 000 000")]
    iterations: Annotated[int, Field(ge=1, le=100_000_000, description="1 to 100 000 000")] = 100
    hosts: Annotated[list[HostRef], Field(min_length=1, max_length=1024)]
    strategy: StrategyName = "mean"
    k: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] = 2.0
    quantile: Confidence = 0.95
    bandwidth: Bandwidth = Field(
        default=DEFAULT_LINK.bandwidth, description=f"bytes/s for unmeasured links, {_BW}"
    )
    latency: Latency = Field(
        default=DEFAULT_LINK.latency, description=f"s per message for unmeasured links, {_LAT}"
    )
    confidence: Confidence = 0.95
    at: Timestamp | None = Field(default=None, description="plan as of this unix time")
    select: bool = Field(default=False, description="choose the subset and chain order (AppLeS)")
    params: Params = Field(default_factory=dict)
    probe: Literal["signature"] | None = Field(
        default=None,
        description="run a stored PAS2P signature on each host without a benchmark in the "
        "request and plan with the speed it measures (docs/pas2p.md, Probes)",
    )
    probe_signature: ModelName | None = Field(
        default=None,
        description="the phase signature to probe with (default: the newest of the app's)",
    )
    probe_max_age_s: Annotated[float, Field(ge=0, le=MAX_DURATION_S, allow_inf_nan=False)] = Field(
        default=600.0, description="reuse a host's probe this recent (0: probe anew)"
    )
    replan_every_s: Duration | None = Field(
        default=None,
        description="the run checks its progress this often and asks again when behind: "
        "forecast that far ahead only (scheduler.ReplanPolicy); at most a year",
    )
    current: Annotated[list[RowsIn], Field(min_length=1, max_length=1024)] | None = Field(
        default=None,
        description="a running application's rows per host (iterations = those left): "
        "the answer says whether moving to the new schedule pays",
    )


class AllocationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: ResourceName
    rows: Rows
    benchmark: Benchmark | None = None


class PredictionRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "model": "sor",
                    "params": {"n": 1000, "I": 10},
                    "allocation": [{"host": "h0", "rows": 600}, {"host": "h1", "rows": 400}],
                }
            ]
        },
    )
    model: ModelName = Field(default="sor", description="a built-in or registered model name")
    grammar: ModelText | None = Field(default=None, description="inline model text instead")
    params: Params = Field(
        default_factory=dict,
        description="model parameters (finite, |value| <= 1e15); `n` (grid side) defaults to "
        "the allocation's rows, which must add up to it",
    )
    allocation: Annotated[list[AllocationIn], Field(min_length=1, max_length=1024)]
    bandwidth: Bandwidth = DEFAULT_LINK.bandwidth
    latency: Latency = DEFAULT_LINK.latency
    confidence: Confidence = 0.95
    at: Timestamp | None = None
    engine: Literal["auto", "analytic", "mc"] = "auto"
    samples: Annotated[int, Field(ge=100, le=200_000, description="100 to 200 000")] = 20_000
    seed: Seed = 0


class ModelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: ModelName
    text: ModelText
    description: Description = ""
