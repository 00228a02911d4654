"""``ppe-cg``: the command every MPI rank runs (``mpiexec -n K ppe-cg ...``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mpi4py import MPI

from ppe.apps.cg.numerics import Problem
from ppe.apps.cg.runner import Options, Outcome, RunFailed, run, say
from ppe.apps.cg.steps import KINDS, Schedule
from ppe.apps.guard import one_blas_thread, pin_to_core
from ppe.apps.signature import (
    StepTimes,
    add_signature_options,
    check_signature_options,
    load_signature,
    signature_result,
    timed_mean,
)
from ppe.malloc import keep_heap
from ppe.pas2p.execution import ExecutionPlan, SignatureFileError

EXIT_BAD_INPUT = 2
CG_WARMUP = 3  # untimed steps before each timed one in a signature run (see build_parser)
CG_WARMUP_SHARE = 0.05  # of the traced run, at most, for those warm-ups


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ppe-cg",
        description="Conjugate gradient for the 2-D Poisson problem over MPI ranks in equal row "
        "strips (run it under mpiexec); steps: matvec, update, check, checkpoint.",
    )
    p.add_argument("--n", type=int, default=1000, help="interior grid side (default 1000)")
    p.add_argument("--iterations", type=int, default=500, help="at most this many (default 500)")
    p.add_argument(
        "--tolerance", type=float, help="stop at a check once ‖b - Ax‖ / ‖b‖ is below this"
    )
    p.add_argument(
        "--check-every", type=int, default=10, help="iterations between true residuals (10)"
    )
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=100,
        help="iterations between checkpoints of x to disk (100; 0: none)",
    )
    p.add_argument(
        "--checkpoint-dir",
        type=Path,
        help="where each rank writes x.<rank>.npy (default: a temporary directory per rank, "
        "removed at the end)",
    )
    p.add_argument("--pin", action="store_true", help="pin rank r to core r %% cpu count")
    p.add_argument(
        "--keep-heap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep numpy's temporaries in the heap (ppe/malloc.py; default on)",
    )
    p.add_argument("--trace", help="per-rank JSON-lines event log (FILE.<rank> or {rank} in FILE)")
    # a matrix-vector product timed after one update ran 13-17 % slower than in the run at
    # n = 1000 (one step does not rebuild what the caches held); after three, within 4 %. At
    # n = 2000 three doubled the signature's cost for nothing: at most 5 % of the run goes to
    # warm-ups (docs/pas2p.md, "Warm-up")
    add_signature_options(p, warmup=CG_WARMUP, warmup_share=CG_WARMUP_SHARE)
    p.add_argument("--stall-timeout", type=float, default=120.0, help="s without progress: abort")
    p.add_argument(
        "--verify-max", type=int, default=256, help="compare with one process up to this n"
    )
    return p


def check_args(args: argparse.Namespace) -> str | None:
    """The first problem with the arguments, or None (every rank checks the same)."""
    if args.n < 1 or args.iterations < 1 or args.check_every < 1:
        return "--n, --iterations and --check-every must be at least 1"
    if args.checkpoint_every < 0:
        return "--checkpoint-every must be at least 0 (0: no checkpoints)"
    if args.tolerance is not None and not args.tolerance > 0:
        return "--tolerance must be positive"
    if args.stall_timeout <= 0:
        return "--stall-timeout must be positive"
    return check_signature_options(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.keep_heap:
        keep_heap()
    one_blas_thread()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        problem_text = check_args(args)
        if problem_text is not None:
            raise RunFailed(problem_text)
        plan = load_signature(args)
    except (RunFailed, SignatureFileError) as exc:
        if rank == 0:
            say(str(exc))
        return EXIT_BAD_INPUT
    if args.pin:
        pin_to_core(rank)
    opts = Options(
        problem=Problem(args.n),
        schedule=Schedule(args.iterations, args.check_every, args.checkpoint_every),
        tolerance=args.tolerance,
        checkpoint_dir=args.checkpoint_dir,
        trace=args.trace,
        stall_timeout_s=args.stall_timeout,
        verify_max=args.verify_max,
    )
    hosts: list[str] = comm.allgather(MPI.Get_processor_name())
    try:
        if plan is not None:
            return run_signature(comm, opts, plan, hosts, args.signature)
        outcome = run(comm, opts)
    except RunFailed as exc:  # every rank raises it together: nothing ran
        if rank == 0:
            say(str(exc))
        return EXIT_BAD_INPUT
    except Exception as exc:  # one rank failed: stop the whole job
        say(f"rank {rank} failed: {type(exc).__name__}: {exc}")
        comm.Abort(1)
        return 1
    if outcome is None:
        return 0
    assert isinstance(outcome, Outcome)
    print(json.dumps(summary(outcome)), flush=True)
    return 0


def summary(o: Outcome) -> dict[str, Any]:
    """The one-line result: times, convergence, strips, each rank's compute per step kind."""
    return {
        "total_s": o.total_s,
        "iterations": o.iterations,
        "residual": o.residual,
        "residual_max": o.residual_max,
        "checks": [[i, r] for i, r in o.history],
        "checkpoints": o.checkpoints,
        "rows": o.split,
        "compute_s": o.compute_s,
        "reference_error": o.reference_error,
    }


def run_signature(
    comm: MPI.Comm, opts: Options, plan: ExecutionPlan, hosts: list[str], path: Path
) -> int:
    """Run the signature's steps; rank 0 prints the predicted full run and, per rank, its rows
    and mean compute seconds per step kind in the timed runs."""
    steps = [step for _, step in plan.schedule()]
    times = run(comm, opts, steps=steps)
    if times is None:
        return 0
    assert isinstance(times, StepTimes)
    kind = {k: opts.schedule.at(k).kind for k in set(steps)}

    def of_kind(name: str) -> Callable[[int], bool]:
        return lambda k: kind[k] == name

    ranks = []
    for r, (rows, compute) in enumerate(zip(times.split, times.compute_s, strict=True)):
        per_kind = {name: timed_mean(plan, compute, of_kind(name)) for name in KINDS}
        ranks.append(
            {
                "rank": r,
                "host": hosts[r],
                "rows": rows,
                "compute_s": {k: v for k, v in per_kind.items() if v is not None},
            }
        )
    print(json.dumps({**signature_result(plan, times, path), "ranks": ranks}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
