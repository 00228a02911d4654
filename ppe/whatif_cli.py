"""`ppe whatif`: predict how an application would run on a machine described in a what-if spec
(PetaSIM's nodesets, linksets, datasets, distributions and execution scripts; docs/whatif.md).

    ppe whatif examples/whatif/homogeneous.toml
    ppe whatif examples/whatif/heterogeneous.toml --strategy conservative --out report.json

Prints one row per sweep point: the swept values, the predicted makespan's mean and interval,
and each nodeset's rows per node and compute / communication / waiting seconds. Files the spec
names (profiles, traces, grammar files, signatures) are read here, relative to the spec's
folder; the computation is ppe.whatif's. A spec with mistakes is refused before anything runs,
every problem with its line: exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import scheduler
from ppe.pmac import MachineProfile, profile_from_json
from ppe.traces import read_trace
from ppe.whatif import (
    LoadTrace,
    Options,
    RegisteredHost,
    ResolveError,
    SpecError,
    WhatIfError,
    evaluate,
    format_table,
    parse_spec,
)


class FileResolver:
    """References as files relative to the spec's folder; registered hosts are the service's."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def _path(self, ref: str) -> Path:
        return self.base / ref

    def profile(self, ref: str) -> MachineProfile:
        return profile_from_json(self._path(ref).read_text())

    def trace(self, ref: str) -> LoadTrace:
        t = read_trace(self._path(ref)).alive()
        return LoadTrace(t.name, t.timestamps, t.availability)

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
        "--strategy",
        default="mean",
        choices=scheduler.STRATEGIES,
        help="the scheduler's strategy at every point (default: mean)",
    )
    p.add_argument("--k", type=float, default=2.0, help="k of the conservative strategy")
    p.add_argument("--confidence", type=float, default=0.95, help="interval confidence")
    p.add_argument("--json", action="store_true", help="print the JSON report instead of a table")
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
    try:
        resolver = FileResolver(args.spec.parent)
        simgrid = str(args.simgrid.resolve()) if args.simgrid is not None else None
        whatif = parse_spec(text, str(args.spec), resolver.text, simgrid)
        report = evaluate(whatif, resolver, options)
    except SpecError as exc:
        print(f"ppe whatif: {len(exc.problems)} problem(s) in the spec:\n{exc}", file=sys.stderr)
        return 2
    except WhatIfError as exc:
        print(f"ppe whatif: {exc}", file=sys.stderr)
        return 2
    document = report.to_dict()
    if whatif.notes:
        document["platform_notes"] = list(whatif.notes)
    if args.out is not None:
        args.out.write_text(json.dumps(document, indent=2))
    print(json.dumps(document, indent=2) if args.json else format_table(report))
    if not args.json:
        for note in whatif.notes:
            print(f"note: {note}")
    return 0
