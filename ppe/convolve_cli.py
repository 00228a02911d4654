"""`ppe convolve`: a signature x a machine profile -> predicted seconds per unit and per
iteration, with the breakdown by operation class (docs/pmac.md).

    ppe convolve --signature sor.toml --profile host.json --n 4000
    ppe convolve --signature sor --profile host.json --n 4000 --ranks-per-host 2 --json

``--signature`` is a TOML file or the name of a shipped signature (sor, jacobi2d). The files
are read here; the computation is ppe.pmac's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ppe.pmac import (
    OVERLAPS,
    Convolution,
    ProfileError,
    SignatureError,
    builtin_signature,
    convolve,
    parse_signature,
    profile_from_json,
)
from ppe.pmac.signature import BUILTIN


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ppe convolve", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--signature", required=True, help=f"a signature TOML file, or one of {', '.join(BUILTIN)}"
    )
    p.add_argument("--profile", required=True, type=Path, help="a profile JSON (ppe profile --out)")
    p.add_argument("--n", type=float, default=None, help="the parameter n (grid side)")
    p.add_argument("--rows", type=float, default=None, help="rows per rank (default: n)")
    p.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE", help="any other parameter"
    )
    p.add_argument("--ranks-per-host", type=int, default=1, help="ranks sharing the host")
    p.add_argument("--overlap", choices=OVERLAPS, default="full", help="memory/flop overlap")
    p.add_argument("--fraction", type=float, default=None, help="with --overlap fraction")
    p.add_argument("--neighbours", type=int, default=0, help="neighbours messaged per iteration")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    return p


def _params(args: argparse.Namespace, declared: Mapping[str, object]) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in args.param:
        name, sep, raw = (s.strip() for s in item.partition("="))
        if not sep or not name:
            raise SignatureError(f"--param {item}: expected NAME=VALUE")
        try:
            values[name] = float(raw)
        except ValueError:
            raise SignatureError(f"--param {item}: {raw!r} is not a number") from None
    if args.n is not None:
        values["n"] = args.n
    if args.rows is not None:
        values["rows"] = args.rows
    elif "n" in values and "rows" in declared and "rows" not in values:
        values["rows"] = values["n"]  # one rank holds the whole grid
    return values


def to_dict(c: Convolution) -> dict[str, Any]:
    return {
        "signature": c.signature,
        "unit": c.unit,
        "params": dict(c.params),
        "per_unit": {"mean": c.per_unit.mean(), "sd": c.per_unit.std()},
        "per_iteration": {"mean": c.per_iteration.mean(), "sd": c.per_iteration.std()},
        "units_per_iteration": c.units_per_iteration,
        "breakdown": c.breakdown(),
        "message_seconds_per_iteration": c.message_seconds_per_iteration,
        "terms": [
            {"class": t.op_class, "name": t.name, "count": t.count, "seconds": t.seconds}
            for t in c.terms
        ],
        "overlap": c.overlap,
        "fraction": c.fraction,
        "ranks_per_host": c.ranks_per_host,
        "extrapolated": c.extrapolated,
        "notes": list(c.notes),
    }


def _print(c: Convolution) -> None:
    pu, pi = c.per_unit, c.per_iteration
    params = ", ".join(f"{k}={v:g}" for k, v in c.params.items())
    print(f"{c.signature} ({params}), {c.ranks_per_host} rank(s) per host, overlap {c.overlap}")
    print(f"  per {c.unit}: {pu.mean() * 1e9:.3f} ns +/- {pu.std() * 1e9:.3f}")
    print(
        f"  per iteration ({c.units_per_iteration:g} units): {pi.mean():.6g} s +/- {pi.std():.2g}"
    )
    print("  breakdown (ns per unit, before overlap):")
    for t in c.terms:
        print(f"    {t.op_class:8} {t.name:28} x{t.count:<10.4g} {t.seconds * 1e9:9.3f}")
    for cls, s in c.breakdown().items():
        print(f"    {cls:8} {'total':28} {'':11} {s * 1e9:9.3f}")
    if c.message_seconds_per_iteration:
        print(f"  messages per iteration: {c.message_seconds_per_iteration:.6g} s")
    for note in c.notes:
        print(f"  note: {note}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.signature in BUILTIN and not Path(args.signature).exists():
            signature = builtin_signature(args.signature)
        else:
            signature = parse_signature(Path(args.signature).read_text())
        profile = profile_from_json(args.profile.read_text())
        fraction = args.fraction
        if args.overlap == "fraction" and (fraction is None or not math.isfinite(fraction)):
            raise ValueError("--overlap fraction needs --fraction F (0..1)")
        result = convolve(
            signature,
            profile,
            _params(args, signature.parameters),
            ranks_per_host=args.ranks_per_host,
            overlap=args.overlap,
            fraction=fraction,
            neighbours=args.neighbours,
        )
    except (OSError, ValueError) as exc:  # ProfileError, SignatureError are ValueErrors
        kind = type(exc).__name__ if isinstance(exc, ProfileError | SignatureError) else "error"
        print(f"ppe convolve: {kind}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(to_dict(result), indent=2))
    else:
        _print(result)
    return 0
