"""Live accuracy over the store: the API's figures and the Prometheus collector behind them.

The metrics are computed at scrape time from the store (:class:`LiveCollector`), not kept in
each worker: with ``ppe serve --workers N`` every worker sees the runs any of them stored, so
whichever answers a scrape gives the same figures. A gauge set by the worker that stored the
last run would be missing from the others and, in prometheus-client's multiprocess mode, have
to be merged across worker files by a rule ("max", "mostrecent"...) that is no coverage at all;
and it would be empty after a restart until the next report. A counter of runs posted would
double-count re-posted batches the store treats as duplicates. The store is the truth.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from ppe.evaluation.live import Accuracy, RunOutcome, Served, accuracy
from ppe.service.store.models import Run, ServedLog
from ppe.service.store.run_evidence import LinkedRun, linked_runs

log = logging.getLogger("ppe.service.accuracy")

#: Runs per (application, strategy) the figures cover unless asked otherwise.
DEFAULT_LAST = 50


@dataclass(frozen=True)
class GroupAccuracy:
    app: str
    strategy: str
    figures: Accuracy
    #: linked runs whose served makespan could not be read (not counted anywhere else)
    unjudged: int


def _number(x: Any) -> float | None:
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def outcome(run: LinkedRun) -> RunOutcome | None:
    """A stored run as the pure module takes it; None when its served makespan is unreadable
    (an old or hand-written log row) or it has no values."""
    m = run.makespan or {}
    mean = _number(m.get("mean"))
    interval = m.get("interval")
    if mean is None or not isinstance(interval, list) or len(interval) != 2 or not run.values:
        return None
    low, high = _number(interval[0]), _number(interval[1])
    if low is None or high is None:
        return None
    served = Served(
        mean, low, high, _number(m.get("confidence")) or 0.95, _number(run.asked_iterations)
    )
    actual = sum(run.values) / len(run.values)
    return RunOutcome(
        run.id, run.created_at, run.status, actual, served, _number(run.params.get("iterations"))
    )


def group_accuracy(
    session: Session, app: str | None = None, strategy: str | None = None, last: int = DEFAULT_LAST
) -> list[GroupAccuracy]:
    """Per (application, strategy): the figures over its newest ``last`` linked runs."""
    groups: dict[tuple[str, str], list[LinkedRun]] = {}
    for run in linked_runs(session, app, strategy, last):
        groups.setdefault((run.app, run.strategy), []).append(run)
    out = []
    for (a, s), runs in sorted(groups.items()):
        found = [outcome(r) for r in runs]
        judged = [o for o in found if o is not None]
        out.append(GroupAccuracy(a, s, accuracy(judged), len(found) - len(judged)))
    return out


def reported_counts(session: Session) -> Sequence[tuple[str, str, str, int]]:
    """Runs stored per (application, strategy of the linked schedule or "", status)."""
    strat = func.coalesce(ServedLog.response["strategy"].as_string(), "")
    rows = session.execute(
        select(Run.app, strat, Run.status, func.count())
        .join(ServedLog, ServedLog.id == Run.schedule_id, isouter=True)
        .group_by(Run.app, strat, Run.status)
    ).all()
    return [(a, s, st, int(n)) for a, s, st, n in rows]


class LiveCollector(Collector):
    """``ppe_runs_reported_total``, ``ppe_live_*`` gauges: read from the store per scrape."""

    def __init__(self, sessions: sessionmaker[Session], last: int = DEFAULT_LAST) -> None:
        self.sessions = sessions
        self.last = last

    def describe(self) -> list[Any]:
        return []  # nothing at registration: the store may not be reachable yet

    def collect(self) -> Iterator[Any]:
        """The store's figures; none (the rest of the scrape still answers) when it is down."""
        try:
            with self.sessions() as session:
                counts = reported_counts(session)
                groups = group_accuracy(session, last=self.last)
        except SQLAlchemyError as exc:
            log.warning("live metrics skipped: the store did not answer (%s)", exc)
            return
        reported = CounterMetricFamily(
            "ppe_runs_reported",
            "Runs stored (reports and measured runs), by the linked schedule's strategy "
            '("" when the run followed none)',
            labels=["app", "strategy", "status"],
        )
        for app, strategy, status, n in counts:
            reported.add_metric([app, strategy, status], n)
        yield reported
        gauges = {
            "coverage": "Share of the last runs' actual times inside the served interval",
            "nominal_coverage": "The served intervals' stated confidence (what coverage should be)",
            "mean_relative_error": "Mean |predicted mean - actual| / actual over the last runs",
            "makespan_ratio": "Mean actual / predicted makespan over the last runs",
            "runs": "Completed linked runs the live figures cover",
            "failed_runs": "Failed linked runs among the last runs",
        }
        families = {
            k: GaugeMetricFamily(f"ppe_live_{k}", text, labels=["app", "strategy"])
            for k, text in gauges.items()
        }
        for g in groups:
            f = g.figures
            values = {
                "coverage": f.coverage,
                "nominal_coverage": f.nominal,
                "mean_relative_error": f.mean_relative_error,
                "makespan_ratio": f.mean_ratio,
                "runs": float(f.completed),
                "failed_runs": float(f.failed),
            }
            for k, v in values.items():
                if v is not None:
                    families[k].add_metric([g.app, g.strategy], v)
        yield from families.values()
