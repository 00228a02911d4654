"""Served makespan intervals widened by what the application's reported runs say.

Reads the runs linked to served schedules (``store.run_evidence.linked_runs``,
the join live accuracy reads) that were stored strictly before the answer is served, and lets
``ppe.evaluation.recalibration`` compute the bound. Same application and strategy when that
group has ``min_runs`` completed runs, else the application across strategies, else nothing.
The answer's ``makespan`` keeps the model's interval as ``model_interval`` and says how it was
widened in ``recalibrated``; its warnings say so in words.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from ppe.evaluation.live import RunOutcome
from ppe.evaluation.recalibration import (
    DEFAULT_LAST,
    DEFAULT_MIN_RUNS,
    RATIO,
    Recalibration,
    grouped,
    warning,
    widen,
)
from ppe.service.accuracy import outcome
from ppe.service.config import Settings
from ppe.service.store.run_evidence import linked_runs


@dataclass(frozen=True)
class RecalibrationPolicy:
    """``Settings.recalibration_min_runs`` / ``recalibration_last``; ``min_runs`` None: off."""

    min_runs: int | None = DEFAULT_MIN_RUNS
    last: int = DEFAULT_LAST
    #: the score (``ppe.evaluation.recalibration.scores``)
    kind: str = RATIO

    @classmethod
    def of(cls, min_runs: int, last: int, kind: str = RATIO) -> RecalibrationPolicy:
        """From the settings: ``min_runs`` 0 (or less) or ``last`` below 1 turn it off."""
        return cls(min_runs if min_runs > 0 and last > 0 else None, max(last, 1), kind)

    @classmethod
    def from_settings(cls, settings: Settings) -> RecalibrationPolicy:
        return cls.of(
            settings.recalibration_min_runs,
            settings.recalibration_last,
            settings.recalibration_score,
        )


def app_recalibration(
    session: Session,
    app: str,
    strategy: str | None,
    confidence: float,
    before: float,
    policy: RecalibrationPolicy,
) -> Recalibration | None:
    """The bound for a new answer of ``app`` (under ``strategy``; None for a prediction) from
    the newest ``policy.last`` linked runs stored before ``before``."""
    if policy.min_runs is None:
        return None

    def read(strat: str | None) -> list[RunOutcome]:
        runs = linked_runs(session, app, strat, policy.last, before=before, per_group=False)
        return [o for o in map(outcome, runs) if o is not None]

    same = read(strategy) if strategy is not None else []
    return grouped(same, read(None), confidence, policy.min_runs, policy.kind)


def recalibrated(
    makespan: Mapping[str, Any], r: Recalibration | None
) -> tuple[dict[str, Any], str | None]:
    """A copy of the served makespan with its interval widened, and the warning; unchanged
    (and no warning) when there is no bound or the model's interval already holds it."""
    out = dict(makespan)
    if r is None:
        return out, None
    mean, (low, high) = float(makespan["mean"]), makespan["interval"]
    w = widen(mean, float(low), float(high), r)
    if not w.widened:
        return out, None
    out["model_interval"] = [w.model_low, w.model_high]
    out["interval"] = [w.low, w.high]
    out["recalibrated"] = {
        "runs": r.runs,
        "scope": r.scope,
        "log_bound": r.q,
        "factor": w.factor,
        "rank": r.rank,
        "guaranteed": r.guaranteed,
        "median_ratio": r.median_ratio,
        "score": r.kind,
    }
    return out, warning(r, w)


def serve(
    session: Session,
    app: str | None,
    strategy: str | None,
    makespan: Mapping[str, Any],
    confidence: float,
    at: float | None,
    policy: RecalibrationPolicy,
) -> tuple[dict[str, Any], list[str]]:
    """The makespan to serve and the warnings to add. ``at`` (the request's, for answers as of
    a past time) bounds the runs read; live answers read the runs stored until now."""
    if app is None or policy.min_runs is None:
        return dict(makespan), []
    before = time.time() if at is None else at
    r = app_recalibration(session, app, strategy, confidence, before, policy)
    out, note = recalibrated(makespan, r)
    return out, [] if note is None else [note]
