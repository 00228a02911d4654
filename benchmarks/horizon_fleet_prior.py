"""Would a prior borrowed from the other hosts fix long-horizon coverage? (issue 17)

An idle host under-covers at a day and beyond (docs/architecture.md §4.7): its own fortnight
holds no busy spell, so neither its analogues nor its fallback to its own past windows can say
that it may turn busy. Other hosts' histories can. This script scores, on the same cases as
``ppe forecast-eval --horizons`` (seed 0, 3000 per horizon over the traces), the served
forecast mixed with a **fleet prior** at weight ``eps`` where the forecast fell back for want of
support: the kernel of the outcomes (mean availability over the horizon) that followed the
other hosts' states of the same category, at starts every 3 hours over the 14 days before the
forecast time whose whole horizon ended before it (causal; the host's own trace left out).
With ``--relative`` each outcome is shifted by the present level minus the level its host had
at its start (mean of the 10 minutes before), as the analogues are.

    PYTHONPATH=. .venv/bin/python benchmarks/horizon_fleet_prior.py \\
        ../shared/traces/bitbrains-rnd-2013-7 [--horizons 86400,259200] [--relative]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from forecaster.analog import CPU_ANALOG, kernel_distribution
from forecaster.api import series_distribution
from forecaster.history import FloatArray
from forecaster.horizon import snap_horizon
from forecaster.switching import mixed
from ppe.evaluation.horizon_eval import (
    CATEGORIES,
    CONFIDENCE,
    HorizonOptions,
    category,
    forecast_times,
    interval_pinball,
    parse_horizons,
    service_history,
)
from ppe.traces import Trace, expand_paths, read_trace

GRID_S = 3 * 3600.0
LOOKBACK_S = 14 * 86400.0
LEVEL_S = 600.0
MIN_FLEET = 20
WEIGHTS = (0.0, 0.1, 0.2, 0.3)


@dataclass(frozen=True)
class FleetTable:
    """One host's starts on a grid, its category there and the outcome over each horizon."""

    name: str
    starts: FloatArray
    categories: np.ndarray
    outcomes: dict[float, FloatArray]


def load(path: Path) -> Trace:
    return read_trace(path).alive()


def fleet_table(s: Trace, horizons: Sequence[float], relative: bool) -> FleetTable:
    csum = np.concatenate(([0.0], np.cumsum(s.availability)))
    starts = np.arange(s.timestamps[0] + 2 * 86400.0, s.timestamps[-1], GRID_S)
    cats = np.array([category(s.timestamps, s.availability, t) for t in starts])
    l0, l1 = np.searchsorted(s.timestamps, starts - LEVEL_S), np.searchsorted(s.timestamps, starts)
    level = np.where(l1 > l0, (csum[l1] - csum[l0]) / np.maximum(l1 - l0, 1), np.nan)
    outcomes = {}
    for h in horizons:
        lo, hi = np.searchsorted(s.timestamps, starts), np.searchsorted(s.timestamps, starts + h)
        ok = (hi - lo) >= 0.5 * h / 300.0
        mean = np.full(starts.size, np.nan)
        mean[ok] = (csum[hi[ok]] - csum[lo[ok]]) / (hi[ok] - lo[ok])
        outcomes[h] = mean - level if relative else mean
    return FleetTable(s.name, starts, cats, outcomes)


def fleet_sample(
    fleet: Sequence[FleetTable], name: str, cat: str, h: float, now: float
) -> FloatArray:
    parts = []
    for f in fleet:
        if f.name == name:
            continue
        keep = (f.categories == cat) & (f.starts + h <= now) & (f.starts >= now - LOOKBACK_S)
        parts.append(f.outcomes[h][keep & np.isfinite(f.outcomes[h])])
    return np.concatenate(parts) if parts else np.empty(0)


def score_series(
    args: tuple[Trace, Sequence[FleetTable], HorizonOptions, int, bool],
) -> list[dict[str, Any]]:
    s, fleet, opts, per_trace, relative = args
    rows = []
    with threadpool_limits(limits=1):
        for h in opts.horizons:
            for now, y in forecast_times(s.timestamps, s.availability, s.name, h, per_trace, opts):
                ts, xs = service_history(s.timestamps, s.availability, now)
                cat = category(ts, xs, now)
                served = series_distribution(
                    ts, xs, now=now, horizon_s=snap_horizon(h), analog=CPU_ANALOG
                )
                prior = None
                if served.fallback is not None:
                    sample = fleet_sample(fleet, s.name, cat, h, now)
                    if relative:
                        sample = np.clip(float(xs[-2:].mean()) + sample, 0.0, 1.0)
                    if sample.size >= MIN_FLEET:
                        background = replace(CPU_ANALOG, unconditional_weight=0)
                        prior = kernel_distribution(sample, background)
                row: dict[str, Any] = {"h": h, "category": cat, "y": y}
                for eps in WEIGHTS:
                    dist = served if prior is None or eps == 0 else mixed(served, prior, 1 - eps)
                    lo, hi = dist.interval(CONFIDENCE)
                    row[str(eps)] = (min(max(lo, 0.0), 1.0), min(max(hi, 0.0), 1.0))
                rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--horizons", default="86400,259200")
    ap.add_argument("--cases", type=int, default=3000, help="per horizon over all traces")
    ap.add_argument("--relative", action="store_true", help="shift outcomes by the level")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    paths = expand_paths(args.paths)
    opts = HorizonOptions(horizons=parse_horizons(args.horizons), cases=args.cases)
    per_trace = math.ceil(opts.cases / len(paths))
    with ProcessPoolExecutor(args.jobs) as ex:
        series = list(ex.map(load, paths))
        fleet = [fleet_table(s, opts.horizons, args.relative) for s in series]
        work = [(s, fleet, opts, per_trace, args.relative) for s in series]
        rows = [r for rs in ex.map(score_series, work) for r in rs]
    print("horizon | category | n | " + " | ".join(f"eps {e}" for e in WEIGHTS))
    for h in opts.horizons:
        for cat in CATEGORIES:
            sub = [r for r in rows if r["h"] == h and r["category"] == cat]
            if not sub:
                continue
            y = np.array([r["y"] for r in sub])
            cells = []
            for eps in WEIGHTS:
                lo, hi = (np.array([r[str(eps)][i] for r in sub]) for i in (0, 1))
                cover = float(np.mean((y >= lo) & (y <= hi)))
                pinball = float(np.mean(interval_pinball(y, lo, hi)))
                cells.append(f"{cover:.3f} / {float(np.mean(hi - lo)):.3f} / {pinball:.4f}")
            print(f"{h / 3600:g} h | {cat} | {len(sub)} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
