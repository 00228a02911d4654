"""Planning one replay case: forecasts from the history before the start, then the pipeline.

This is the causal half of replay: :class:`HistoryForecasts` slices every host's history
to timestamps strictly before the start *before* anything else sees it, and feeds the
same :func:`forecaster.forecast_series` the service uses into :func:`ppe.pipeline.plan`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import forecaster
from ppe.core.stochastic import Point, from_components
from ppe.pipeline import HostForecasts, HostMeta, PlanOptions, plan

if TYPE_CHECKING:
    from ppe.replay.experiment import Case, CasePlan, HostData, ReplayConfig

#: Horizons are rounded to this relative step (geometric grid) before forecasting, so
#: strategies whose predicted run lengths are close share forecasts: a horizon moves by at
#: most 2.5 %, and block means over windows 2.5 % apart barely differ.
HORIZON_STEP = 0.05


@dataclass(frozen=True)
class History:
    """One host's series strictly before the start (what its sensor had sent)."""

    timestamps: np.ndarray
    values: np.ndarray
    bandwidth: np.ndarray | None = None


def history_before(
    ts: np.ndarray, values: np.ndarray, start: float, window_s: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Samples with ``start - window_s <= t < start`` — never at or after ``start``."""
    hi = int(np.searchsorted(ts, start, side="left"))
    lo = 0 if window_s is None else int(np.searchsorted(ts, start - window_s, side="left"))
    return ts[lo:hi], values[lo:hi]


def _bucket(horizon: float | None) -> float | None:
    if horizon is None:
        return None
    step = math.log1p(HORIZON_STEP)
    return float(math.exp(round(math.log(max(horizon, 1.0)) / step) * step))


def _stochastic(dist: Any) -> Any:
    return from_components(dist.kind, dist.components)


class HistoryForecasts:
    """``forecasts_for(horizon)`` over fixed histories, memoised per horizon bucket."""

    def __init__(
        self,
        histories: Mapping[str, History],
        start: float,
        *,
        confidence: float,
        bandwidth: float,
        latency: float,
    ) -> None:
        for name, h in histories.items():
            if h.timestamps.size and float(h.timestamps[-1]) >= start:
                raise ValueError(f"history of {name!r} reaches the start time")  # causality
        self.histories = dict(histories)
        self.start = start
        self.confidence = confidence
        self.bandwidth = bandwidth
        self.latency = latency
        self._cache: dict[float | None, dict[str, HostForecasts]] = {}
        self._base: dict[str, Any] = {}

    def __call__(self, horizon: float | None) -> dict[str, HostForecasts]:
        key = _bucket(horizon)
        if key not in self._cache:
            self._cache[key] = {n: self._host(n, key) for n in self.histories}
        return self._cache[key]

    def one_step(self, name: str) -> Any:
        """``forecast_series`` at the start with no horizon (one-step winner, recent fit)."""
        if name not in self._base:
            h = self.histories[name]
            self._base[name] = forecaster.forecast_series(
                h.timestamps, h.values, now=self.start, confidence=self.confidence,
                bounds=(0.01, 1.0),
            )
        return self._base[name]

    def distribution(self, ts: np.ndarray, xs: np.ndarray, horizon: float | None, base: Any) -> Any:
        """What ``forecast_series(..., horizon_s=horizon).distribution`` is, without re-running
        the predictor battery for every horizon (it does not depend on the horizon).
        A test pins the equality."""
        if horizon is None or horizon <= base.horizon_s:
            return base.distribution
        return forecaster.horizon_distribution(ts, xs, horizon, self.start)

    def _host(self, name: str, horizon: float | None) -> HostForecasts:
        h = self.histories[name]
        base = self.one_step(name)
        cpu = _stochastic(self.distribution(h.timestamps, h.values, horizon, base))
        bw: Any = Point(self.bandwidth)
        if h.bandwidth is not None:
            bfc = forecaster.forecast_series(
                h.timestamps, h.bandwidth, now=self.start, horizon_s=horizon,
                confidence=self.confidence, bounds=(0.0, self.bandwidth),
            )
            bw = _stochastic(bfc.distribution)
        return HostForecasts(
            cpu=cpu,
            default_bandwidth=bw,
            latency=self.latency,
            multimode=base.multimode,
            age_s=base.age_s,
            details={"predictor": base.predictor, "mse": base.mse, "mae": base.mae, "n": base.n,
                     "value": base.value, "horizon_s": horizon},
        )


def case_histories(case: Case, hosts: Sequence[HostData], config: ReplayConfig) -> dict[str, History]:
    out = {}
    for i in case.hosts:
        h = hosts[i]
        ts, vals = history_before(h.hist_t, h.hist_a, case.start, config.history_s)
        bw = None
        if h.bw_v is not None:
            live = np.isin(h.all_t, ts)
            bw = h.bw_v[live]
        out[h.name] = History(ts, vals, bw)
    return out


def plan_case(case: Case, hosts: Sequence[HostData], config: ReplayConfig) -> CasePlan:
    """Every strategy's plan for one case; a failing strategy is recorded, not raised."""
    from ppe.replay.experiment import CasePlan, StrategyOutcome

    t0 = time.perf_counter()
    metas = [HostMeta(hosts[i].name, hosts[i].benchmark) for i in case.hosts]
    fc = HistoryForecasts(
        case_histories(case, hosts, config), case.start, confidence=config.confidence,
        bandwidth=config.bandwidth, latency=config.latency,
    )
    result = CasePlan(index=case.index)
    result.multimode = {n: f.multimode for n, f in fc(None).items()}
    opts = PlanOptions(
        confidence=config.confidence, k=config.k, quantile=config.quantile,
        schedule_samples=config.schedule_samples, predict_samples=config.predict_samples,
        seed=case.seed,
    )
    params = {"n": config.n, "iterations": config.iterations}
    for s in config.strategies:
        try:
            res = plan(config.app, params, metas, fc, s, opts)
        except Exception as exc:  # noqa: BLE001 - a strategy failing is a result to report
            result.outcomes[s] = StrategyOutcome(
                rows=[0] * len(metas), error=f"{type(exc).__name__}: {exc}"
            )
            continue
        lo, hi = res.makespan.interval(config.confidence)
        result.outcomes[s] = StrategyOutcome(
            rows=res.allocation(), mean=float(res.makespan.mean()), std=float(res.makespan.std()),
            lo=float(lo), hi=float(hi), horizon_s=res.horizon_s, rounds=res.rounds,
        )
    result.seconds = time.perf_counter() - t0
    return result
