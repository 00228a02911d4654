"""`ppe pas2p analyze`: the phases, weights and signature of a traced run (docs/pas2p.md).

    ppe pas2p analyze run.jsonl.0 run.jsonl.1
    ppe pas2p analyze trace/traces.otf2 --format otf2 --keep 0.95 --json
    ppe pas2p analyze run.jsonl.* --html timeline.html

The files are read and written here; the analysis is ppe.pas2p's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ppe.pas2p import FORMATS, TraceError, logical_trace, read_traces, signature
from ppe.pas2p.report import HEAD, render_html, rows, to_dict


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ppe pas2p", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="phases, weights and signature of a trace")
    a.add_argument("traces", nargs="+", type=Path, metavar="TRACE", help="trace files")
    a.add_argument("--format", choices=FORMATS, default="sor", help="trace format (default sor)")
    a.add_argument(
        "--keep", type=float, default=0.99, help="share of the run the signature keeps (0.99)"
    )
    a.add_argument(
        "--tolerance",
        type=float,
        default=0.5,
        help="relative gap in compute volume that parts two phases of one pattern (0.5)",
    )
    a.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    a.add_argument("--html", type=Path, default=None, metavar="FILE", help="write a timeline page")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.keep <= 1:
        print("ppe pas2p: --keep must be in (0, 1]", file=sys.stderr)
        return 2
    if args.tolerance < 0:
        print("ppe pas2p: --tolerance must be >= 0", file=sys.stderr)
        return 2
    try:
        events = read_traces(args.traces, args.format)
        sig = signature(logical_trace(events), keep=args.keep, tolerance=args.tolerance)
    except TraceError as exc:
        print(f"ppe pas2p: {exc}", file=sys.stderr)
        return 2
    if args.html is not None:
        args.html.write_text(render_html(sig, [str(t) for t in args.traces]), encoding="utf-8")
    if args.json:
        print(json.dumps(to_dict(sig), indent=2))
        return 0
    table = [HEAD, *rows(sig)]
    widths = [max(len(r[c]) for r in table) for c in range(len(HEAD))]
    print(f"{len(events)} events, {sig.ranks} ranks, {len(sig.occurrences)} segments")
    for r in table:
        print("  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))
    print(
        f"signature: phases {', '.join(map(str, sig.kept))} carry {sig.kept_share:.2%} "
        f"(asked {sig.keep:.2%})"
    )
    print(
        f"traced {sig.total:.6g} s, predicted {sig.predicted:.6g} s "
        f"(weighted sum of the kept phases' mean times; error {sig.error:+.2%})"
    )
    for p in sig.phases:
        print(f"  phase {p.id}: {p.pattern()}")
    if args.html is not None:
        print(f"wrote {args.html}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
