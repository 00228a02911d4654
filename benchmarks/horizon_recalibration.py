"""Would a recalibration table fix the horizon forecasts' coverage per category? (issue 17)

The served horizon forecasts over-cover at short horizons and on steady hosts and under-cover
on idle hosts at a day and beyond (docs/architecture.md §4.7). The cheapest generic fix is a
stretch of each forecast around its mean, ``q -> mean + f * (q - mean)``, by a factor ``f``
learnt per horizon (and per host category) on recorded traces: recalibration on a calibration
set, in the spirit of Kuleshov et al. (2018), kept affine so the answer stays a mixture.

This script measures whether it generalises, which is what matters for traces the project has
not seen: it scores the forecaster (``ppe forecast-eval --horizons``' cases) on the odd- and
the even-numbered traces, fits ``f`` on one half so that the stretched intervals (clipped to
[0, 1], as served) cover 95 % there, and scores them on the other half. It prints, for each
way of fitting (none, per horizon, per horizon and category) and each direction, the number of
(horizon, category) rows inside 93-97 % and the mean pinball loss and width over those rows.

    PYTHONPATH=. .venv/bin/python benchmarks/horizon_recalibration.py \
        ../shared/traces/bitbrains-rnd-2013-7 [--cases 3000] [--jobs 2]
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ppe.evaluation import horizon_eval
from ppe.evaluation.horizon_eval import (
    CATEGORIES,
    CONFIDENCE,
    COVERAGE_BAND,
    HorizonOptions,
    interval_pinball,
)
from ppe.traces import expand_paths

Case = dict[str, Any]
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def arrays(cases: Sequence[Case]) -> Arrays:
    """(realised, mean, lower, upper): the forecaster's unclipped interval ends."""
    y = np.array([c["actual"] for c in cases])
    m, lo, hi = (np.array([c["forecaster"]["unclipped"][i] for c in cases]) for i in range(3))
    return y, m, lo, hi


def stretched(a: Arrays, f: float) -> tuple[np.ndarray, np.ndarray]:
    """The interval ends stretched around the mean by ``f`` and clipped to [0, 1]."""
    _, m, lo, hi = a
    return np.clip(m + f * (lo - m), 0.0, 1.0), np.clip(m + f * (hi - m), 0.0, 1.0)


def score(a: Arrays, f: float) -> tuple[float, float, float]:
    """Coverage, mean width and mean pinball loss (2.5 / 97.5 %) of the stretched intervals."""
    y = a[0]
    lo, hi = stretched(a, f)
    pin = interval_pinball(y, lo, hi)
    covered = (y >= lo - 1e-12) & (y <= hi + 1e-12)
    return float(np.mean(covered)), float(np.mean(hi - lo)), float(np.mean(pin))


def fit_factor(a: Arrays) -> float:
    """The factor whose stretched intervals cover 95 % of ``a`` (bisection: coverage grows
    with the factor)."""
    if a[0].size == 0:
        return 1.0
    lo_f, hi_f = 0.1, 10.0
    for _ in range(50):
        mid = math.sqrt(lo_f * hi_f)
        lo_f, hi_f = (mid, hi_f) if score(a, mid)[0] < CONFIDENCE else (lo_f, mid)
    return hi_f


def select(cases: Sequence[Case], horizon: float, category: str | None = None) -> Arrays:
    return arrays(
        [
            c
            for c in cases
            if c["horizon_s"] == horizon and (category is None or c["category"] == category)
        ]
    )


def factor(train: Sequence[Case], horizon: float, category: str, how: str) -> float:
    if how == "none":
        return 1.0
    return fit_factor(select(train, horizon, category if how == "category" else None))


def cross_fit(train: Sequence[Case], test: Sequence[Case], horizons: Sequence[float], how: str):
    rows = []
    for h in horizons:
        for cat in CATEGORIES:
            f = factor(train, h, cat, how)
            rows.append((h, cat, f, *score(select(test, h, cat), f)))
    return rows


def half(files: Sequence[str], parity: int) -> list[str]:
    def number(f: str) -> int:
        found = re.match(r"(\d+)", Path(f).name)
        return int(found.group(1)) if found else 0

    return [f for f in files if number(f) % 2 == parity]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--cases", type=int, default=3000, help="forecast times per horizon and half")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    files = [str(p) for p in expand_paths(args.paths)]
    opts = HorizonOptions(cases=args.cases, seed=args.seed)
    halves = {
        name: horizon_eval.run(half(files, parity), opts, jobs=args.jobs)["cases"]
        for name, parity in (("odd", 1), ("even", 0))
    }
    band = COVERAGE_BAND
    print(f"{len(files)} traces, {args.cases} times per horizon and half, seed {args.seed}")
    print("fit on -> scored on | fit by   | rows in 93-97 % | mean pinball | mean width")
    for train, test in (("odd", "even"), ("even", "odd")):
        for how in ("none", "horizon", "category"):
            rows = cross_fit(halves[train], halves[test], opts.horizons, how)
            inside = sum(band[0] <= r[3] <= band[1] for r in rows)
            print(
                f"{train:>4} -> {test:<4}        | {how:<8} | {inside:>2} of {len(rows)}"
                f"        | {np.mean([r[5] for r in rows]):.5f}      | "
                f"{np.mean([r[4] for r in rows]):.4f}"
            )
            if how == "category":
                for h, cat, f, cov, _, _ in rows:
                    print(f"      {h:>8.0f} s {cat:<8} factor {f:.3f} coverage {cov:.3f}")


if __name__ == "__main__":
    main()
