"""A host's benchmark calibrated from its reported runs and the CPU its sensor measured; its
links' bandwidth from the same runs' halo statistics.

Reads ppe-sor's run reports (per rank and per segment between migrations: host, rows, the
iterations ``from``/``to``, ``start``/``end`` unix times, compute seconds) and the host's cpu
samples over each segment's window; ``ppe.evaluation.calibration`` does the arithmetic. Planning
uses the result in place of a missing benchmark once ``min_runs`` runs back it; the API and the
host's dashboard page show it beside the configured one.

Links (:func:`link_calibrations`): every rank reports, per chain neighbour, the bytes of one
halo row and the mean of its fastest 10 % receives (``ppe.apps.sor.halo``). Per run and host
pair the smaller of the two ranks' figures is the transfer time (the rank that found its
neighbour waiting); ``ppe.evaluation.calibration.fit_link`` fits latency and bandwidth over
the runs' sizes, or, with one size, subtracts the sensors' latency for the link when the store
has it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from ppe.evaluation.calibration import (
    Calibration,
    LinkEstimate,
    Segment,
    Transfer,
    app_share,
    calibrate,
    cpu_share,
    fit_link,
    run_estimate,
    window_mean,
)
from ppe.pipeline import DEFAULT_LINK
from ppe.service.store.run_evidence import (
    ReportedRun,
    cpu_samples,
    link_mean,
    runs_on_host,
)

DEFAULT_MIN_RUNS = 3
#: Newest reported runs on a host that a calibration reads.
DEFAULT_LAST = 50
#: Samples read either side of a segment: the one before it bounds the first period, the first
#: after it reports the segment's tail (sensor periods are seconds to a minute).
SAMPLE_PAD_S = 300.0


@dataclass(frozen=True)
class HostCalibration:
    """What a host's runs say about its benchmark, beside what is configured."""

    host: str
    configured: float | None
    calibration: Calibration | None
    min_runs: int
    #: reported runs on the host read, and those that gave no estimate (no cpu samples over
    #: their windows, or no segment of theirs on this host)
    runs_read: int
    unusable: int

    @property
    def enough(self) -> bool:
        """Enough runs for planning to use it in place of a missing benchmark."""
        return self.calibration is not None and len(self.calibration.runs) >= self.min_runs

    @property
    def agrees(self) -> bool | None:
        """The configured benchmark inside the calibration's interval (None: nothing to
        compare); False is what an operator should look at."""
        if self.configured is None or self.calibration is None:
            return None
        return self.calibration.agrees(self.configured)


def _number(x: Any) -> float:
    value = float(x)
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def segments_of(run: ReportedRun, host: str) -> list[Segment]:
    """The run's segments on ``host`` (a report that lacks a field gives none: the report is
    free JSON, and runs of older clients carry no segments)."""
    out = []
    try:
        n = int(_number(run.params["n"]))
        for rank in run.report.get("ranks") or []:
            if not isinstance(rank, dict) or rank.get("host") != host:
                continue
            for seg in rank.get("segments") or []:
                out.append(
                    Segment(
                        run_id=run.id,
                        rows=int(_number(seg["rows"])),
                        n=n,
                        iterations=int(_number(seg["to"]) - _number(seg["from"])),
                        start=_number(seg["start"]),
                        end=_number(seg["end"]),
                        compute_s=_number(seg["compute_s"]),
                        cpu_s=_number(seg["cpu_s"]) if seg.get("cpu_s") is not None else None,
                    )
                )
    except (KeyError, TypeError, ValueError, AttributeError):
        return []
    return out


def host_calibration(
    session: Session,
    host: str,
    configured: float | None,
    min_runs: int = DEFAULT_MIN_RUNS,
    last: int = DEFAULT_LAST,
) -> HostCalibration:
    """The host's benchmark from its newest ``last`` completed, reported runs."""
    runs = runs_on_host(session, host, last)
    estimates = []
    for run in runs:
        segments = segments_of(run, host)
        shares = [
            0.0 if cpu_share(seg) is not None else sensor_share(session, host, seg)
            for seg in segments
        ]  # a segment with its own CPU time needs no sensor reading (run_estimate takes it)
        est = run_estimate(segments, shares) if segments else None
        if est is not None:
            estimates.append(est)
    return HostCalibration(
        host=host,
        configured=configured,
        calibration=calibrate(estimates),
        min_runs=min_runs,
        runs_read=len(runs),
        unusable=len(runs) - len(estimates),
    )


def sensor_share(session: Session, host: str, seg: Segment) -> float:
    """The application's share over the segment as the host's sensor read it (0: unread)."""
    samples = cpu_samples(session, host, seg.start - SAMPLE_PAD_S, seg.end + SAMPLE_PAD_S)
    reading = window_mean(samples, seg.start, seg.end)
    return 0.0 if reading is None else app_share(reading)


def configured_benchmark(properties: Mapping[str, Any]) -> float | None:
    value = properties.get("benchmark")
    return None if value is None else float(value)


def note(cal: HostCalibration) -> str:
    """What a schedule's warnings say when it planned a host with the calibrated benchmark."""
    c = cal.calibration
    assert c is not None
    se = "" if c.std_error is None else f" ± {c.std_error:.3g} (standard error)"
    return (
        f"host {cal.host!r} has no benchmark: planned with {c.benchmark:.4g} s per element "
        f"calibrated from {len(c.runs)} reported runs{se} "
        f"(GET /api/v1/resources/{cal.host}/calibration)"
    )


# ----------------------------------------------------------------------- links


@dataclass(frozen=True)
class LinkCalibration:
    """What the runs between ``host`` and ``peer`` say about their link, beside what the
    sensors measured (the newest samples' means) and the default planning assumes for a link
    with neither."""

    host: str
    peer: str
    estimate: LinkEstimate | None
    measured_bandwidth: float | None
    measured_latency: float | None
    min_runs: int
    default_bandwidth: float = DEFAULT_LINK.bandwidth

    @property
    def enough(self) -> bool:
        """A bandwidth backed by enough runs for planning to use on an unmeasured link."""
        e = self.estimate
        return e is not None and e.bandwidth is not None and e.runs >= self.min_runs

    @property
    def compared_with(self) -> str:
        """``measured`` when the sensors measure the link, else ``default``."""
        return "default" if self.measured_bandwidth is None else "measured"

    @property
    def agrees(self) -> bool | None:
        """The measured (else the default) bandwidth inside the estimate's interval; None
        without one. False is what an operator should look at."""
        if self.estimate is None:
            return None
        other = self.measured_bandwidth
        return self.estimate.agrees(self.default_bandwidth if other is None else other)


def hosts_by_rank(run: ReportedRun) -> dict[int, str]:
    """Rank -> host: the report's ranks, else the run's ``system`` in chain order."""
    out: dict[int, str] = {}
    for i, name in enumerate((run.system or "").split(",")):
        if name:
            out[i] = name
    for rank in run.report.get("ranks") or []:
        if isinstance(rank, dict) and isinstance(rank.get("host"), str):
            try:
                out[int(rank["rank"])] = rank["host"]
            except (KeyError, TypeError, ValueError):
                continue
    return out


def transfers_of(run: ReportedRun, host: str) -> dict[str, Transfer]:
    """Per peer of ``host`` in this run: the smaller of the two ranks' halo figures (a report
    without halo statistics, from an older ppe-sor, gives none)."""
    by_rank = hosts_by_rank(run)
    best: dict[str, Transfer] = {}
    for rank in run.report.get("ranks") or []:
        if not isinstance(rank, dict):
            continue
        for item in rank.get("halo") or []:
            try:
                a, b = by_rank[int(rank["rank"])], by_rank[int(item["peer"])]
                seconds, nbytes = _number(item["fast_s"]), _number(item["bytes"])
                sd, count = _number(item.get("fast_sd", 0.0)), int(item.get("fast_n", 1))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            if host not in (a, b) or a == b or seconds <= 0 or nbytes <= 0:
                continue
            peer = b if a == host else a
            error = sd / math.sqrt(count) if sd > 0 and count > 1 else None
            if peer not in best or seconds < best[peer].seconds:
                best[peer] = Transfer(run.id, nbytes, seconds, error)
    return best


def link_calibrations(
    session: Session,
    host: str,
    min_runs: int = DEFAULT_MIN_RUNS,
    last: int = DEFAULT_LAST,
    peers: Collection[str] | None = None,
) -> dict[str, LinkCalibration]:
    """Each link of ``host`` that its newest ``last`` reported runs exchanged halos over
    (only ``peers`` when given), with the sensors' figures for it."""
    points: dict[str, list[Transfer]] = {}
    for run in runs_on_host(session, host, last):
        for peer, transfer in transfers_of(run, host).items():
            if peers is None or peer in peers:
                points.setdefault(peer, []).append(transfer)
    out = {}
    for peer in sorted(points):
        latency = link_mean(session, host, peer, "latency")
        out[peer] = LinkCalibration(
            host=host,
            peer=peer,
            estimate=fit_link(points[peer], latency),
            measured_bandwidth=link_mean(session, host, peer, "bandwidth"),
            measured_latency=latency,
            min_runs=min_runs,
        )
    return out


def link_note(cal: LinkCalibration) -> str:
    """What a schedule's warnings say when it planned a link with the calibrated bandwidth."""
    e = cal.estimate
    assert e is not None and e.bandwidth is not None
    se = "" if e.std_error is None else f" ± {e.std_error:.3g} (standard error)"
    return (
        f"link {cal.host!r}-{cal.peer!r} has no measured bandwidth: planned with "
        f"{e.bandwidth:.4g} bytes/s calibrated from {e.runs} reported runs{se}, latency "
        f"{e.latency_source} (GET /api/v1/resources/{cal.host}/calibration)"
    )
