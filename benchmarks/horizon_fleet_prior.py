"""How much should a settled-high host borrow from the fleet? (issue 17, ``forecaster.fleet``)

Scores, on the cases of ``ppe forecast-eval --horizons`` (seed 0, ``--cases`` per horizon over
the traces given; the interval and pinball loss as forecast-eval scores them), the service's
horizon forecast with the fleet prior at several strengths
(the fleet's weight in windows of the host's own history; 0: no prior, the forecast alone;
the service uses ``FLEET.strength``). The fleet of each trace is the other traces given, so
``odd``/``even`` halves of the shared traces score a strength chosen on the other half.

    PYTHONPATH=. .venv/bin/python benchmarks/horizon_fleet_prior.py \\
        ../shared/traces/bitbrains-rnd-2013-7 [--horizons 86400,259200] [--strengths 0,1,2,3,4]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from typing import Any

from threadpoolctl import threadpool_limits

from forecaster.analog import CPU_ANALOG
from forecaster.api import series_distribution
from forecaster.fleet import FLEET, HostWindows, with_fleet
from forecaster.horizon import snap_horizon
from ppe.evaluation.horizon_eval import (
    CATEGORIES,
    HorizonOptions,
    category,
    fleets,
    forecast_times,
    load_trace,
    parse_horizons,
    scores,
    service_history,
    summarise,
)
from ppe.traces import Trace, expand_paths


def score_trace(
    args: tuple[Trace, list[HostWindows], HorizonOptions, int, Sequence[float]],
) -> list[dict[str, Any]]:
    trace, fleet, opts, per_trace, strengths = args
    options = {s: replace(FLEET, strength=s) for s in strengths if s > 0}
    rows = []
    with threadpool_limits(limits=1):
        for h in opts.horizons:
            snapped = snap_horizon(h)
            cases = forecast_times(
                trace.timestamps, trace.availability, trace.name, h, per_trace, opts
            )
            for now, y in cases:
                ts, xs = service_history(trace.timestamps, trace.availability, now)
                alone = series_distribution(ts, xs, now=now, horizon_s=snapped, analog=CPU_ANALOG)
                row: dict[str, Any] = {"h": h, "category": category(ts, xs, now), "actual": y}
                for s in strengths:
                    dist = alone
                    if s > 0:
                        horizon = snapped or h
                        dist = with_fleet(
                            alone, ts, xs, now, horizon, lambda: fleet, CPU_ANALOG, options[s]
                        )
                    row[f"{s:g}"] = summarise(dist)
                rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--horizons", default="86400,259200")
    ap.add_argument("--cases", type=int, default=3000, help="per horizon over all traces")
    ap.add_argument("--strengths", default="0,1,2,3,4")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    paths = [str(p) for p in expand_paths(args.paths)]
    strengths = [float(v) for v in args.strengths.split(",")]
    opts = HorizonOptions(horizons=parse_horizons(args.horizons), cases=args.cases)
    per_trace = math.ceil(opts.cases / len(paths))
    with ProcessPoolExecutor(args.jobs) as ex:
        traces = list(ex.map(load_trace, paths, [opts] * len(paths)))
        work = [
            (t, f, opts, per_trace, strengths) for t, f in zip(traces, fleets(traces), strict=True)
        ]
        rows = [r for rs in ex.map(score_trace, work) for r in rs]
    print(f"{len(paths)} traces; coverage / width / pinball by fleet strength")
    print("horizon | category | n | " + " | ".join(f"strength {s:g}" for s in strengths))
    for h in opts.horizons:
        for cat in ("all", *CATEGORIES):
            sub = [r for r in rows if r["h"] == h and cat in ("all", r["category"])]
            if not sub:
                continue
            cells = []
            for s in strengths:
                sc = scores(sub, f"{s:g}")
                cells.append(f"{sc['coverage']:.3f} / {sc['width']:.3f} / {sc['pinball']:.4f}")
            print(f"{h / 3600:g} h | {cat} | {len(sub)} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
