"""`ppe pas2p analyze`: the phases, weights and signature of a traced run (docs/pas2p.md).

    ppe pas2p analyze run.jsonl.0 run.jsonl.1
    ppe pas2p analyze trace/traces.otf2 --format otf2 --keep 0.95 --json
    ppe pas2p analyze run.jsonl.* --html timeline.html
    ppe pas2p analyze run.jsonl.* --post sor-n800 --app sor --param n=800 --param iterations=100

The files are read and written here; the analysis is ppe.pas2p's. ``--post`` stores it in a
PPE service (``/api/v1/signatures/phases``, operator token) through ppe.client.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppe.client import PPEClient, PPEError
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
    a.add_argument("--post", metavar="NAME", help="store the signature in a PPE service under NAME")
    a.add_argument("--app", help="the traced application (with --post), e.g. sor")
    a.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="a parameter of the traced run (with --post; repeat), e.g. n=800",
    )
    a.add_argument("--server", help="PPE service URL (default $PPE_URL or http://127.0.0.1:8000)")
    a.add_argument(
        "--token-file", type=Path, help="file holding an operator token (else $PPE_TOKEN)"
    )
    return p


def parse_param(text: str) -> tuple[str, bool | int | float | str]:
    """``k=v``: v as an integer, a finite number, true/false, or else the text itself."""
    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", key):
        raise ValueError(f"--param {text!r}: expected NAME=VALUE, NAME an identifier")
    if value in ("true", "false"):
        return key, value == "true"
    try:
        return key, int(value)
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return key, value
    return key, number if math.isfinite(number) else value


def post_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the --post options, checked before the traces are read."""
    if args.post is None:
        if args.app or args.param or args.server or args.token_file:
            return "--app, --param, --server and --token-file go with --post NAME"
        return None
    if not args.app:
        return "--post needs --app (the traced application)"
    if args.token_file is not None and not args.token_file.is_file():
        return f"--token-file {args.token_file}: no such file"
    try:
        for text in args.param:
            parse_param(text)
    except ValueError as exc:
        return str(exc)
    return None


def postable(analysis: dict[str, Any]) -> dict[str, Any]:
    """JSON has no infinity: an infinite tolerance (every shape one phase) is posted as null."""
    tolerance = analysis["tolerance"]
    return {**analysis, "tolerance": tolerance if math.isfinite(tolerance) else None}


def post(args: argparse.Namespace, analysis: dict[str, Any]) -> int:
    token = args.token_file.read_text().strip() if args.token_file else None
    params = dict(parse_param(text) for text in args.param)
    try:
        with PPEClient(args.server, token or os.environ.get("PPE_TOKEN"), retries=2) as client:
            stored = client.post_phase_signature(args.post, args.app, postable(analysis), params)
    except PPEError as exc:
        print(f"ppe pas2p: posting {args.post!r}: {exc}", file=sys.stderr)
        return 1
    print(
        f"stored phase signature {stored['name']} version {stored['version']}",
        file=sys.stderr if args.json else sys.stdout,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.keep <= 1:
        print("ppe pas2p: --keep must be in (0, 1]", file=sys.stderr)
        return 2
    if args.tolerance < 0:
        print("ppe pas2p: --tolerance must be >= 0", file=sys.stderr)
        return 2
    wrong = post_problem(args)
    if wrong is not None:
        print(f"ppe pas2p: {wrong}", file=sys.stderr)
        return 2
    try:
        events = read_traces(args.traces, args.format)
        sig = signature(logical_trace(events), keep=args.keep, tolerance=args.tolerance)
    except TraceError as exc:
        print(f"ppe pas2p: {exc}", file=sys.stderr)
        return 2
    if args.html is not None:
        args.html.write_text(render_html(sig, [str(t) for t in args.traces]), encoding="utf-8")
    report = to_dict(sig)
    if args.json:
        print(json.dumps(report, indent=2))
        return post(args, report) if args.post else 0
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
    return post(args, report) if args.post else 0


if __name__ == "__main__":
    raise SystemExit(main())
