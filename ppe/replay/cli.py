"""``ppe replay``: replay recorded load traces through the pipeline and compare strategies."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ppe.replay.config import APPS, DEFAULT_REPLAN, LOCAL_LIMITS, ReplayConfig
from ppe.replay.experiment import run_experiment
from ppe.replay.report import format_table, write_report
from ppe.traces import TraceFormatError, read_traces


def _names(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _seconds_or_all(text: str) -> float | None:
    seconds = float(text)
    return seconds if seconds > 0 else None


#: The flat settings (``ReplayConfig.to_flat`` keys) offered as flags, with their argparse
#: options. The flag is derived from the key (:func:`flag`) and the default comes from
#: ReplayConfig, i.e. from each setting's owner, so neither is written twice.
FLAGS: dict[str, dict[str, Any]] = {
    "app": {"choices": APPS},
    "n": {"type": int, "help": "grid side (rows to distribute)"},
    "iterations": {"type": int},
    "hosts": {"type": int, "help": "hosts per run"},
    "starts": {"type": int, "help": "start times (one host set each)"},
    "strategies": {"type": _names, "help": "comma-separated strategies"},
    "replan": {
        "type": _names,
        "default": None,
        "help": "strategies also run as an application that re-plans when behind "
        f"(reported as <strategy>+replan; '' for none; default: those of "
        f"{','.join(DEFAULT_REPLAN)} among --strategies)",
    },
    "replan_every_s": {
        "type": float,
        "help": "seconds between a re-planning run's progress checks",
    },
    "replan_lag": {
        "type": float,
        "help": "re-plan when slower than this times the predicted pace",
    },
    "replan_gain": {
        "type": float,
        "help": "move strips only if predicted this share faster, migration included",
    },
    "bandwidth": {"type": float, "help": "link bandwidth, bytes/s"},
    "bandwidth_from_trace": {
        "action": "store_true",
        "help": "link bandwidth = --bandwidth minus the host's recorded traffic",
    },
    "latency": {"type": float, "help": "per-message latency, s"},
    "benchmark": {"type": float, "help": "dedicated seconds per element update (median host)"},
    "benchmark_spread": {
        "type": float,
        "help": "log-normal spread of host speeds (0 = identical hosts)",
    },
    "confidence": {"type": float},
    "k": {"type": float, "help": "conservative strategy's k"},
    "seed": {"type": int},
    "workers": {"type": int, "help": "processes (0 = all cores)"},
    "executor": {"choices": ["process", "serial", "dask"]},
    "scheduler_address": {"help": "Dask scheduler, tcp://host:8786"},
    "window_s": {
        "type": float,
        "help": "seconds after a start that hosts must be recorded without long gaps",
    },
    "max_gap_s": {"type": float},
    "min_history_s": {"type": float},
    "history_s": {
        "type": _seconds_or_all,
        "help": "seconds of history given to the forecaster (0 = all)",
    },
    "inputs": {
        "choices": ["analog", "forecaster"],
        "help": "how the pipeline builds CPU inputs (see ppe/replay/README.md)",
    },
}


def flag(key: str) -> str:
    """A flat key's flag: ``replan_every_s`` -> ``--replan-every`` (units stay in the help)."""
    return "--" + key.removesuffix("_s").replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    defaults = ReplayConfig().to_flat()
    p = argparse.ArgumentParser(
        prog="ppe replay",
        description="Replay load traces (files or directories) through forecaster, models and "
        "scheduler; simulate each schedule on the actual trace; report per strategy.",
    )
    p.add_argument("traces", nargs="+", help="trace files or directories of trace files")
    for key, options in FLAGS.items():
        name = flag(key)
        if not {"choices", "action"} & set(options):  # the metavar argparse would derive
            options = {"metavar": name[2:].replace("-", "_").upper(), **options}
        p.add_argument(name, dest=key, **{"default": defaults[key], **options})
    p.add_argument("--no-runs", action="store_true", help="leave per-run records out of the JSON")
    p.add_argument("--out", default=None, help="JSON report path")
    p.add_argument("--html", default=None, help="HTML report path")
    p.add_argument("--quiet", action="store_true", help="no progress bar or table")
    return p


def config_from_args(args: argparse.Namespace) -> ReplayConfig:
    """The flags as flat settings, within :data:`LOCAL_LIMITS` (this machine's own run);
    without ``--replan``, ``from_flat`` picks the re-planned strategies from ``--strategies``."""
    flat = {key: getattr(args, key) for key in FLAGS}
    if flat["replan"] is None:
        del flat["replan"]
    return ReplayConfig.from_flat(
        {"traces": args.traces, **flat, "include_runs": not args.no_runs or bool(args.html)},
        LOCAL_LIMITS,
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
