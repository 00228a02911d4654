"""``ppe forecast-eval``: score the forecaster on recorded load traces, causally, one step ahead.

For every trace (GWA-T-12 or ``timestamp,value`` CSV) the CPU availability series is replayed
through the same batch path the service uses (:func:`forecaster.batch_forecasts`, identical to the
online path). Every sample from ``--warmup`` on (default one day of 5-minute samples) is forecast
from the samples before it only, by

- the adaptive forecaster (the default config: discounted-error selection),
- every battery member on its own (and so the best single member in hindsight),
- other selection rules over the same battery (NWS's cumulative MSE among them),
- statsmodels baselines refitted on a rolling window (:mod:`ppe.evaluation.baselines`),

and scored by MAE and RMSE; the adaptive forecaster's 95 % interval by its empirical coverage.
Dead stretches (0 cores, 0 MHz) are dropped unless ``--keep-dead``: a switched-off VM sends no
measurements (see :class:`ppe.traces.Trace`). Overall figures pool every scored sample.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from forecaster import (
    DEFAULT_CONFIG,
    ForecasterConfig,
    batch_member_forecasts,
    fit_distribution,
    select_batch,
)
from forecaster.config import ErrorKind, Selection
from ppe.evaluation.baselines import (
    DEFAULT_BASELINES,
    BaselineSpec,
    baseline_forecasts,
    fitter,
)
from ppe.traces import TraceFormatError, expand_paths, read_trace

#: Other selection rules reported next to the adaptive default: (selection, error) pairs.
SELECTORS: dict[str, tuple[Selection, ErrorKind]] = {
    "nws_cumulative_mse": ("cumulative", "squared"),
    "cumulative_mae": ("cumulative", "absolute"),
    "discounted_mse": ("discounted", "squared"),
    "discounted_mae": ("discounted", "absolute"),
}
COVERAGE_BAND = (0.93, 0.97)
BEST_MEMBER_SLACK = 1.05


@dataclass(frozen=True)
class EvalOptions:
    warmup: int = 288
    keep_dead: bool = False
    baselines: tuple[str, ...] = DEFAULT_BASELINES
    baseline: BaselineSpec = field(default_factory=BaselineSpec)
    config: ForecasterConfig = DEFAULT_CONFIG


def _scores(err: np.ndarray) -> dict[str, float]:
    return {"mae": float(np.mean(np.abs(err))), "rmse": float(np.sqrt(np.mean(err * err)))}


def evaluate_series(path: str, opts: EvalOptions) -> dict[str, Any]:
    """Score one trace file; the result is JSON-ready (and picklable for worker processes)."""
    # Small fits: BLAS/OpenMP threads only fight over the cores (one series per process instead).
    with threadpool_limits(limits=1):
        return _evaluate_series(path, opts)


def _evaluate_series(path: str, opts: EvalOptions) -> dict[str, Any]:
    trace = read_trace(path)
    used = trace if opts.keep_dead else trace.alive()
    x = used.availability
    out: dict[str, Any] = {
        "file": str(path),
        "name": trace.name,
        "samples": len(trace),
        "dead_dropped": len(trace) - len(used),
        "duplicates_dropped": trace.duplicates_dropped,
    }
    start = opts.warmup
    if x.size < start + 2:
        out["skipped"] = f"{x.size} samples; need more than warm-up {start} + 1"
        return out
    members = batch_member_forecasts(x, opts.config)
    result = select_batch(x, members, opts.config, 0.95)
    actual = x[start:]
    rows = slice(start, x.size)
    err = actual - result.forecast[rows]
    covered = (actual >= result.lower[rows]) & (actual <= result.upper[rows])
    member_err = actual[:, None] - members[rows]
    member_scores = {name: _scores(member_err[:, i]) for i, name in enumerate(result.names)}
    best = min(member_scores, key=lambda k: member_scores[k]["mae"])
    dist = fit_distribution(x)
    out.update(
        evaluated=int(actual.size),
        **_scores(err),
        coverage95=float(covered.mean()),
        multimode=dist.multimode,
        kind=dist.kind,
        components=[list(c) for c in dist.components],
        best_member={"name": best, "mae": member_scores[best]["mae"]},
        members=member_scores,
        selectors=_selector_scores(x, members, opts.config, start),
        baselines={
            name: _scores(actual - baseline_forecasts(x, start, name, opts.baseline))
            for name in opts.baselines
        },
    )
    return out


def _selector_scores(
    x: np.ndarray, members: np.ndarray, base: ForecasterConfig, start: int
) -> dict[str, dict[str, float]]:
    scores: dict[str, dict[str, float]] = {}
    actual = x[start:]
    for label, (selection, error) in SELECTORS.items():
        cfg = replace(base, selection=selection, selection_error=error)
        res = select_batch(x, members, cfg, 0.95)
        rows = slice(start, x.size)
        covered = (actual >= res.lower[rows]) & (actual <= res.upper[rows])
        scores[label] = {
            **_scores(actual - res.forecast[rows]),
            "coverage95": float(covered.mean()),
        }
    return scores


def _pool(parts: Iterable[tuple[int, dict[str, float]]]) -> dict[str, float]:
    """Pool per-series MAE/RMSE (and coverage) weighted by scored samples."""
    n = abs_sum = sq_sum = cov_sum = 0.0
    has_cov = True
    for count, s in parts:
        n += count
        abs_sum += s["mae"] * count
        sq_sum += s["rmse"] ** 2 * count
        if "coverage95" in s:
            cov_sum += s["coverage95"] * count
        else:
            has_cov = False
    if n == 0:
        return {"mae": math.nan, "rmse": math.nan}
    pooled = {"mae": abs_sum / n, "rmse": math.sqrt(sq_sum / n)}
    if has_cov:
        pooled["coverage95"] = cov_sum / n
    return pooled


def aggregate(series: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """docs/architecture.md's ``overall`` block (plus selectors and the acceptance checks)."""
    scored = [s for s in series if "skipped" not in s]
    if not scored:
        return {"series": 0, "samples": 0}

    def pool(key: str, name: str | None = None) -> dict[str, float]:
        if name is None:
            return _pool((s["evaluated"], s) for s in scored)
        return _pool((s["evaluated"], s[key][name]) for s in scored)

    adaptive = pool("adaptive")
    members = {m: pool("members", m) for m in scored[0]["members"]}
    best = min(members, key=lambda k: members[k]["mae"])
    baselines = {b: pool("baselines", b) for b in scored[0]["baselines"]}
    selectors = {k: pool("selectors", k) for k in scored[0]["selectors"]}
    ratio = adaptive["mae"] / members[best]["mae"] if members[best]["mae"] > 0 else math.nan
    checks = {
        "mae_vs_best_member": ratio,
        "mae_within_1_05_of_best_member": bool(ratio <= BEST_MEMBER_SLACK),
        "beats_every_baseline": all(adaptive["mae"] <= b["mae"] for b in baselines.values()),
        "coverage95_in_93_97": bool(
            COVERAGE_BAND[0] <= adaptive.get("coverage95", math.nan) <= COVERAGE_BAND[1]
        ),
    }
    return {
        "adaptive": adaptive,
        "members": members,
        "best_member": {"name": best, "mae": members[best]["mae"]},
        "baselines": baselines,
        "selectors": selectors,
        "multimode_share": float(np.mean([bool(s["multimode"]) for s in scored])),
        "series": len(scored),
        "skipped": len(series) - len(scored),
        "samples": int(sum(s["evaluated"] for s in scored)),
        "checks": checks,
    }


def run(paths: Sequence[str], opts: EvalOptions, jobs: int = 1) -> dict[str, Any]:
    files = [str(p) for p in expand_paths(paths)]
    if not files:
        raise ValueError("no trace files found")
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            series = list(pool.map(evaluate_series, files, [opts] * len(files)))
    else:
        series = [evaluate_series(f, opts) for f in files]
    return {
        "overall": aggregate(series),
        "series": series,
        "settings": {
            "warmup": opts.warmup,
            "keep_dead": opts.keep_dead,
            "baseline": asdict(opts.baseline),
            "forecaster": asdict(opts.config),
        },
    }


def render_text(report: dict[str, Any]) -> str:
    """Readable tables (rich) of the overall scores and every series."""
    from rich.console import Console
    from rich.table import Table

    console = Console(record=True, width=150, file=io.StringIO())
    overall = report["overall"]
    if not overall.get("series"):
        return "no series could be scored\n"
    best_mae = overall["best_member"]["mae"]
    table = Table(
        title=f"One-step CPU availability forecasts: {overall['series']} series, "
        f"{overall['samples']} scored samples"
    )
    for col in ("forecaster", "MAE", "RMSE", "cover95", "MAE / best member"):
        table.add_column(col, justify="left" if col == "forecaster" else "right")

    def row(label: str, s: dict[str, float], style: str | None = None) -> None:
        cov = f"{s['coverage95']:.3f}" if "coverage95" in s else ""
        ratio = s["mae"] / best_mae if best_mae > 0 else math.nan
        table.add_row(
            label, f"{s['mae']:.5f}", f"{s['rmse']:.5f}", cov, f"{ratio:.3f}", style=style
        )

    row("adaptive (default)", overall["adaptive"], "bold")
    for name, s in overall["selectors"].items():
        row(f"selector {name}", s)
    for name, s in overall["baselines"].items():
        row(f"statsmodels {name}", s)
    for name, s in sorted(overall["members"].items(), key=lambda kv: kv[1]["mae"]):
        row(f"member {name}" + (" (best)" if name == overall["best_member"]["name"] else ""), s)
    console.print(table)
    console.print(
        f"multi-mode share: {overall['multimode_share']:.3f}   checks: "
        + ", ".join(f"{k}={_fmt(v)}" for k, v in overall["checks"].items())
    )
    console.print(_series_table(report["series"], list(overall["baselines"])))
    return console.export_text()


def _series_table(series: Sequence[dict[str, Any]], baselines: list[str]) -> Any:
    from rich.table import Table

    table = Table(title="Per series")
    cols = [
        "file",
        "n",
        "MAE",
        "RMSE",
        "cover95",
        "best member",
        "best MAE",
        "ratio",
        *[f"{b} MAE" for b in baselines],
        "mode",
    ]
    for c in cols:
        table.add_column(c, justify="left" if c in ("file", "best member", "mode") else "right")
    for s in series:
        if "skipped" in s:
            name = Path(s["file"]).name
            table.add_row(name, str(s.get("samples", "")), "skipped: " + s["skipped"])
            continue
        bm = s["best_member"]
        ratio = s["mae"] / bm["mae"] if bm["mae"] > 0 else math.nan
        table.add_row(
            Path(s["file"]).name,
            str(s["evaluated"]),
            f"{s['mae']:.4f}",
            f"{s['rmse']:.4f}",
            f"{s['coverage95']:.3f}",
            bm["name"],
            f"{bm['mae']:.4f}",
            f"{ratio:.2f}",
            *[f"{s['baselines'][b]['mae']:.4f}" for b in baselines],
            f"{s['kind']}{'*' if s['multimode'] else ''}",
        )
    return table


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ppe forecast-eval",
        description="Replay load traces causally through the forecaster and score one-step "
        "CPU availability forecasts against every battery member and statsmodels baselines.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="FILE_OR_DIR",
        help="GWA-T-12 files (plain or .gz), timestamp,value CSV, or directories",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", metavar="FILE", help="also write the JSON report to FILE")
    p.add_argument(
        "--warmup",
        type=int,
        default=288,
        help="samples seen before scoring starts (default 288: one day at 5 min)",
    )
    p.add_argument(
        "--keep-dead",
        action="store_true",
        help="score dead stretches (0 cores, 0 MHz) too; default drops them",
    )
    p.add_argument(
        "--baselines",
        default=",".join(DEFAULT_BASELINES),
        help="comma-separated statsmodels baselines: ses, arN, arima; '' for none "
        f"(default {','.join(DEFAULT_BASELINES)})",
    )
    p.add_argument(
        "--baseline-window",
        type=int,
        default=288,
        help="samples each baseline is fitted on (default 288)",
    )
    p.add_argument(
        "--baseline-refit",
        type=int,
        default=24,
        help="refit baselines every N samples (default 24: two hours at 5 min)",
    )
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    h = p.add_argument_group(
        "horizon mode",
        "with --horizons: score the distribution of the mean availability over [T, T+H) at "
        "random times T instead (ppe/evaluation/horizon_eval.py)",
    )
    h.add_argument(
        "--horizons",
        metavar="SECONDS,...",
        help="comma-separated horizons, e.g. 300,3600,21600,86400,259200",
    )
    h.add_argument(
        "--cases",
        type=int,
        default=3000,
        help="forecast times per horizon, all traces (3000: a few hundred per host category, "
        "a coverage known to about +-0.02)",
    )
    h.add_argument("--seed", type=int, default=0, help="seed of the forecast times (0)")
    h.add_argument(
        "--switching",
        action="store_true",
        help="also score the semi-Markov switching model and its mix with the forecaster",
    )
    h.add_argument(
        "--no-fleet",
        action="store_true",
        help="forecast each trace alone, without the other traces as the fleet a settled-high "
        "host's fallback borrows from (forecaster.fleet)",
    )
    h.add_argument(
        "--min-history",
        type=float,
        default=2 * 86400.0,
        help="seconds of history before the earliest forecast time (default 172800: 2 days)",
    )
    return p


def _horizon_main(args: argparse.Namespace) -> int:
    from ppe.evaluation import horizon_eval

    try:
        horizons = horizon_eval.parse_horizons(args.horizons)
        if args.cases < 1 or args.jobs < 1 or args.min_history < 0:
            raise ValueError("--cases and --jobs must be >= 1, --min-history >= 0")
        opts = horizon_eval.HorizonOptions(
            horizons=horizons,
            cases=args.cases,
            seed=args.seed,
            min_history_s=args.min_history,
            keep_dead=args.keep_dead,
            switching=args.switching,
            fleet=not args.no_fleet,
        )
        report = horizon_eval.run(args.paths, opts, jobs=args.jobs)
    except (TraceFormatError, FileNotFoundError, ValueError) as exc:
        print(f"forecast-eval: {exc}", file=sys.stderr)
        return 2
    return _emit(report, args, horizon_eval.render_text)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.horizons is not None:
        return _horizon_main(args)
    baselines = tuple(b.strip() for b in args.baselines.split(",") if b.strip())
    if args.warmup < 1 or args.baseline_window < 2 or args.baseline_refit < 1 or args.jobs < 1:
        print(
            "forecast-eval: --warmup, --baseline-refit, --jobs must be >= 1 and "
            "--baseline-window >= 2",
            file=sys.stderr,
        )
        return 2
    try:
        for b in baselines:
            fitter(b)
        opts = EvalOptions(
            warmup=args.warmup,
            keep_dead=args.keep_dead,
            baselines=baselines,
            baseline=BaselineSpec(window=args.baseline_window, refit=args.baseline_refit),
        )
        report = run(args.paths, opts, jobs=args.jobs)
    except (TraceFormatError, FileNotFoundError, ValueError) as exc:
        print(f"forecast-eval: {exc}", file=sys.stderr)
        return 2
    return _emit(report, args, render_text)


def _emit(report: Any, args: argparse.Namespace, render: Callable[[Any], str]) -> int:
    """The report as JSON (``--out``, ``--json``) or as the table ``render`` makes."""
    text = json.dumps(_finite(report), indent=2, allow_nan=False)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
    else:
        print(render(report), end="")
    return 0


def _finite(v: Any) -> Any:
    """JSON has no NaN: undefined figures become null."""
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


if __name__ == "__main__":
    raise SystemExit(main())
