"""``ppe forecast-eval --horizons``: score horizon forecasts on recorded traces, causally.

The protocol is the one an outside client runs against ``GET /forecasts/{r}/cpu?horizon=H&at=T``
(the whole trace posted): for each trace, random forecast times ``T`` (seeded per trace and
horizon), history strictly before ``T``, and the distribution of the mean CPU availability over
``[T, T + H)`` as the service computes it (:func:`forecast_case`: the same ``snap_horizon``,
:func:`forecaster.series_distribution`, interval and clipping to [0, 1] as
``ForecastCache._forecast_at`` / :func:`forecaster.forecast_series`). The realised value is the
mean of the samples in ``[T, T + H)``; a time whose window holds less than half of the samples
it should (the 31-hour gap, a dead stretch) is drawn again.

Four methods are scored on the same cases (six with ``--switching``):

- ``forecaster``: what the service answers today (analogues with the honest fallback);
- ``analog_legacy``: the analogue method before the fallback (``LEGACY_ANALOG``);
- ``switching``: the semi-Markov switching model (:mod:`forecaster.switching`) where the
  history has several modes, the forecaster's answer elsewhere (tried, not adopted);
- ``combined``: an equal mixture of ``switching`` and ``forecaster`` where the forecaster falls
  back, the forecaster's answer elsewhere (tried, not adopted);
- ``unconditional``: the empirical distribution of the means of *all* past windows of length
  ``H`` in the history the service holds, each start sample one window;
- ``ar1``: the peer a practitioner would reach for, statsmodels' ``AutoReg`` AR(1) with a
  constant fitted on the last 14 days, and the Gaussian distribution of the mean of the next
  ``H`` samples under it (:func:`ppe.evaluation.baselines.ar1_horizon_mean`); a point at the
  last value where the history is constant.

The history is cut to the newest ``SERVICE_HISTORY`` samples before ``T``, as the service's
store read is (``Settings.history_limit``, 5000: 17 days of 5-minute samples).

Scores: coverage of the nominal 95 % interval the service answers (the shortest one, of the
value censored to [0, 1]: ``Distribution.interval``; for ``unconditional`` the shortest span
holding 95 % of its sample), its mean width, the pinball loss of the central 2.5 % and 97.5 %
quantiles (their average), the MAE of the forecast mean against the realised mean, and the
CRPS of each method's whole distribution (censored to [0, 1] as the service clips) beside the
last value before ``T`` as a point forecast, whose CRPS is its absolute error
(:func:`scored_case`); per horizon and per host category. Widths compare fairly only at equal
coverage, so each row also gives the forecaster's width at the coverage the unconditional
baseline reached (:func:`width_at_coverage`) and how often the baseline's whole range held the
outcome (:func:`range_coverage`).
The category is decided from the last 7 days before ``T`` only (:func:`category`), in this
order:

- ``bimodal``: at least 5 % of samples below 0.35 *and* at least 5 % above 0.85;
- ``idle``: at most 5 % of the samples below 0.9 (``forecaster.fleet.settled_high``, the
  hosts that borrow the fleet's outcomes);
- ``steady``: standard deviation at most 0.05;
- ``variable``: everything else.
"""

from __future__ import annotations

import io
import math
import zlib
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import binomtest, bootstrap
from threadpoolctl import threadpool_limits

from forecaster.analog import CPU_ANALOG, LEGACY_ANALOG
from forecaster.api import series_distribution
from forecaster.config import DEFAULT_CONFIG
from forecaster.distribution import Distribution, clip, mixed
from forecaster.fleet import FLEET, FleetSource, HostWindows, settled_high
from forecaster.history import FloatArray, series_before
from forecaster.horizon import sample_spacing, snap_horizon
from forecaster.switching import switching_horizon
from ppe.evaluation.baselines import ar1_horizon_mean
from ppe.traces import Trace, expand_paths, read_trace

DEFAULT_HORIZONS = (300.0, 3600.0, 21600.0, 86400.0, 259200.0)
METHODS = ("forecaster", "analog_legacy", "unconditional", "ar1")
#: The history the ``ar1`` peer is fitted on (the analogues' lookback).
AR1_HISTORY_S = 14 * 86400.0
#: Tried against the analogues, scored with ``--switching`` (not what the service answers).
EXPERIMENTS = ("switching", "combined")
CATEGORIES = ("steady", "variable", "bimodal", "idle")
CONFIDENCE = 0.95
CPU_BOUNDS = (0.0, 1.0)
CATEGORY_WINDOW_S = 7 * 86400.0
#: Fewest realised samples a window must hold, as a share of what its length should hold.
MIN_REALISED = 0.5
COVERAGE_BAND = (0.93, 0.97)
#: Points of the CRPS integral over the availability range (:func:`censored_crps`): a spacing
#: of 0.0005, a quarter of the narrowest kernel the analogues use.
CRPS_POINTS = 2001
#: Nominal levels of the forecaster's intervals kept per case, to compare widths with a
#: baseline at the coverage that baseline reached (:func:`width_at_coverage`).
SHARPNESS_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, CONFIDENCE)
#: Resamples of the traces behind each row's coverage interval (:func:`coverage_interval`).
BOOTSTRAP_RESAMPLES = 2000
#: Samples the service reads before ``at`` (ppe.service.config.Settings.history_limit default).
SERVICE_HISTORY = 5000


@dataclass(frozen=True)
class HorizonOptions:
    horizons: tuple[float, ...] = DEFAULT_HORIZONS
    cases: int = 3000  # per horizon over all traces (spread evenly)
    seed: int = 0
    min_history_s: float = 2 * 86400.0  # history before the first possible T
    keep_dead: bool = False
    switching: bool = False  # also score the semi-Markov model and its mix with the forecaster
    fleet: bool = True  # the other traces are the fleet the service would hold (forecaster.fleet)


def category(ts: FloatArray, xs: FloatArray, now: float) -> str:
    """The host's behaviour over the 7 days before ``now`` (module docstring's rule)."""
    recent = xs[(ts < now) & (ts >= now - CATEGORY_WINDOW_S)]
    if recent.size == 0:
        return "variable"
    if np.mean(recent < 0.35) >= 0.05 and np.mean(recent > 0.85) >= 0.05:
        return "bimodal"
    if settled_high(ts, xs, now, CPU_BOUNDS, FLEET):
        return "idle"
    if float(recent.std()) <= 0.05:
        return "steady"
    return "variable"


def unconditional(ts: FloatArray, xs: FloatArray, now: float, horizon_s: float) -> FloatArray:
    """Means of every past window of ``horizon_s`` (in samples) that ends before ``now``; the
    values themselves when the history is shorter than one window."""
    keep = ts < now
    t, x = ts[keep], xs[keep]
    width = max(1, int(round(horizon_s / sample_spacing(t))))
    if x.size < width:
        return x
    csum = np.concatenate(([0.0], np.cumsum(x)))
    out: FloatArray = (csum[width:] - csum[:-width]) / width
    return out


def summarise(dist: Distribution) -> dict[str, float]:
    """The mean and the 95 % interval the service answers (the shortest, of the value censored
    to [0, 1]), and the central quantiles the pinball loss scores, clipped to [0, 1] as the
    service clips."""
    lower, upper = dist.interval(CONFIDENCE, CPU_BOUNDS)
    mean, q_lower, q_upper = _clipped(_unclipped(dist))
    return {"mean": mean, "lower": lower, "upper": upper, "q_lower": q_lower, "q_upper": q_upper}


def _unclipped(dist: Distribution) -> tuple[float, float, float]:
    """The mean and central interval as fitted (the recalibration benchmark stretches them)."""
    return (dist.mean, *dist.interval(CONFIDENCE))


def sample_summary(sample: FloatArray) -> dict[str, float]:
    """:func:`summarise` of an empirical distribution: the shortest span holding 95 % of the
    sample (as many points as a 95 % share rounds up to) beside its central quantiles, and
    its whole range (what the widest interval drawn from it could cover)."""
    s = np.sort(np.asarray(sample, dtype=np.float64))
    k = min(s.size, math.ceil(CONFIDENCE * s.size - 1e-9))
    spans = s[k - 1 :] - s[: s.size - k + 1]
    i = int(np.argmin(spans))
    q_lower, q_upper = np.quantile(s, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    return {
        "mean": float(s.mean()),
        "lower": float(s[i]),
        "upper": float(s[i + k - 1]),
        "q_lower": float(q_lower),
        "q_upper": float(q_upper),
        "min": float(s[0]),
        "max": float(s[-1]),
    }


def _clipped(summary: tuple[float, float, float]) -> tuple[float, float, float]:
    lo, hi = CPU_BOUNDS
    mean, lower, upper = (min(max(v, lo), hi) for v in summary)
    return mean, lower, upper


def forecast_case(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float,
    experiments: bool = False,
    fleet: Sequence[HostWindows] = (),
) -> dict[str, Any]:
    """Every method's forecast of the mean over ``[now, now + horizon_s)`` and the host's
    category, from samples strictly before ``now`` (the arrays may hold the future: it is cut
    here, as the service's store read does). ``fleet``: the other hosts, as the service holds
    them (their windows that ended before ``now`` are all that is read)."""
    return _forecasts(timestamps, values, now, horizon_s, experiments, fleet)[0]


def scored_case(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float,
    actual: float,
    experiments: bool = False,
    fleet: Sequence[HostWindows] = (),
) -> dict[str, Any]:
    """:func:`forecast_case` with the realised mean ``actual`` and each method's CRPS of it
    (:func:`censored_crps`; the unconditional sample's by :func:`sample_crps`), and the last
    value before ``now``, the persistence forecast whose CRPS is its absolute error. The
    forecasts are made first, from the history alone; ``actual`` only scores them."""
    case, dists, sample = _forecasts(timestamps, values, now, horizon_s, experiments, fleet)
    for name, dist in dists.items():
        case[name]["crps"] = censored_crps(dist, actual)
    case["unconditional"]["crps"] = sample_crps(sample, actual)
    case.update(horizon_s=horizon_s, at=now, actual=actual)
    return case


def _forecasts(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float,
    experiments: bool,
    fleet: Sequence[HostWindows],
) -> tuple[dict[str, Any], dict[str, Distribution], FloatArray]:
    """:func:`forecast_case`, with the distributions it summarised and the unconditional
    sample."""
    ts, xs = service_history(timestamps, values, now)
    snapped = snap_horizon(horizon_s)
    out: dict[str, Any] = {"category": category(ts, xs, now)}
    served = series_distribution(
        ts,
        xs,
        now=now,
        horizon_s=snapped,
        analog=CPU_ANALOG,
        fleet=(lambda: fleet) if fleet else None,
    )
    legacy = series_distribution(ts, xs, now=now, horizon_s=snapped, analog=LEGACY_ANALOG)
    dists = {"forecaster": served, "analog_legacy": legacy}
    if experiments:
        switching = switching_horizon(ts, xs, now, snapped) if snapped is not None else None
        dists["switching"] = served if switching is None else switching
        dists["combined"] = (
            served if switching is None or not served.fallback else mixed(served, switching)
        )
    for name, dist in dists.items():
        out[name] = summarise(dist)
    out["forecaster"].update(
        support=served.support,
        fallback=served.fallback,
        fleet=served.fleet,
        unclipped=list(_unclipped(served)),
        levels=[list(served.interval(level, CPU_BOUNDS)) for level in SHARPNESS_LEVELS],
    )
    sample = unconditional(ts, xs, now, horizon_s)
    out["unconditional"] = sample_summary(sample)
    dists["ar1"] = ar1_distribution(ts, xs, now, horizon_s)
    out["ar1"] = summarise(dists["ar1"])
    out["last_value"] = float(xs[-1])
    return out, dists, sample


def censored_crps(dist: Distribution, y: float, bounds: tuple[float, float] = CPU_BOUNDS) -> float:
    """The CRPS of ``dist`` censored to ``bounds`` (as the service clips) at ``y`` in them:
    the integral over the range of ``(F(x) - 1{x >= y})**2``, by the trapezoid rule on
    :data:`CRPS_POINTS` points split at ``y``. A point forecast's is its absolute error."""
    lo, hi = bounds
    if dist.kind == "point":
        return abs(y - clip(dist.mean, bounds))
    below = np.linspace(lo, y, max(2, round(CRPS_POINTS * (y - lo) / (hi - lo))))
    above = np.linspace(y, hi, max(2, round(CRPS_POINTS * (hi - y) / (hi - lo))))
    left = float(np.trapezoid(dist.cdf(below) ** 2, below))
    right = float(np.trapezoid((1.0 - dist.cdf(above)) ** 2, above))
    return left + right


def sample_crps(sample: FloatArray, y: float) -> float:
    """The CRPS of the empirical distribution of ``sample`` at ``y``:
    ``E|X - y| - E|X - X'| / 2``, the pair term from the sorted sample in O(n log n)."""
    s = np.sort(np.asarray(sample, dtype=np.float64))
    n = s.size
    pairs = 2.0 * float(np.dot(2.0 * np.arange(n) - n + 1.0, s)) / (n * n)
    return float(np.mean(np.abs(s - y))) - pairs / 2.0


def ar1_distribution(ts: FloatArray, xs: FloatArray, now: float, horizon_s: float) -> Distribution:
    """The ``ar1`` peer's distribution of the mean over ``[now, now + horizon_s)``."""
    recent = xs[ts >= now - AR1_HISTORY_S]
    steps = max(1, round(horizon_s / sample_spacing(ts)))
    fit = ar1_horizon_mean(recent, steps)
    if fit is None:
        last = float(xs[-1])
        return Distribution("point", [(1.0, last, 0.0)], last, 0.0, False, int(recent.size))
    mean, sd = fit
    return Distribution("normal", [(1.0, mean, sd)], mean, sd, False, int(recent.size))


def service_history(
    timestamps: FloatArray, values: FloatArray, now: float, limit: int = SERVICE_HISTORY
) -> tuple[FloatArray, FloatArray]:
    """The samples the service would read for a forecast ``at=now``: strictly before ``now``,
    the newest ``limit`` of them (the arrays may hold the future: it is cut here)."""
    ts, xs = series_before(timestamps, values, now)
    return ts[-limit:], xs[-limit:]


def realised(ts: FloatArray, xs: FloatArray, now: float, horizon_s: float) -> float | None:
    """Mean of the samples in ``[now, now + horizon_s)``; None when too few are there."""
    inside = (ts >= now) & (ts < now + horizon_s)
    need = max(1, int(MIN_REALISED * horizon_s / sample_spacing(ts)))
    if int(inside.sum()) < need:
        return None
    return float(xs[inside].mean())


def forecast_times(
    ts: FloatArray, xs: FloatArray, name: str, horizon_s: float, count: int, opts: HorizonOptions
) -> list[tuple[float, float]]:
    """``count`` seeded random times (with their realised means) that leave ``min_history_s``
    before and a realisable window after; fewer when the trace cannot hold them."""
    first, last = float(ts[0]) + opts.min_history_s, float(ts[-1]) - horizon_s
    if last <= first:
        return []
    rng = np.random.default_rng([opts.seed, zlib.crc32(name.encode()), int(horizon_s)])
    out: list[tuple[float, float]] = []
    for _ in range(20 * count):
        if len(out) == count:
            break
        t = float(rng.uniform(first, last))
        y = realised(ts, xs, t, horizon_s)
        if y is not None:
            out.append((t, y))
    return out


def load_trace(path: str, opts: HorizonOptions) -> Trace:
    trace = read_trace(path)
    return trace if opts.keep_dead else trace.alive()


def evaluate_trace(
    trace: Trace, opts: HorizonOptions, per_trace: int, fleet: Sequence[HostWindows] = ()
) -> dict[str, Any]:
    """Every case of one trace (JSON-ready, picklable for worker processes); ``fleet``: the
    other traces."""
    with threadpool_limits(limits=1):
        ts, xs = trace.timestamps, trace.availability
        cases = []
        for h in opts.horizons:
            for t, y in forecast_times(ts, xs, trace.name, h, per_trace, opts):
                cases.append(scored_case(ts, xs, t, h, y, opts.switching, fleet))
    return {"file": trace.source, "name": trace.name, "cases": cases}


def fleets(traces: Sequence[Trace]) -> list[list[HostWindows]]:
    """For each trace, every other trace prepared as the fleet prior reads it."""
    windows = [HostWindows.of(t.timestamps, t.availability, CPU_BOUNDS) for t in traces]
    return [windows[:i] + windows[i + 1 :] for i in range(len(traces))]


def scores(cases: Sequence[dict[str, Any]], method: str) -> dict[str, float]:
    """Coverage and mean width of the interval answered, mean pinball loss of the central
    2.5 / 97.5 % quantiles (a score of the distribution, whichever interval is answered),
    MAE of the mean, and the mean CRPS where the cases were scored (:func:`scored_case`)."""
    if not cases:
        return {"n": 0}
    y = _actuals(cases)
    lo, hi, q_lo, q_hi, mean = (
        _column(cases, method, k) for k in ("lower", "upper", "q_lower", "q_upper", "mean")
    )
    loss = interval_pinball(y, q_lo, q_hi)
    out = {
        "n": len(cases),
        "coverage": float(np.mean(covered(y, lo, hi))),
        "width": float(np.mean(hi - lo)),
        "pinball": float(np.mean(loss)),
        "mae": float(np.mean(np.abs(y - mean))),
    }
    if all("crps" in c[method] for c in cases):
        out["crps"] = float(np.mean(_column(cases, method, "crps")))
    return out


def last_value_scores(cases: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The persistence forecast (the last value before ``at``, NWS's simplest predictor): its
    MAE, which is also its CRPS, a point's."""
    y, last = _actuals(cases), _actuals(cases, "last_value")
    return {"n": len(cases), "mae": float(np.mean(np.abs(y - last)))}


def _actuals(cases: Sequence[dict[str, Any]], key: str = "actual") -> FloatArray:
    """The realised means of ``cases`` (or another number every case holds)."""
    return np.array([c[key] for c in cases], dtype=np.float64)


def _column(cases: Sequence[dict[str, Any]], method: str, key: str) -> FloatArray:
    """One field of ``method``'s answer over ``cases`` (a list-valued one as a further axis)."""
    return np.array([c[method][key] for c in cases], dtype=np.float64)


def covered(y: FloatArray, lower: FloatArray, upper: FloatArray) -> NDArray[np.bool_]:
    """Which outcomes fall inside their interval (ends included, to rounding)."""
    out: NDArray[np.bool_] = (y >= lower - 1e-12) & (y <= upper + 1e-12)
    return out


def interval_pinball(y: FloatArray, lower: FloatArray, upper: FloatArray) -> FloatArray:
    """The pinball loss of the interval's ends as the 2.5 % and 97.5 % quantiles, averaged."""
    out: FloatArray = _pinball(y, lower, (1 - CONFIDENCE) / 2) / 2
    out += _pinball(y, upper, (1 + CONFIDENCE) / 2) / 2
    return out


def _pinball(y: FloatArray, q_value: FloatArray, q: float) -> FloatArray:
    d = y - q_value
    out: FloatArray = np.maximum(q * d, (q - 1) * d)
    return out


def aggregate(
    cases: Sequence[dict[str, Any]],
    horizons: Sequence[float],
    methods: Sequence[str] = METHODS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per horizon and category ("all" first): each method's scores, the forecaster's
    coverage with its interval over traces (:func:`coverage_interval`, seeded), and how often
    the forecaster fell back."""
    rows = []
    for h in horizons:
        at_h = [c for c in cases if c["horizon_s"] == h]
        for cat in ("all", *CATEGORIES):
            group = at_h if cat == "all" else [c for c in at_h if c["category"] == cat]
            fallbacks = [c["forecaster"]["fallback"] for c in group]
            row: dict[str, Any] = {
                "horizon_s": h,
                "category": cat,
                "n": len(group),
                "fallback_share": (
                    float(np.mean([f is not None for f in fallbacks])) if group else None
                ),
                **{m: scores(group, m) for m in methods},
            }
            row["forecaster"]["coverage_ci"] = coverage_interval(group, "forecaster", seed)
            if group:
                row["forecaster"]["width_at_unconditional_coverage"] = width_at_coverage(
                    group, "forecaster", row["unconditional"]["coverage"]
                )
                row["unconditional"]["range_coverage"] = range_coverage(group, "unconditional")
                row["last_value"] = last_value_scores(group)
            rows.append(row)
    return rows


def run(paths: Sequence[str], opts: HorizonOptions, jobs: int = 1) -> dict[str, Any]:
    files = [str(p) for p in expand_paths(paths)]
    if not files:
        raise ValueError("no trace files found")
    per_trace = max(1, math.ceil(opts.cases / len(files)))
    n = len(files)
    with ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else nullcontext() as pool:
        each = map if pool is None else pool.map
        loaded = list(each(load_trace, files, [opts] * n))
        others = fleets(loaded) if opts.fleet else [[] for _ in loaded]
        traces = list(each(evaluate_trace, loaded, [opts] * n, [per_trace] * n, others))
    cases = [c | {"trace": t["name"]} for t in traces for c in t["cases"]]
    methods = (*METHODS, *EXPERIMENTS) if opts.switching else METHODS
    rows = aggregate(cases, opts.horizons, methods, opts.seed)
    return {
        "rows": rows,
        "checks": checks(rows),
        "cases": cases,
        "settings": {
            "horizons": list(opts.horizons),
            "cases": opts.cases,
            "per_trace": per_trace,
            "seed": opts.seed,
            "min_history_s": opts.min_history_s,
            "keep_dead": opts.keep_dead,
            "fleet": opts.fleet,
            "traces": len(files),
            "methods": list(methods),
        },
    }


def coverage_interval(
    cases: Sequence[dict[str, Any]], method: str, seed: int = 0, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """A ``confidence`` interval of a row's coverage that resamples whole traces (scipy's
    bootstrap, paired over each trace's hits and cases; percentile method). A trace's cases
    share its host, so they are not independent: what the same protocol would give on other
    hosts of the kind is the question, and a binomial interval over cases would be too
    narrow. None with fewer than two traces."""
    traces = sorted({c["trace"] for c in cases})
    if len(traces) < 2:
        return None
    y = _actuals(cases)
    lo, hi = (_column(cases, method, k) for k in ("lower", "upper"))
    index = np.searchsorted(traces, [c["trace"] for c in cases])
    hits = np.bincount(index, weights=covered(y, lo, hi), minlength=len(traces))
    n = np.bincount(index, minlength=len(traces)).astype(np.float64)
    res = bootstrap(
        (hits, n),
        lambda h, k, axis=-1: h.sum(axis=axis) / k.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=BOOTSTRAP_RESAMPLES,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def range_coverage(cases: Sequence[dict[str, Any]], method: str) -> float:
    """How often the outcome lies within the whole range of ``method``'s sample: the most any
    interval drawn from that sample could cover."""
    lo, hi = (_column(cases, method, k) for k in ("min", "max"))
    return float(np.mean(covered(_actuals(cases), lo, hi)))


def width_at_coverage(cases: Sequence[dict[str, Any]], method: str, target: float) -> float | None:
    """The mean width ``method``'s intervals need to cover ``target`` of ``cases``, read off
    its intervals at :data:`SHARPNESS_LEVELS`: linear between levels, the narrowest level where
    several cover alike, the lowest level's width (an upper bound) when even that covers more.
    None when no level reaches ``target``.

    Widths only compare at equal coverage: a baseline that misses a quarter of the outcomes
    is narrow for that reason (at a day or more, even the full range of the past window
    means misses at least a fifth of the outcomes on the shared traces, docs/architecture.md
    §4.7)."""
    levels = _column(cases, method, "levels")  # case, level, (lower, upper)
    hits = covered(_actuals(cases)[:, None], levels[..., 0], levels[..., 1])
    # a higher level whose intervals happen to cover less still reaches what a lower one did
    cover, first = np.unique(np.maximum.accumulate(hits.mean(0)), return_index=True)
    width = (levels[..., 1] - levels[..., 0]).mean(0)[first]
    if target > cover[-1]:
        return None
    return float(width[0] if target <= cover[0] else np.interp(target, cover, width))


def checks(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The issue's bar for the forecaster: 93-97 % coverage in every (horizon, category) row
    with cases, and a width no wider than the unconditional baseline's; and how often its
    pinball loss is no worse than both baselines' (the score that weighs width and misses)."""
    scored = [r for r in rows if r["n"] > 0]
    inside = [COVERAGE_BAND[0] <= r["forecaster"]["coverage"] <= COVERAGE_BAND[1] for r in scored]
    below = [r["forecaster"]["coverage"] < COVERAGE_BAND[0] for r in scored]
    cis = [r["forecaster"].get("coverage_ci") for r in scored]
    clearly_below = [ci is not None and ci[1] < COVERAGE_BAND[0] for ci in cis]
    clearly_above = [ci is not None and ci[0] > COVERAGE_BAND[1] for ci in cis]
    narrower = [r["forecaster"]["width"] <= r["unconditional"]["width"] + 1e-12 for r in scored]
    narrower_at_equal_coverage = [
        _width_at_equal_coverage(r["forecaster"]) <= r["unconditional"]["width"] + 1e-12
        for r in scored
    ]
    sharper = [
        r["forecaster"]["pinball"]
        <= min(r["unconditional"]["pinball"], r["analog_legacy"]["pinball"]) + 1e-12
        for r in scored
    ]
    beats_peer = [r["forecaster"]["pinball"] <= r["ar1"]["pinball"] + 1e-12 for r in scored]
    unreachable = [r["unconditional"]["range_coverage"] < COVERAGE_BAND[0] for r in scored]
    # the whole distribution against the last value as a point (its CRPS is its MAE)
    beats_persistence = [
        r["forecaster"]["crps"] <= r["last_value"]["mae"] + 1e-12
        for r in scored
        if "crps" in r["forecaster"]
    ]
    return {
        "rows": len(scored),
        "coverage_in_93_97": int(sum(inside)),
        # outside the band below it: a forecast more sure than it should be (the worse side)
        "coverage_below_93": int(sum(below)),
        # rows whose interval over traces (coverage_ci) lies wholly outside the band: a miss
        # that other hosts of the kind would most likely show too, not a draw of these traces
        "coverage_ci_below_93": int(sum(clearly_below)),
        "coverage_ci_above_97": int(sum(clearly_above)),
        "width_le_unconditional": int(sum(narrower)),
        # the same at the unconditional baseline's own coverage (width_at_coverage)
        "width_le_unconditional_at_equal_coverage": int(sum(narrower_at_equal_coverage)),
        # rows where no interval of the unconditional sample, however wide, reaches the band
        "unconditional_range_below_93": int(sum(unreachable)),
        "pinball_le_baselines": int(sum(sharper)),
        "pinball_le_ar1": int(sum(beats_peer)),
        "crps_le_last_value": int(sum(beats_persistence)),
    }


def _width_at_equal_coverage(forecaster: dict[str, Any]) -> float:
    """The forecaster's width at the unconditional baseline's coverage; infinite where the
    baseline covered more than any of its levels (a row that cannot pass)."""
    at = forecaster["width_at_unconditional_coverage"]
    return math.inf if at is None else float(at)


#: Bins of the PIT histogram: a calibrated forecaster fills them evenly.
PIT_BINS = 10
#: Evaluation times per horizon the dashboard's calibration card scores (its cost bound).
SERIES_CASES = 40


def wilson(hits: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson score interval of a coverage of ``hits`` in ``n`` (None without cases): with 40
    cases a coverage of 0.9 is still consistent with a nominal 0.95."""
    if n <= 0:
        return None
    ci = binomtest(hits, n).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def calibrate_series(
    timestamps: FloatArray,
    values: FloatArray,
    name: str,
    horizons: Sequence[float] = DEFAULT_HORIZONS,
    per_horizon: int = SERIES_CASES,
    opts: HorizonOptions | None = None,
    history: int = SERVICE_HISTORY,
    fleet: FleetSource | None = None,
) -> dict[str, Any]:
    """How well one series' own past horizon forecasts were calibrated (the dashboard's card).

    For each horizon, at most ``per_horizon`` seeded random times ``T`` (:func:`forecast_times`,
    seeded by ``name``), the forecast the service would have answered ``at=T``
    (:func:`service_history` and ``series_distribution``, as :func:`forecast_case` computes its
    ``forecaster`` entry: samples strictly before ``T`` only) against the realised mean
    over ``[T, T + H)``; per horizon the :func:`scores`, the Wilson interval of the coverage,
    the PIT histogram (the forecast CDF at the realised mean) and, without cases, why.
    ``history``: samples before ``T`` the service reads (its ``Settings.history_limit``);
    ``fleet``: the other hosts, as the service's forecasts borrow from them (only their windows
    that ended before each ``T`` are read)."""
    o = opts or HorizonOptions()
    ts, xs = series_before(timestamps, values, None)
    span = float(ts[-1] - ts[0]) if ts.size else 0.0
    rows, pits = [], []
    for h in horizons:
        cases = (
            _series_cases(ts, xs, name, h, per_horizon, o, history, fleet) if ts.size >= 2 else []
        )
        sc = scores(cases, "forecaster")
        hits = round(sc["coverage"] * len(cases)) if cases else 0  # scores' tolerance
        hp = [c["forecaster"]["pit"] for c in cases]
        pits += hp
        fallbacks = [c["forecaster"]["fallback"] for c in cases]
        supports = [
            c["forecaster"]["support"] for c in cases if c["forecaster"]["support"] is not None
        ]
        rows.append(
            {
                "horizon_s": h,
                **sc,
                "hits": int(hits),
                "wilson": wilson(int(hits), len(cases)),
                "fallback_share": (
                    float(np.mean([f is not None for f in fallbacks])) if cases else None
                ),
                "median_support": float(np.median(supports)) if supports else None,
                "pit_counts": _pit_counts(hp),
                "reason": None if cases else _no_cases(ts, span, h, o),
                "cases": cases,
            }
        )
    return {
        "horizons": rows,
        "pit_counts": _pit_counts(pits),
        "pit_bins": PIT_BINS,
        "confidence": CONFIDENCE,
        "per_horizon": per_horizon,
        "seed": o.seed,
        "min_history_s": o.min_history_s,
        "samples": int(ts.size),
        "span_s": span,
    }


def _series_cases(
    ts: FloatArray,
    xs: FloatArray,
    name: str,
    horizon_s: float,
    count: int,
    opts: HorizonOptions,
    history: int,
    fleet: FleetSource | None = None,
) -> list[dict[str, Any]]:
    """The scored cases of one horizon; times whose history the service would refuse (fewer
    samples than the forecaster's minimum) are left out, as a client would get a 409."""
    out = []
    draws = np.random.default_rng([opts.seed, zlib.crc32(name.encode()), int(horizon_s), 1])
    for t, y in forecast_times(ts, xs, name, horizon_s, count, opts):
        u = float(draws.uniform())
        before_t, x_before = service_history(ts, xs, t, history)
        if x_before.size < DEFAULT_CONFIG.min_samples:
            continue
        dist = series_distribution(
            before_t,
            x_before,
            now=t,
            horizon_s=snap_horizon(horizon_s),
            analog=CPU_ANALOG,
            fleet=fleet,
        )
        pit = censored_pit(dist, y, u)
        out.append(
            {
                "at": t,
                "horizon_s": horizon_s,
                "actual": y,
                "forecaster": {
                    **summarise(dist),
                    "pit": pit,
                    "support": dist.support,
                    "fallback": dist.fallback,
                    "fleet": dist.fleet,
                },
            }
        )
    return out


def censored_pit(
    dist: Distribution, y: float, u: float, bounds: tuple[float, float] = CPU_BOUNDS
) -> float:
    """The forecast's CDF at the realised value ``y``, randomised by ``u`` in [0, 1) where
    ``y`` sits on a bound: the censored forecast has an atom there (an idle host's mean is
    often exactly 1), and a calibrated forecaster's PIT is uniform only when an outcome on
    the atom draws its PIT uniformly across the atom's step (Czado, Gneiting and Held 2009)."""
    lo, hi = bounds
    if y >= hi:
        below = float(dist.cdf(hi))
        return below + u * (1.0 - below)
    if y <= lo:
        return u * float(dist.cdf(lo))
    return min(max(float(dist.cdf(y)), 0.0), 1.0)


def _pit_counts(pits: Sequence[float]) -> list[int]:
    counts, _ = np.histogram(np.asarray(pits, dtype=float), bins=PIT_BINS, range=(0.0, 1.0))
    return [int(c) for c in counts]


def _no_cases(ts: FloatArray, span: float, horizon_s: float, opts: HorizonOptions) -> str:
    need = opts.min_history_s + horizon_s
    if ts.size < 2 or span <= need:
        return (
            f"the history spans {_duration_text(span)}; a case needs "
            f"{_duration_text(opts.min_history_s)} of history before its time and the "
            f"{_duration_text(horizon_s)} after it ({_duration_text(need)} in all)"
        )
    return (
        f"no time with {_duration_text(opts.min_history_s)} of history before it had at least "
        f"{MIN_REALISED:.0%} of the samples of the {_duration_text(horizon_s)} after it (gaps)"
    )


def _duration_text(seconds: float) -> str:
    """Rounded for sentences: "3 d", "5.2 d", "6 h", "5 min"."""
    if seconds >= 86400:
        return f"{seconds / 86400:.3g} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 60:.3g} min"


def render_text(report: dict[str, Any]) -> str:
    """One rich table: per horizon and category, each method's coverage / width / pinball / MAE,
    the forecaster's width at the unconditional baseline's coverage and its CRPS beside the
    last value's."""
    from rich.console import Console
    from rich.table import Table

    console = Console(record=True, width=240, file=io.StringIO())
    s = report["settings"]
    table = Table(
        title=f"Horizon forecasts of mean CPU availability: {s['traces']} traces, "
        f"{s['per_trace']} random times per trace and horizon (seed {s['seed']}); "
        "cover [95 % interval over traces] / width / pinball / MAE"
    )
    methods = s.get("methods", METHODS)
    extra = ("width at uncond. cover", "CRPS (last value)")
    for col in ("horizon", "category", "n", "fallback", *extra, *methods):
        table.add_column(col, justify="left" if col in ("horizon", "category") else "right")
    for r in report["rows"]:
        if r["n"] == 0:
            continue
        cells = []
        for m in methods:
            sc = r[m]
            ci = sc.get("coverage_ci")
            band = f" [{ci[0]:.3f}-{ci[1]:.3f}]" if ci else ""
            cells.append(
                f"{sc['coverage']:.3f}{band} / {sc['width']:.3f} / {sc['pinball']:.4f} / "
                f"{sc['mae']:.3f}"
            )
        at = r["forecaster"].get("width_at_unconditional_coverage")
        crps = r["forecaster"].get("crps")
        table.add_row(
            _duration(r["horizon_s"]),
            r["category"],
            str(r["n"]),
            f"{r['fallback_share']:.2f}",
            "-" if at is None else f"{at:.3f}",
            "-" if crps is None else f"{crps:.4f} ({r['last_value']['mae']:.4f})",
            *cells,
            style="bold" if r["category"] == "all" else None,
        )
    console.print(table)
    c = report["checks"]
    console.print(
        f"forecaster: coverage in 93-97 % in {c['coverage_in_93_97']} of {c['rows']} rows "
        f"({c['coverage_below_93']} below; wholly outside by their 95 % interval over traces: "
        f"{c['coverage_ci_below_93']} below, {c['coverage_ci_above_97']} above); "
        f"width <= unconditional in {c['width_le_unconditional']} of {c['rows']} "
        f"({c['width_le_unconditional_at_equal_coverage']} at the unconditional's own "
        "coverage; its whole range covers under 93 % in "
        f"{c['unconditional_range_below_93']}); "
        f"pinball <= both baselines in {c['pinball_le_baselines']} of {c['rows']}, "
        f"<= statsmodels AR(1) in {c['pinball_le_ar1']} of {c['rows']}; "
        f"CRPS <= the last value's in {c['crps_le_last_value']} of {c['rows']}"
    )
    return console.export_text()


def _duration(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{int(seconds // 86400)} d"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"


def parse_horizons(text: str) -> tuple[float, ...]:
    """``"300,3600"`` -> (300.0, 3600.0); every horizon positive and finite."""
    out = tuple(float(v) for v in text.split(",") if v.strip())
    if not out or any(not (math.isfinite(h) and h > 0) for h in out):
        raise ValueError(f"--horizons needs positive seconds, got {text!r}")
    return out
