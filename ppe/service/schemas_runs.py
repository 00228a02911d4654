"""Schemas of the run store (``/api/v1/runs``): run reports and measured runs, bounded here.

The numbers (repetitions per run, runs per batch, report size) come from
:mod:`ppe.empirical.runs`, whose :func:`~ppe.empirical.runs.check_record` the route applies too:
the importers (``ppe runs import``) check a run with the same function, so both paths refuse the
same runs for the same reasons.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ppe.empirical.runs import (
    DEFAULT_KERNEL,
    DEFAULT_METRIC,
    MAX_BATCH,
    MAX_REPORT_BYTES,
    MAX_VALUES,
    RunRecord,
    check_report,
)
from ppe.service.schemas import INT64_MAX, LINE_PATTERN, NAME_PATTERN, ModelName, Params

#: A kernel: a region or call path as profilers name them (``main->solve``, ``MPI_Allreduce``).
KernelName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        pattern=LINE_PATTERN,
        description="a kernel (region, call path) name: one line of at most 255 chars",
    ),
]
MetricName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=LINE_PATTERN,
        description="what the values measure: time (seconds) by default, or another metric",
    ),
]
#: A system: one resource name, or several joined by commas ("h0,h1"), or a group's name.
_NAME = NAME_PATTERN.removeprefix("^").removesuffix("$")
SYSTEM_PATTERN = f"^{_NAME}(?:,{_NAME})*$"
SystemName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1024,
        pattern=SYSTEM_PATTERN,
        description="a resource name, resource names joined by commas, or a group's name",
    ),
]
RunKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=r"^[\x21-\x7e]+$",
        description="the client's idempotency key: 1-128 visible ASCII characters",
    ),
]
ScheduleId = Annotated[int, Field(ge=1, le=INT64_MAX, description="a served schedule's id")]
RunStatus = Literal["completed", "failed"]
RunValue = Annotated[float, Field(ge=0, allow_inf_nan=False)]


def _report(value: dict[str, Any] | None) -> dict[str, Any] | None:
    why = check_report(value)
    if why:
        raise ValueError(why)
    return value


class RunIn(BaseModel):
    """One measured run: an application's kernel at some parameter values on a system."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "app": "sor",
                    "kernel": "total",
                    "params": {"n": 1000, "p": 2, "iterations": 50},
                    "system": "h0,h1",
                    "values": [12.1, 11.8, 12.4],
                }
            ]
        },
    )
    app: ModelName
    kernel: KernelName = DEFAULT_KERNEL
    params: Params = Field(default_factory=dict)
    system: SystemName | None = None
    metric: MetricName = DEFAULT_METRIC
    values: Annotated[
        list[RunValue],
        Field(
            min_length=1,
            max_length=MAX_VALUES,
            description=f"one per repetition, 1 to {MAX_VALUES}: finite, >= 0 (s for time)",
        ),
    ]
    schedule_id: ScheduleId | None = Field(
        default=None, description="the schedule the run followed (GET /api/v1/schedules/{id})"
    )
    status: RunStatus = "completed"
    report: Annotated[dict[str, Any] | None, AfterValidator(_report)] = Field(
        default=None,
        description=f"free JSON (per-rank times, rows, re-plans...), at most "
        f"{MAX_REPORT_BYTES} bytes serialised",
    )
    key: RunKey | None = Field(
        default=None, description="idempotency key; default: a hash of the run's content"
    )

    def record(self) -> RunRecord:
        return RunRecord(
            app=self.app,
            values=tuple(self.values),
            kernel=self.kernel,
            params=dict(self.params),
            system=self.system,
            metric=self.metric,
            schedule_id=self.schedule_id,
            status=self.status,
            report=self.report,
            key=self.key,
        )

    @classmethod
    def of(cls, record: RunRecord) -> RunIn:
        """Validate a record read from a file as if it had been posted."""
        return cls.model_validate(
            {
                "app": record.app,
                "kernel": record.kernel,
                "params": dict(record.params),
                "system": record.system,
                "metric": record.metric,
                "values": list(record.values),
                "schedule_id": record.schedule_id,
                "status": record.status,
                "report": None if record.report is None else dict(record.report),
                "key": record.key,
            }
        )


class RunBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    runs: Annotated[
        list[RunIn],
        Field(min_length=1, max_length=MAX_BATCH, description=f"1 to {MAX_BATCH} runs"),
    ]


class RunsStored(BaseModel):
    stored: int = Field(description="new runs")
    duplicates: int = Field(description="runs already stored (same key): nothing new")
    ids: list[int] = Field(description="in request order; a duplicate's is the stored run's")


class RunOut(BaseModel):
    """A stored run: what was posted (``key`` filled in), its id and when it was stored."""

    id: int
    app: str
    kernel: str
    params: dict[str, float]
    system: str | None
    metric: str
    values: list[float]
    schedule_id: int | None = Field(
        description="null when the run named none, or its schedule left the served log"
    )
    status: RunStatus
    report: dict[str, Any] | None
    key: str
    created_at: float = Field(description="unix seconds")
