"""Served intervals recalibrated from the application's own reported runs (split conformal).

The forecaster's interval is that of the mean CPU availability over the run's window; a real
run also carries the benchmark's error, the application's own variability and short-window
load noise, so the served 95 % interval covered 45-85 % of ~18 s SOR runs (docs/sor.md) while
the predicted means were right. This module widens a served interval by what the application's
past runs say about the prediction's error.

Score of a past run: ``|log(actual / predicted mean)|`` (the mean scaled to the iterations the
run did, ``ppe.evaluation.live.judge``). With ``n`` scores and miscoverage ``alpha = 1 -
confidence``, the split-conformal bound is the ``k``-th smallest score, ``k = ceil((n + 1)(1 -
alpha))``: a new run exchangeable with the past ones lies inside ``mean * [e^-q, e^q]`` with
probability at least ``1 - alpha``. When ``k > n`` (fewer than ``1/alpha - 1`` runs: 19 at
95 %) no finite bound has that guarantee; the largest score is used and the answer says so.

The served interval is the union of the model's and the conformal one: never narrower than the
model's. The mean is not moved: the service's benchmark calibration (``ppe.evaluation.
calibration``) already corrects the speeds planning uses when a host has no benchmark, and a
median-ratio correction on top would count that error twice; a bias left in the ratios widens
the symmetric bound instead (the median ratio is reported beside it). Pure: the service reads
the runs (``ppe.service.recalibration``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ppe.evaluation.live import COMPLETED, RunOutcome, Served, judge

#: Completed runs needed before an application's intervals are recalibrated.
DEFAULT_MIN_RUNS = 8
#: Newest runs the bound is computed from.
DEFAULT_LAST = 50
#: The scores (:func:`scores`): the service's, and a normalised one for comparison.
RATIO, SCALED = "ratio", "scaled"


@dataclass(frozen=True)
class Recalibration:
    """The conformal bound on ``|log(actual / mean)|`` from an application's past runs."""

    #: runs the bound is computed from
    runs: int
    #: the bound: the served interval holds ``mean * [e^-q, e^q]``
    q: float
    #: the rank of ``q`` among the sorted scores (1-based), ``ceil((n + 1) * confidence)``
    #: clipped to ``n``
    rank: int
    confidence: float
    #: False when ``rank`` had to be clipped to ``n``: too few runs for the guarantee
    guaranteed: bool
    median_ratio: float
    #: "strategy" (runs of the same application and strategy) or "app" (across strategies)
    scope: str = "strategy"
    #: the score (:func:`scores`)
    kind: str = "ratio"


@dataclass(frozen=True)
class Widened:
    """A served interval after recalibration, and the model's own beside it."""

    low: float
    high: float
    model_low: float
    model_high: float
    #: served width over the model's (1 when the model's interval already held the bound)
    factor: float

    @property
    def widened(self) -> bool:
        return self.low < self.model_low or self.high > self.model_high


def conformal_rank(n: int, confidence: float) -> int:
    """``ceil((n + 1) * (1 - alpha))`` with ``alpha = 1 - confidence`` (may exceed ``n``)."""
    if n < 1 or not 0.0 < confidence < 1.0:
        raise ValueError("need n >= 1 and 0 < confidence < 1")
    # a hair below the product so that (n + 1) * 0.95 = 19.000000000000004 gives 19, not 20
    return math.ceil((n + 1) * confidence - 1e-9)


def scores(outcomes: Sequence[RunOutcome], kind: str = RATIO) -> list[float]:
    """Each completed run's score (runs without positive times give none).

    ``ratio`` (what the service uses): ``|log(actual / mean)|``. ``scaled`` (for comparison,
    ``bench_live_recalibration.py``): that log error over the model's own log half-width on
    the side the run fell, so the bound is a multiple of each answer's own interval: an
    answer the model is sure of gets a narrow one."""
    out = []
    for o in outcomes:
        if o.status != COMPLETED:
            continue
        j = judge(o)
        if j.actual <= 0 or j.mean <= 0:
            continue
        err = math.log(j.actual / j.mean)
        if kind == RATIO:
            out.append(abs(err))
            continue
        side = j.high if err >= 0 else j.low
        half = abs(math.log(side / j.mean)) if side > 0 else 0.0
        if half > 0:  # an interval with no width on that side has no scale: no score
            out.append(abs(err) / half)
    return out


def recalibration(
    outcomes: Sequence[RunOutcome],
    confidence: float,
    min_runs: int = DEFAULT_MIN_RUNS,
    scope: str = "strategy",
    kind: str = RATIO,
) -> Recalibration | None:
    """The bound from ``outcomes`` (the caller picks which: causal, newest ``last``); None
    with fewer than ``min_runs`` usable completed runs."""
    s = sorted(scores(outcomes, kind))
    if not s or len(s) < min_runs:
        return None
    n = len(s)
    k = conformal_rank(n, confidence)
    ratios = [
        j.actual / j.mean
        for j in (judge(o) for o in outcomes if o.status == COMPLETED)
        if j.actual > 0 and j.mean > 0
    ]
    return Recalibration(
        runs=n,
        q=s[min(k, n) - 1],
        rank=min(k, n),
        confidence=confidence,
        guaranteed=k <= n,
        median_ratio=statistics.median(ratios),
        scope=scope,
        kind=kind,
    )


def grouped(
    same: Sequence[RunOutcome],
    every: Sequence[RunOutcome],
    confidence: float,
    min_runs: int = DEFAULT_MIN_RUNS,
    kind: str = RATIO,
) -> Recalibration | None:
    """From the runs of the same strategy when there are ``min_runs`` of them, else from the
    application's runs across strategies (``every``), else None."""
    return recalibration(same, confidence, min_runs, "strategy", kind) or recalibration(
        every, confidence, min_runs, "app", kind
    )


def widen(mean: float, low: float, high: float, r: Recalibration) -> Widened:
    """The union of the model's interval and ``mean * [e^-q, e^q]`` (``scaled``: the model's
    interval stretched ``q`` times in log around the mean)."""
    if r.kind == RATIO:
        lo, hi = mean * math.exp(-r.q), mean * math.exp(r.q)
    else:
        lo = mean * (low / mean) ** r.q if 0 < low < mean else low
        hi = mean * (high / mean) ** r.q if high > mean > 0 else high
    new_low = min(low, lo)
    new_high = max(high, hi)
    width = high - low
    factor = (new_high - new_low) / width if width > 0 else math.inf
    return Widened(new_low, new_high, low, high, factor if new_high - new_low > width else 1.0)


def warning(r: Recalibration, w: Widened) -> str:
    """What the answer's warnings say about a widened interval."""
    scope = "this application and strategy" if r.scope == "strategy" else "this application"
    text = (
        f"makespan interval widened from {r.runs} reported runs of {scope}: "
        f"[{w.model_low:.4g}, {w.model_high:.4g}] -> [{w.low:.4g}, {w.high:.4g}] s "
        f"(x{w.factor:.3g} wider; {r.rank} of the {r.runs} took within "
        + (
            f"a factor e^{r.q:.3g} = {math.exp(r.q):.3g} of their predicted mean"
            if r.kind == RATIO
            else f"{r.q:.3g} times their interval's log half-width of their predicted mean"
        )
        + f"; median actual/predicted {r.median_ratio:.3g})"
    )
    if not r.guaranteed:
        need = math.ceil(r.confidence / (1 - r.confidence) - 1e-9)
        text += (
            f"; {r.runs} runs are fewer than the {need} a {r.confidence:.0%} conformal bound "
            "needs, so it is the widest seen and may still be too narrow"
        )
    return text


@dataclass(frozen=True)
class Pair:
    """One served prediction and what happened, for an offline replay of recalibration."""

    time: float
    mean: float
    low: float
    high: float
    actual: float
    confidence: float = 0.95
    #: group key (e.g. the strategy): a run is recalibrated from its group's past runs
    group: str = ""


@dataclass(frozen=True)
class ReplayCoverage:
    """Coverage of the model's intervals and of the recalibrated ones over the same runs."""

    runs: int
    #: runs whose interval was widened (enough earlier runs of their group)
    recalibrated: int
    inside_model: int
    inside_served: int
    #: over the recalibrated runs only: the model's coverage and the served one
    inside_model_recal: int
    inside_served_recal: int
    #: median served width / model width over the recalibrated runs
    median_factor: float | None
    #: median (high - low) / mean over the recalibrated runs: the model's, and served
    median_width_model: float | None = None
    median_width_served: float | None = None

    @property
    def coverage_model(self) -> float | None:
        return self.inside_model / self.runs if self.runs else None

    @property
    def coverage_served(self) -> float | None:
        return self.inside_served / self.runs if self.runs else None


def replay_coverage(
    pairs: Sequence[Pair],
    min_runs: int = DEFAULT_MIN_RUNS,
    last: int = DEFAULT_LAST,
    kind: str = RATIO,
) -> ReplayCoverage:
    """Replay ``pairs`` in time order, recalibrating as the service does: each run's interval
    from the newest ``last`` runs that ended strictly before it was served (a run's end is
    ``time + actual``), those of its group when there are ``min_runs`` of them, else those of
    every group (:func:`grouped`)."""
    order = sorted(pairs, key=lambda p: p.time)
    inside_m = inside_s = recal = in_m_r = in_s_r = 0
    factors: list[float] = []
    widths: list[tuple[float, float]] = []
    for p in order:
        ended = sorted(
            (q for q in order if q.time + q.actual < p.time), key=lambda q: q.time + q.actual
        )
        same = [_outcome(i, q) for i, q in enumerate(ended) if q.group == p.group][-last:]
        every = [_outcome(i, q) for i, q in enumerate(ended)][-last:]
        r = grouped(same, every, p.confidence, min_runs, kind)
        low, high = p.low, p.high
        m_in = p.low <= p.actual <= p.high
        if r is not None:
            w = widen(p.mean, p.low, p.high, r)
            low, high = w.low, w.high
            recal += 1
            factors.append(w.factor)
            widths.append(((p.high - p.low) / p.mean, (w.high - w.low) / p.mean))
            in_m_r += m_in
            in_s_r += low <= p.actual <= high
        inside_m += m_in
        inside_s += low <= p.actual <= high
    return ReplayCoverage(
        runs=len(order),
        recalibrated=recal,
        inside_model=inside_m,
        inside_served=inside_s,
        inside_model_recal=in_m_r,
        inside_served_recal=in_s_r,
        median_factor=statistics.median(factors) if factors else None,
        median_width_model=statistics.median(m for m, _ in widths) if widths else None,
        median_width_served=statistics.median(s for _, s in widths) if widths else None,
    )


def _outcome(i: int, p: Pair) -> RunOutcome:
    return RunOutcome(
        i, p.time + p.actual, COMPLETED, p.actual, Served(p.mean, p.low, p.high, p.confidence)
    )


def pairs_from_replay(report: Mapping[str, Any]) -> list[Pair]:
    """A ``ppe replay`` report's runs (``--no-runs`` left out) as pairs: served at the run's
    start, one group per strategy; runs without a finite prediction are skipped."""
    out = []
    for run in report.get("runs") or []:
        pred = run.get("predicted") or {}
        mean, (low, high) = pred.get("mean"), pred.get("interval") or (None, None)
        if mean is None or low is None or high is None or run.get("error"):
            continue
        out.append(
            Pair(
                float(run["start"]),
                float(mean),
                float(low),
                float(high),
                float(run["actual"]),
                float(pred.get("confidence") or 0.95),
                str(run["strategy"]),
            )
        )
    return out
