"""``ppe replay``: replay recorded load traces through the pipeline and compare strategies."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ppe.replay.config import DEFAULT_STRATEGIES, ReplayConfig
from ppe.replay.experiment import run_experiment
from ppe.replay.report import format_table, write_report
from ppe.traces import TraceFormatError, read_traces


def build_parser() -> argparse.ArgumentParser:
    d = ReplayConfig()
    p = argparse.ArgumentParser(
        prog="ppe replay",
        description="Replay load traces (files or directories) through forecaster, models and "
        "scheduler; simulate each schedule on the actual trace; report per strategy.",
    )
    p.add_argument("traces", nargs="+", help="trace files or directories of trace files")
    p.add_argument("--app", default=d.app, choices=["sor", "jacobi2d"])
    p.add_argument("--n", type=int, default=d.n, help="grid side (rows to distribute)")
    p.add_argument("--iterations", type=int, default=d.iterations)
    p.add_argument("--hosts", type=int, default=d.hosts, help="hosts per run")
    p.add_argument("--starts", type=int, default=d.starts, help="start times (one host set each)")
    p.add_argument(
        "--strategies", default=",".join(DEFAULT_STRATEGIES), help="comma-separated strategies"
    )
    p.add_argument(
        "--replan",
        default=",".join(d.replan),
        help="strategies also run as an application that re-plans when behind "
        "(reported as <strategy>+replan; '' for none)",
    )
    p.add_argument(
        "--replan-every",
        type=float,
        default=d.replan_every_s,
        help="seconds between a re-planning run's progress checks",
    )
    p.add_argument(
        "--replan-lag",
        type=float,
        default=d.replan_lag,
        help="re-plan when slower than this times the predicted pace",
    )
    p.add_argument(
        "--replan-gain",
        type=float,
        default=d.replan_gain,
        help="move strips only if predicted this share faster, migration included",
    )
    p.add_argument("--bandwidth", type=float, default=d.bandwidth, help="link bandwidth, bytes/s")
    p.add_argument(
        "--bandwidth-from-trace",
        action="store_true",
        help="link bandwidth = --bandwidth minus the host's recorded traffic",
    )
    p.add_argument("--latency", type=float, default=d.latency, help="per-message latency, s")
    p.add_argument(
        "--benchmark",
        type=float,
        default=d.benchmark,
        help="dedicated seconds per element update (median host)",
    )
    p.add_argument(
        "--benchmark-spread",
        type=float,
        default=d.benchmark_spread,
        help="log-normal spread of host speeds (0 = identical hosts)",
    )
    p.add_argument("--confidence", type=float, default=d.confidence)
    p.add_argument("--k", type=float, default=d.k, help="conservative strategy's k")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--workers", type=int, default=d.workers, help="processes (0 = all cores)")
    p.add_argument("--executor", default=d.executor, choices=["process", "serial", "dask"])
    p.add_argument("--scheduler-address", default=None, help="Dask scheduler, tcp://host:8786")
    p.add_argument(
        "--window",
        type=float,
        default=d.window_s,
        help="seconds after a start that hosts must be recorded without long gaps",
    )
    p.add_argument("--max-gap", type=float, default=d.max_gap_s)
    p.add_argument("--min-history", type=float, default=d.min_history_s)
    p.add_argument(
        "--history",
        type=float,
        default=d.history_s,
        help="seconds of history given to the forecaster (0 = all)",
    )
    p.add_argument(
        "--inputs",
        default=d.inputs,
        choices=["analog", "forecaster"],
        help="how the pipeline builds CPU inputs (see ppe/replay/README.md)",
    )
    p.add_argument("--no-runs", action="store_true", help="leave per-run records out of the JSON")
    p.add_argument("--out", default=None, help="JSON report path")
    p.add_argument("--html", default=None, help="HTML report path")
    p.add_argument("--quiet", action="store_true", help="no progress bar or table")
    return p


def config_from_args(args: argparse.Namespace) -> ReplayConfig:
    return ReplayConfig(
        traces=tuple(args.traces),
        app=args.app,
        n=args.n,
        iterations=args.iterations,
        hosts=args.hosts,
        starts=args.starts,
        strategies=tuple(s.strip() for s in args.strategies.split(",") if s.strip()),
        replan=tuple(s.strip() for s in args.replan.split(",") if s.strip()),
        replan_every_s=args.replan_every,
        replan_lag=args.replan_lag,
        replan_gain=args.replan_gain,
        bandwidth=args.bandwidth,
        bandwidth_from_trace=args.bandwidth_from_trace,
        latency=args.latency,
        benchmark=args.benchmark,
        benchmark_spread=args.benchmark_spread,
        confidence=args.confidence,
        k=args.k,
        seed=args.seed,
        workers=args.workers,
        executor=args.executor,
        scheduler_address=args.scheduler_address,
        window_s=args.window,
        max_gap_s=args.max_gap,
        min_history_s=args.min_history,
        history_s=args.history if args.history and args.history > 0 else None,
        include_runs=not args.no_runs or bool(args.html),
        inputs=args.inputs,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ppe replay``; 0 on success, 2 on bad input."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    args = build_parser().parse_args(list(argv) if argv is not None else None)
    err = Console(stderr=True)
    try:
        config = config_from_args(args)
        traces = read_traces(config.traces)
    except (ValueError, FileNotFoundError, TraceFormatError) as exc:
        err.print(f"[red]ppe replay: {exc}[/red]")
        return 2
    try:
        if args.quiet:
            report = run_experiment(traces, config)
        else:
            with Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=err,
            ) as bar:
                task = bar.add_task("planning", total=config.starts)

                def tick(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = run_experiment(traces, config, tick)
    except (ValueError, RuntimeError) as exc:
        err.print(f"[red]ppe replay: {exc}[/red]")
        return 2
    write_report({**report, "runs": []} if args.no_runs else report, args.out, None)
    write_report(report, None, args.html)
    if not args.quiet:
        print(format_table(report))
        t = report["config"]["timing"]
        print(
            f"{t['schedules']} schedules in {t['total_s']:.1f} s "
            f"({t['schedules'] / max(t['total_s'], 1e-9):.1f}/s, {t['workers']} workers)"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
