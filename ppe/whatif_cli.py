"""`ppe whatif`: predict how an application would run on a machine described in a what-if spec
(PetaSIM's nodesets, linksets, datasets, distributions and execution scripts; docs/whatif.md).

    ppe whatif examples/whatif/homogeneous.toml
    ppe whatif examples/whatif/heterogeneous.toml --strategy conservative --out report.json
    ppe whatif examples/whatif/traces.toml --simulate --starts 20 --workers 2
    ppe whatif examples/whatif/heterogeneous.toml --html whatif.html
    ppe whatif examples/whatif/heterogeneous.toml --executor dask --scheduler-address tcp://h:8786

Prints one row per sweep point: the swept values, the predicted makespan's mean and interval,
and each nodeset's rows per node and compute / communication / waiting seconds. Files the spec
names (profiles, traces, grammar files, signatures) are read here, relative to the spec's
folder; the computation is ppe.whatif's. A spec with mistakes is refused before anything runs,
every problem with its line: exit status 2.

``--simulate`` answers through the trace-driven simulator instead: each point planned at
``--starts`` start times in the traces' span (from the data before each start) and run over
the recorded load, a distribution of makespans (ppe/whatif/simulated.py); ``--traces DIR``
reads the spec's trace files from DIR instead of the spec's folder. ``--html FILE`` writes the
same table, the notes and plots of the makespan against the swept field as one page
(ppe/whatif/html.py). A sweep's points (and, simulated, chunks of each point's start times)
run on ``--executor``: a process pool of ``--workers`` (0: every core), this process
(``serial``), or a Dask cluster at ``--scheduler-address``, as ``ppe replay`` does; results
are gathered in point order, so the answer does not depend on where they ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import scheduler
from ppe.executors import EXECUTORS, ExecutorError
from ppe.pmac import MachineProfile, profile_from_json
from ppe.traces import read_trace, trace_files
from ppe.whatif import (
    LoadTrace,
    Options,
    RegisteredHost,
    Report,
    ResolveError,
    SpecError,
    Spread,
    WhatIfError,
    evaluate,
    format_table,
    parse_spec,
)
from ppe.whatif.html import render_html
from ppe.whatif.simulated import SimOptions, SimReport, format_sim_table, simulate_whatif


class FileResolver:
    """References as files relative to the spec's folder; registered hosts are the service's."""

    def __init__(self, base: Path, traces: Path | None = None) -> None:
        self.base = base
        self.traces = traces or base

    def _path(self, ref: str) -> Path:
        return self.base / ref

    def profile(self, ref: str) -> MachineProfile:
        return profile_from_json(self._path(ref).read_text())

    def trace(self, ref: str) -> LoadTrace:
        t = read_trace(self.traces / ref).alive()
        return LoadTrace(t.name, t.timestamps, t.availability)

    def trace_dir(self, ref: str) -> list[str]:
        folder = self.traces / ref
        if not folder.is_dir():
            raise ResolveError(f"no such folder {str(folder)!r}")
        return [f"{ref.rstrip('/')}/{f.name}" for f in trace_files(folder)]

    def text(self, ref: str) -> str:
        return self._path(ref).read_text()

    def host(self, name: str) -> RegisteredHost:
        raise ResolveError(
            f"registered host {name!r}: hosts and their forecasts are read by the service "
            "(POST /api/v1/whatif, docs/whatif.md); the CLI reads files only"
        )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ppe whatif", description=__doc__.split("\n\n")[0])
    p.add_argument("spec", type=Path, help="a what-if spec (TOML)")
    p.add_argument(
        "--simgrid",
        type=Path,
        default=None,
        metavar="PLATFORM.xml",
        help="a SimGrid platform: its hosts and links become the spec's nodesets and linksets "
        "(replaces the spec's [machine] simgrid)",
    )
    p.add_argument("--out", type=Path, default=None, help="write the report as JSON here")
    p.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="REPORT.html",
        help="write a self-contained HTML page (table, notes, plots) here",
    )
    p.add_argument(
        "--strategy",
        default="mean",
        choices=scheduler.STRATEGIES,
        help="the scheduler's strategy at every point (default: mean)",
    )
    p.add_argument("--k", type=float, default=2.0, help="k of the conservative strategy")
    p.add_argument("--confidence", type=float, default=0.95, help="interval confidence")
    p.add_argument("--json", action="store_true", help="print the JSON report instead of a table")
    run = p.add_argument_group("where the sweep runs (both paths; the answer is the same)")
    run.add_argument(
        "--executor",
        default="process",
        choices=EXECUTORS,
        help="a local process pool (default), this process, or a Dask cluster",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=0,
        help="processes of the pool (default 0: every core)",
    )
    run.add_argument(
        "--scheduler-address",
        default=None,
        metavar="tcp://HOST:8786",
        help="the Dask scheduler (with --executor dask)",
    )
    sim = p.add_argument_group("simulated evaluation (trace-driven, docs/whatif.md)")
    sim.add_argument(
        "--simulate", action="store_true", help="run each point over the recorded load"
    )
    sim.add_argument(
        "--traces", type=Path, default=None, help="folder of the trace files (default: the spec's)"
    )
    sim.add_argument("--starts", type=int, default=20, help="start times per point (default 20)")
    sim.add_argument("--seed", type=int, default=0, help="seed of the start times and draws")
    sim.add_argument(
        "--warmup",
        type=float,
        default=SimOptions().warmup_s,
        help="seconds of history before the first possible start (default one day)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.confidence < 1:
        print("ppe whatif: --confidence must be in (0, 1)", file=sys.stderr)
        return 2
    try:
        text = args.spec.read_text()
    except OSError as exc:
        print(f"ppe whatif: cannot read {args.spec}: {exc}", file=sys.stderr)
        return 2
    options = Options(strategy=args.strategy, confidence=args.confidence, k=args.k)
    if args.simulate and (args.starts < 1 or args.warmup < 0):
        print("ppe whatif: --starts must be at least 1 and --warmup not negative", file=sys.stderr)
        return 2
    try:
        spread = Spread(args.executor, args.workers, args.scheduler_address)
    except ValueError as exc:
        print(f"ppe whatif: {exc}", file=sys.stderr)
        return 2
    resolver = FileResolver(args.spec.parent, args.traces)
    report: Report | SimReport
    try:
        simgrid = str(args.simgrid.resolve()) if args.simgrid is not None else None
        whatif = parse_spec(text, str(args.spec), resolver.text, simgrid)
        if args.simulate:
            sim = SimOptions(args.starts, args.seed, args.warmup, args.workers)
            report = simulate_whatif(whatif, resolver, options, sim, spread)
        else:
            report = evaluate(whatif, resolver, options, spread)
    except SpecError as exc:
        print(f"ppe whatif: {len(exc.problems)} problem(s) in the spec:\n{exc}", file=sys.stderr)
        return 2
    except (WhatIfError, ExecutorError) as exc:
        print(f"ppe whatif: {exc}", file=sys.stderr)
        return 2
    document = report.to_dict()
    if whatif.notes:
        document["platform_notes"] = list(whatif.notes)
    if args.out is not None:
        args.out.write_text(json.dumps(document, indent=2))
    if args.html is not None:
        args.html.write_text(render_html(report, whatif.notes), encoding="utf-8")
    table = format_sim_table(report) if isinstance(report, SimReport) else format_table(report)
    print(json.dumps(document, indent=2) if args.json else table)
    if not args.json:
        for note in whatif.notes:
            print(f"note: {note}")
    return 0
