"""Running a PAS2P signature (``--signature SIG.json``): what ppe-sor and ppe-cg share.

Each application runs its set-up, then the plan's steps (``ExecutionPlan.schedule()``), each
timed on rank 0 from its compute burst to the next step's, and hands :class:`StepTimes` back.
:func:`signature_result` turns them into the prediction both print (docs/pas2p.md); the
applications add their own per-rank figures, from :func:`timed_mean` of each rank's compute.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppe.apps.trace import now
from ppe.pas2p.execution import SETUP, ExecutionPlan, SignatureFileError, execution_plan, predict

#: Untimed settling before a signature's first timed round (s of traced time). ppe-sor's
#: n=1000 run spends its first ~60 ms 5-17 % slower than its steady state, and a signature
#: run of three repeats lasts ~35 ms; but 0.05 s, measured beside no settling, moved the
#: predictions by less than the machine's noise and raised the cost to 9-15 %, so it is off
#: unless asked for (docs/pas2p.md, "Settling").
SETTLE_S = 0.0

__all__ = [
    "StepTimes",
    "add_signature_options",
    "step_times",
    "check_signature_options",
    "load_signature",
    "signature_result",
    "timed_mean",
]


def add_signature_options(
    p: argparse.ArgumentParser, warmup: int = 1, warmup_share: float = 0.0
) -> None:
    """``warmup``: the program's default count of untimed steps before each timed one;
    ``warmup_share``: the share of the traced run they may take (0: no limit)."""
    p.add_argument(
        "--signature",
        type=Path,
        help="run only this PAS2P signature's phases (ppe pas2p analyze --json) and predict "
        "the full run from their times (docs/pas2p.md); prints one JSON object",
    )
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each phase (3)")
    p.add_argument(
        "--warmup",
        type=int,
        default=warmup,
        help=f"untimed program steps before each timed one ({warmup})",
    )
    p.add_argument(
        "--warmup-share",
        type=float,
        default=warmup_share,
        help="fewer warm-up steps (down to one) where theirs would take more than this share "
        f"of the traced run ({warmup_share}; 0: no limit)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=SETTLE_S,
        help=f"untimed rounds first, until their traced time reaches this many s ({SETTLE_S})",
    )


def check_signature_options(args: argparse.Namespace) -> str | None:
    if args.repeats < 1 or args.warmup < 0 or not args.settle >= 0:
        return "--repeats must be at least 1, --warmup and --settle at least 0"
    if not 0 <= args.warmup_share <= 1:
        return "--warmup-share must be in [0, 1]"
    if args.signature is not None and not args.signature.is_file():
        return f"--signature {args.signature}: no such file"
    return None


@dataclass(frozen=True)
class StepTimes:
    """A signature run as rank 0 sees it: the set-up's and each step's seconds (burst to next
    burst, rank 0's clock), and every rank's rows and compute seconds per step."""

    setup_s: float
    step_s: list[float]
    total_s: float
    split: list[int]
    compute_s: list[list[float]]  # [rank][step]


def step_times(
    comm: Any,
    collective: Callable[[Callable[[], Any]], Any],
    started: float,
    marks: list[float],
    compute: list[float],
    split: list[int],
) -> StepTimes | None:
    """After a signature run's last step (``marks``: each step's start, then its end): every
    rank waits for the others and rank 0 gathers their compute seconds and gets the times."""
    collective(comm.Barrier)
    total = now() - started
    everyone = collective(lambda: comm.gather(compute, root=0))
    if comm.Get_rank() != 0:
        return None
    step_s = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    return StepTimes(marks[0] - started, step_s, total, split, everyone)


def load_signature(args: argparse.Namespace) -> ExecutionPlan | None:
    """The execution plan of the ``--signature`` file (``ppe pas2p analyze --json``'s
    output) with ``--repeats`` and ``--warmup``; None without ``--signature``: a full run."""
    path: Path | None = args.signature
    if path is None:
        return None
    try:
        analysis = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SignatureFileError(f"--signature {path}: {exc}") from exc
    if not isinstance(analysis, dict):
        raise SignatureFileError(f"--signature {path}: not a JSON object")
    return execution_plan(analysis, args.repeats, args.warmup, args.settle, args.warmup_share)


def timed_mean(
    plan: ExecutionPlan, values: Sequence[float], select: Callable[[int], bool] | None = None
) -> float | None:
    """The mean of ``values`` (one per ``schedule()`` entry) over the timed entries whose step
    ``select`` accepts (all by default); None when there are none."""
    chosen = [
        v
        for (_, step, timed), v in zip(plan.entries(), values, strict=True)
        if timed and (select is None or select(step))
    ]
    return math.fsum(chosen) / len(chosen) if chosen else None


def signature_result(plan: ExecutionPlan, times: StepTimes, path: Path) -> dict[str, Any]:
    """The prediction (``Prediction.to_dict()``) with ``signature``, ``setup_s``, ``cost_s``
    (what the signature run took) and ``steps`` (how many it ran)."""
    measured = plan.measured(times.step_s)
    for p in plan.phases:
        if p.step == SETUP:
            measured[p.id] = [times.setup_s]
    prediction = predict(plan, measured)
    return {
        "signature": str(path),
        **prediction.to_dict(),
        "setup_s": times.setup_s,
        "cost_s": times.total_s,
        "steps": len(times.step_s),
    }
