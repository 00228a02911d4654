"""Live accuracy of served schedules, and hosts' benchmarks and links' bandwidth calibrated
from reported runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field
from sqlalchemy import select

from ppe.evaluation.calibration import DEFAULT_CONFIDENCE
from ppe.evaluation.live import Judged
from ppe.service.accuracy import DEFAULT_LAST, group_accuracy
from ppe.service.auth import READ, require
from ppe.service.calibration import (
    LinkCalibration,
    configured_benchmark,
    host_calibration,
    link_calibrations,
)
from ppe.service.config import Settings
from ppe.service.deps import SessionDep, get_settings
from ppe.service.errors import NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.schemas import ModelName, NamePath
from ppe.service.store.models import Resource

router = APIRouter(tags=["accuracy"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)

StrategyName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z_]+$")]


class JudgedRun(BaseModel):
    """A completed run against the prediction as it applies to it (scaled to the iterations
    done when the run stopped early)."""

    run_id: int
    created_at: float
    actual: float = Field(description="seconds (the mean of the run's values)")
    mean: float = Field(description="predicted makespan mean, scaled")
    interval: tuple[float, float] = Field(description="served interval, scaled")
    scale: float = Field(description="iterations done / iterations the schedule was asked for")
    inside: bool
    relative_error: float | None
    ratio: float | None = Field(description="actual / predicted mean")


class GroupOut(BaseModel):
    app: str
    strategy: str
    runs: int = Field(description="linked runs looked at (the newest `last`)")
    completed: int
    failed: int = Field(description="failed runs: counted, never judged")
    unjudged: int = Field(description="linked runs whose served makespan could not be read")
    inside: int
    coverage: float | None = Field(description="share of completed runs inside the interval")
    coverage_interval: tuple[float, float] | None = Field(
        description="Wilson 95 % interval of the coverage"
    )
    nominal: float | None = Field(description="the served intervals' mean confidence")
    mean_relative_error: float | None = Field(description="mean |predicted - actual| / actual")
    mean_ratio: float | None = Field(description="mean actual / predicted makespan")
    median_ratio: float | None
    judged: list[JudgedRun] = Field(description="the completed runs, newest first")


def _judged(j: Judged) -> JudgedRun:
    return JudgedRun(
        run_id=j.run_id,
        created_at=j.created_at,
        actual=j.actual,
        mean=j.mean,
        interval=(j.low, j.high),
        scale=j.scale,
        inside=j.inside,
        relative_error=j.relative_error,
        ratio=j.ratio,
    )


@router.get("/accuracy", response_model=list[GroupOut])
def get_accuracy(
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    app: Annotated[ModelName | None, Query()] = None,
    strategy: Annotated[StrategyName | None, Query()] = None,
    last: Annotated[int, Query(ge=1, le=1000)] = DEFAULT_LAST,
) -> list[GroupOut]:
    """Per (application, strategy), over the newest ``last`` runs linked to a served
    schedule: coverage of the served interval, relative error of the mean, actual/predicted."""
    out = []
    for g in group_accuracy(session, app, strategy, last):
        f = g.figures
        out.append(
            GroupOut(
                app=g.app,
                strategy=g.strategy,
                runs=f.runs + g.unjudged,
                completed=f.completed,
                failed=f.failed,
                unjudged=g.unjudged,
                inside=f.inside,
                coverage=f.coverage,
                coverage_interval=f.coverage_interval,
                nominal=f.nominal,
                mean_relative_error=f.mean_relative_error,
                mean_ratio=f.mean_ratio,
                median_ratio=f.median_ratio,
                judged=[_judged(j) for j in f.judged],
            )
        )
    return out


class RunEstimateOut(BaseModel):
    run_id: int
    benchmark: float
    share: float = Field(description="mean CPU share the run got on the host in its compute")
    segments: int
    started: float
    share_source: str = Field(
        description='"cpu time" (the ranks\' own CPU clocks), "sensors" or "both"'
    )


class CalibratedOut(BaseModel):
    benchmark: float = Field(description="s per grid element per iteration (mean over runs)")
    std_error: float | None
    interval: tuple[float, float] | None
    confidence: float
    runs: list[RunEstimateOut]


class LinkOut(BaseModel):
    peer: str
    bandwidth: float | None = Field(
        description="bytes/s calibrated from the runs; null: see reason"
    )
    std_error: float | None
    interval: tuple[float, float | None] | None = Field(
        description="bandwidth interval; a null upper end: the runs cannot bound it from above"
    )
    confidence: float
    latency: float | None = Field(description="s per message: fitted, measured, or null")
    latency_std_error: float | None
    latency_source: str = Field(description='"fitted", "measured" or "not separated"')
    sizes: list[float] = Field(description="message sizes (bytes) the runs exchanged")
    runs: int
    reason: str | None
    measured_bandwidth: float | None = Field(
        description="the sensors' bandwidth for the link (mean of the newest 100 samples)"
    )
    measured_latency: float | None
    default_bandwidth: float = Field(description="what planning assumes for an unmeasured link")
    compared_with: str = Field(description='"measured", or "default" for an unmeasured link')
    agrees: bool | None = Field(
        description="the compared bandwidth inside the interval; false: check the link"
    )
    used_by_planning: str = Field(
        description='"measured" (sensors), "calibrated" (no sensor, enough runs) or "default"'
    )


class BandwidthOut(BaseModel):
    estimated: bool = Field(description="some link of the host has a calibrated bandwidth")
    reason: str | None
    links: list[LinkOut]


class CalibrationOut(BaseModel):
    host: str
    configured: float | None = Field(description="the registered benchmark")
    calibrated: CalibratedOut | None
    min_runs: int = Field(description="runs planning needs before it uses the calibrated value")
    used_by_planning: str | None = Field(
        description='"configured", "calibrated" (no benchmark registered, enough runs), or null'
    )
    agrees: bool | None = Field(
        description="configured inside the calibrated interval; false: check the configured"
    )
    runs_read: int
    unusable_runs: int = Field(description="runs read that gave no estimate (no cpu samples)")
    bandwidth: BandwidthOut


NO_LINKS = (
    "no reported run of this host carries halo statistics (ppe-sor's per-neighbour "
    "exchange times): nothing to estimate a link from"
)


def _link(cal: LinkCalibration) -> LinkOut:
    e = cal.estimate
    used = (
        "measured"
        if cal.measured_bandwidth is not None
        else "calibrated"
        if cal.enough
        else "default"
    )
    return LinkOut(
        peer=cal.peer,
        bandwidth=None if e is None else e.bandwidth,
        std_error=None if e is None else e.std_error,
        interval=None if e is None else e.interval,
        confidence=DEFAULT_CONFIDENCE if e is None else e.confidence,
        latency=None if e is None else e.latency,
        latency_std_error=None if e is None else e.latency_std_error,
        latency_source="" if e is None else e.latency_source,
        sizes=[] if e is None else list(e.sizes),
        runs=0 if e is None else e.runs,
        reason=None if e is None else e.reason,
        measured_bandwidth=cal.measured_bandwidth,
        measured_latency=cal.measured_latency,
        default_bandwidth=cal.default_bandwidth,
        compared_with=cal.compared_with,
        agrees=cal.agrees,
        used_by_planning=used,
    )


def bandwidth_out(links: Mapping[str, LinkCalibration]) -> BandwidthOut:
    out = [_link(c) for c in links.values()]
    estimated = any(link.bandwidth is not None for link in out)
    return BandwidthOut(
        estimated=estimated,
        reason=None if out else NO_LINKS,
        links=out,
    )


@router.get(
    "/resources/{name}/calibration",
    response_model=CalibrationOut,
    responses=NOT_FOUND,
    tags=["resources"],
)
def get_calibration(
    name: NamePath,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    settings: Annotated[Settings, Depends(get_settings)],
) -> CalibrationOut:
    """The host's benchmark calibrated from its reported runs, beside the configured one, and
    each of its links' bandwidth from the same runs' halo statistics, beside the measured one."""
    props = session.execute(
        select(Resource.properties).where(Resource.name == name)
    ).scalar_one_or_none()
    if props is None:
        found = session.execute(select(Resource.id).where(Resource.name == name)).first()
        if found is None:
            raise problem(404, f"no resource {name!r}", "path.name")
    configured = configured_benchmark(props or {})
    cal = host_calibration(session, name, configured, settings.calibration_min_runs)
    c = cal.calibration
    used = "configured" if configured is not None else "calibrated" if cal.enough else None
    return CalibrationOut(
        host=name,
        configured=configured,
        calibrated=None
        if c is None
        else CalibratedOut(
            benchmark=c.benchmark,
            std_error=c.std_error,
            interval=c.interval,
            confidence=c.confidence,
            runs=[
                RunEstimateOut(
                    run_id=r.run_id,
                    benchmark=r.benchmark,
                    share=r.share,
                    segments=r.segments,
                    started=r.started,
                    share_source=r.share_source,
                )
                for r in c.runs
            ],
        ),
        min_runs=cal.min_runs,
        used_by_planning=used,
        agrees=cal.agrees,
        runs_read=cal.runs_read,
        unusable_runs=cal.unusable,
        bandwidth=bandwidth_out(link_calibrations(session, name, settings.calibration_min_runs)),
    )
