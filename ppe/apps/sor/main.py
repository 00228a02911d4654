"""``ppe-sor``: the command every MPI rank runs (``mpiexec -n K ppe-sor ...``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from mpi4py import MPI

from ppe.apps.guard import one_blas_thread, pin_to_core
from ppe.apps.signature import (
    StepTimes,
    add_signature_options,
    check_signature_options,
    load_signature,
    signature_result,
    timed_mean,
)
from ppe.apps.sor import report
from ppe.apps.sor.halo import halo_report
from ppe.apps.sor.numerics import Problem
from ppe.apps.sor.planner import BLOCK, Planner
from ppe.apps.sor.runner import (
    Options,
    Outcome,
    Progress,
    RankStats,
    RunFailed,
    run,
)
from ppe.apps.trace import now
from ppe.client import PPEClient, PPEError
from ppe.malloc import keep_heap
from ppe.pas2p.execution import ExecutionPlan, SignatureFileError

EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_REPORT = 2, 1, 4


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ppe-sor",
        description="Red-black SOR over MPI ranks in strips that follow PPE's schedules "
        "(run it under mpiexec: one rank per host).",
    )
    p.add_argument("--server", help="PPE service URL (default $PPE_URL or http://127.0.0.1:8000)")
    p.add_argument("--token-file", type=Path, help="file holding an app token (else $PPE_TOKEN)")
    p.add_argument("--offline", action="store_true", help="no server: block strips, no report")
    p.add_argument("--hosts", help="host names, one per rank (default: MPI processor names)")
    p.add_argument("--strategy", default="mean", help="block, mean, conservative, expected...")
    p.add_argument("--k", type=float, default=2.0, help="the strategy's k (default 2)")
    p.add_argument(
        "--benchmark",
        type=float,
        help="dedicated seconds per element for every host "
        "(default: the benchmark registered with the service)",
    )
    p.add_argument("--n", type=int, default=1000, help="interior grid side (default 1000)")
    p.add_argument("--iterations", type=int, default=100, help="at most this many (default 100)")
    p.add_argument("--tolerance", type=float, help="stop once the residual norm is below this")
    p.add_argument("--residual-every", type=int, default=10, help="iterations between residuals")
    p.add_argument("--omega", type=float, default=1.9, help="relaxation factor in (0, 2)")
    p.add_argument("--check", type=float, default=5.0, help="seconds between pace checks")
    p.add_argument(
        "--slack", type=float, default=0.1, help="behind = slower than predicted by this"
    )
    p.add_argument("--replan", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--pin", action="store_true", help="pin rank r to core r %% cpu count")
    p.add_argument(
        "--keep-heap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the sweep's numpy temporaries in the heap (ppe/malloc.py; default on: "
        "without it, glibc may fault them in on every pass)",
    )
    p.add_argument("--trace", help="per-rank JSON-lines event log (FILE.<rank> or {rank} in FILE)")
    add_signature_options(p)
    p.add_argument(
        "--rows",
        type=int,
        help="with --signature: every rank holds this many rows of the n-column grid "
        "(a probe of one host's strip; default: the schedule's strips)",
    )
    p.add_argument("--stall-timeout", type=float, default=120.0, help="s without progress: abort")
    p.add_argument("--verify-max", type=int, default=512, help="compare with one process up to n")
    p.add_argument("--http-timeout", type=float, default=10.0, help="s per request to the server")
    return p


def check_args(args: argparse.Namespace) -> str | None:
    """The first problem with the arguments, or None (every rank checks the same)."""
    if args.n < 1 or args.iterations < 1 or args.residual_every < 1:
        return "--n, --iterations and --residual-every must be at least 1"
    if not 0 < args.omega < 2:
        return f"--omega {args.omega}: must be in (0, 2)"
    if args.check <= 0 or args.stall_timeout <= 0 or args.http_timeout <= 0:
        return "--check, --stall-timeout and --http-timeout must be positive"
    if not args.slack >= -1:
        return "--slack must be at least -1"
    if args.tolerance is not None and not args.tolerance > 0:
        return "--tolerance must be positive"
    if args.rows is not None and (args.signature is None or args.rows < 1):
        return "--rows goes with --signature and must be at least 1"
    if (signature_problem := check_signature_options(args)) is not None:
        return signature_problem
    if args.token_file is not None and not args.offline and not args.token_file.is_file():
        return f"--token-file {args.token_file}: no such file"
    return None


def host_names(comm: MPI.Comm, given: str | None) -> list[str]:
    """One name per rank: ``--hosts``, else the processor names (made unique as NAME:RANK
    when ranks share a machine)."""
    if given is not None:
        hosts = [h.strip() for h in given.split(",")]
        if len(hosts) != comm.Get_size() or len(set(hosts)) != len(hosts) or "" in hosts:
            raise RunFailed(
                f"--hosts names {len(hosts)} hosts ({given!r}) but there are "
                f"{comm.Get_size()} ranks: give one distinct name per rank"
            )
        return hosts
    names: list[str] = comm.allgather(MPI.Get_processor_name())
    if len(set(names)) == len(names):
        return names
    return [f"{name}:{rank}" for rank, name in enumerate(names)]


def make_client(args: argparse.Namespace) -> PPEClient | None:
    if args.offline:
        return None
    token = args.token_file.read_text().strip() if args.token_file else None
    return PPEClient(
        args.server, token or os.environ.get("PPE_TOKEN"), timeout=args.http_timeout, retries=2
    )


def say(message: str) -> None:
    print(f"ppe-sor: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.keep_heap:
        keep_heap()  # the sweep's temporaries stay in the heap: no page faults every pass
    one_blas_thread()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    problem_text = check_args(args)
    try:
        if problem_text is not None:
            raise RunFailed(problem_text)
        hosts = host_names(comm, args.hosts)
        plan = load_signature(args)
    except (RunFailed, SignatureFileError) as exc:
        if rank == 0:
            say(str(exc))
        return EXIT_BAD_INPUT
    core = pin_to_core(rank) if args.pin else None
    opts = Options(
        problem=Problem(args.n, args.omega),
        iterations=args.iterations,
        tolerance=args.tolerance,
        residual_every=args.residual_every,
        check_s=args.check,
        replan=args.replan,
        slack=args.slack,
        stall_timeout_s=args.stall_timeout,
        verify_max=args.verify_max,
        trace=args.trace,
        rows=args.rows,
    )
    setup = report.RunSetup(
        args.n, args.iterations, hosts, args.strategy, args.k, args.omega, args.tolerance
    )
    stats = RankStats(rank, hosts[rank], core)
    progress = Progress()
    client = make_client(args) if rank == 0 else None
    planner = None
    if rank == 0:
        planner = Planner(
            client,
            hosts,
            args.n,
            args.iterations,
            BLOCK if args.offline else args.strategy,
            args.k,
            args.benchmark,
            args.check if args.replan else None,
        )

    def on_failure(message: str) -> None:
        post_failed(client, setup, progress, stats, message)

    if plan is not None:
        return run_signature(comm, opts, stats, progress, planner, plan, hosts, args)
    try:
        outcome = run(comm, opts, stats, progress, planner, on_failure if rank == 0 else None)
    except RunFailed as exc:  # every rank raises it together: nothing ran
        if rank == 0:
            say(
                f"{exc} (the server: {args.server or os.environ.get('PPE_URL') or 'default'}; "
                "--offline runs block strips without it)"
            )
        return EXIT_BAD_INPUT
    except Exception as exc:  # one rank failed: report if rank 0, then stop the whole job
        say(f"rank {rank} failed: {type(exc).__name__}: {exc}")
        if rank == 0:
            post_failed(client, setup, progress, stats, f"rank 0: {exc}")
        comm.Abort(1)
        return 1
    if outcome is None:
        return 0
    assert isinstance(outcome, Outcome)
    return finish(client, setup, outcome)


def run_signature(
    comm: MPI.Comm,
    opts: Options,
    stats: RankStats,
    progress: Progress,
    planner: Planner | None,
    plan: ExecutionPlan,
    hosts: list[str],
    args: argparse.Namespace,
) -> int:
    """Run the signature's steps; rank 0 prints the predicted full run and each rank's
    measured speed (seconds per element update, as ``--benchmark`` takes it)."""
    steps = [step for _, step in plan.schedule()]
    try:
        times = run(comm, opts, stats, progress, planner, steps=steps)
    except RunFailed as exc:
        if comm.Get_rank() == 0:
            say(str(exc))
        return EXIT_BAD_INPUT
    if times is None:
        return 0
    assert isinstance(times, StepTimes)
    ranks = []
    for r, (rows, compute) in enumerate(zip(times.split, times.compute_s, strict=True)):
        per_half = timed_mean(plan, compute) or 0.0
        ranks.append(
            {
                "rank": r,
                "host": hosts[r],
                "rows": rows,
                "half_sweep_s": per_half,
                "benchmark": 2 * per_half / (rows * args.n) if rows else None,
            }
        )
    out = {**signature_result(plan, times, args.signature), "ranks": ranks}
    print(json.dumps(out), flush=True)
    return 0


def post_failed(
    client: PPEClient | None,
    setup: report.RunSetup,
    progress: Progress,
    stats: RankStats,
    error: str,
) -> None:
    if client is None:
        return
    try:
        answer = client.post_runs([report.failed(setup, progress, stats, error, now())])
        say(f"reported the failed run: id {answer['ids'][0]}")
    except PPEError as exc:
        say(f"could not report the failed run: {exc}")


def finish(client: PPEClient | None, setup: report.RunSetup, outcome: Outcome) -> int:
    """Print the summary, post the report; the exit status says what went wrong, if anything."""
    run_report = report.completed(setup, outcome)
    summary = {
        "total_s": outcome.total_s,
        "iterations": outcome.progress.done,
        "residual": outcome.residual,
        "checksum": outcome.checksum,
        "checksum_ok": outcome.checksum_ok,
        "rows": outcome.progress.split,
        "initial_rows": outcome.progress.initial_split,
        "replans": len(outcome.progress.replans),
        "migrations": len(outcome.progress.migrations),
        "schedule_id": outcome.progress.first_schedule,
        "iter_s": [sum(r.iter_s) / max(1, len(r.iter_s)) for r in outcome.ranks],
        "halo": [halo_report(r.halo_s, r.halo_bytes) for r in outcome.ranks],
        "run_id": None,
    }
    status = 0
    if client is not None:
        try:
            summary["run_id"] = client.post_runs([run_report])["ids"][0]
        except PPEError as exc:
            say(f"could not report the run: {exc}")
            status = EXIT_REPORT
        finally:
            client.close()
    print(json.dumps(summary), flush=True)
    if outcome.checksum_ok is False:
        say("the result differs from the single-process run")
        return EXIT_MISMATCH
    return status


if __name__ == "__main__":
    raise SystemExit(main())
