"""``ppe-pas2p-replay``: the command every MPI rank runs (``mpiexec -n R ppe-pas2p-replay ...``).

Rank 0 reads and analyses the traces (``ppe.pas2p``), hands every rank its part of each kept
phase's typical occurrence (``ppe.pas2p.replay_plan``), and the ranks replay them: compute
bursts as calibrated busy work (``busy.py``), messages with the recorded peers, sizes and tags,
collectives as an allreduce of the recorded size (a barrier for none) on their communicator:
all ranks, or a sub-communicator of the ranks the trace gave, created once at the start for
each such set. Each replay is timed on
the anchor rank as the trace timed its segments, and the weighted sum of the phases' times
predicts the run (``ppe.pas2p.execution.predict``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from ppe.apps.guard import one_blas_thread, pin_to_core
from ppe.apps.replay_phases.busy import KERNEL, Busy
from ppe.malloc import keep_heap
from ppe.pas2p import FORMATS, TraceError, logical_trace, read_traces, signature
from ppe.pas2p.execution import SETUP, ExecutionPlan, execution_plan, predict
from ppe.pas2p.replay_plan import Action, communicators, replay_plan
from ppe.pas2p.report import to_dict

EXIT_BAD_INPUT = 2

#: Per phase id: this rank's (before, actions, after).
RankPart = dict[int, tuple[list[Action], list[Action], list[Action]]]
#: What rank 0 hands everyone: the plan, the anchor rank, the sub-communicators (sorted ranks
#: each) and each rank's part.
Job = tuple[ExecutionPlan, int, list[tuple[int, ...]], list[RankPart]]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ppe-pas2p-replay",
        description="Replay a traced MPI run's PAS2P signature (busy work for the compute "
        "bursts, the recorded messages) and predict the full run (run it under mpiexec with "
        "the trace's ranks).",
    )
    p.add_argument("traces", nargs="*", type=Path, help="the traced run's files (every rank's)")
    p.add_argument("--format", default="sor", help=f"trace format: {', '.join(FORMATS)} (sor)")
    p.add_argument("--keep", type=float, default=0.99, help="share of the run kept (0.99)")
    p.add_argument("--tolerance", type=float, default=0.5, help="phase volume tolerance (0.5)")
    p.add_argument("--repeats", type=int, default=3, help="timed replays of each phase (3)")
    p.add_argument(
        "--rate",
        type=float,
        help="busy-work units per second on the traced machine (its --calibrate); default: "
        "measured here, so the replay reproduces the traced compute times",
    )
    p.add_argument(
        "--calibrate", action="store_true", help="print this machine's rate as JSON and exit"
    )
    p.add_argument("--pin", action="store_true", help="pin rank r to core r %% cpu count")
    return p


def check_args(args: argparse.Namespace) -> str | None:
    """The first problem with the arguments, or None (every rank checks the same)."""
    if args.calibrate:
        return None
    if not args.traces:
        return "no trace files given"
    if args.repeats < 1:
        return "--repeats must be at least 1"
    if args.rate is not None and not (args.rate > 0 and np.isfinite(args.rate)):
        return "--rate must be a positive number"
    return None


def say(text: str) -> None:
    print(f"ppe-pas2p-replay: {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    keep_heap()
    one_blas_thread()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if args.pin:
        pin_to_core(rank)
    if args.calibrate:
        rate, rates = measure_rate(comm, Busy())
        if rank == 0:
            print(json.dumps({"rate": rate, "ranks": rates, "kernel": KERNEL}), flush=True)
        return 0
    problem = check_args(args)
    if problem is not None:
        if rank == 0:
            say(problem)
        return EXIT_BAD_INPUT
    job: Job | None = None
    error = None
    if rank == 0:
        try:
            job = analyse(args, size)
        except (TraceError, ValueError) as exc:
            error = str(exc)
    error = comm.bcast(error, root=0)
    if error is not None:  # every rank leaves together: nobody waits for a replay
        if rank == 0:
            say(error)
        return EXIT_BAD_INPUT
    plan, anchor, subs, parts = job if job is not None else (None, 0, [], [])
    plan = comm.bcast(plan, root=0)
    anchor = comm.bcast(anchor, root=0)
    subs = comm.bcast(subs, root=0)
    part: RankPart = comm.scatter(parts if rank == 0 else None, root=0)
    assert plan is not None
    comms = sub_communicators(comm, subs)
    busy = Busy()
    rate = args.rate
    source = "given"
    if rate is None:
        rate, _ = measure_rate(comm, busy)
        source = "measured here"
    try:
        start = time.perf_counter()
        times = replay(comm, plan, part, busy, rate, comms)
        cost = time.perf_counter() - start
        everyone = comm.gather(times, root=0)
    except Exception as exc:  # one rank failed: stop the whole job
        say(f"rank {rank} failed: {type(exc).__name__}: {exc}")
        comm.Abort(1)
        return 1
    for sub in comms.values():
        sub.Free()
    if rank == 0:
        assert everyone is not None
        print(json.dumps(result(args, plan, everyone[anchor], cost, rate, source)), flush=True)
    return 0


def measure_rate(comm: MPI.Comm, busy: Busy) -> tuple[float, list[float]]:
    """The busy work's units per second with every rank measuring at once, as they will run
    it (one rank alone would find the cores its neighbours later take); the ranks' median."""
    comm.Barrier()
    rates: list[float] = comm.allgather(busy.rate())
    return float(statistics.median(rates)), rates


def analyse(args: argparse.Namespace, size: int) -> Job:
    """Rank 0's part: the traces' signature, its execution plan, the anchor rank, the
    sub-communicators the kept phases' collectives need and each rank's actions per phase."""
    events = read_traces(args.traces, args.format)
    trace = logical_trace(events)
    sig = signature(trace, args.keep, args.tolerance)
    if sig.ranks != size:
        raise TraceError(
            f"the traces hold {sig.ranks} ranks but this job has {size}: "
            f"run it with mpiexec -n {sig.ranks}"
        )
    plan = execution_plan(to_dict(sig), args.repeats, warmup=0)
    phases = replay_plan(sig, trace)
    bound = MPI.COMM_WORLD.Get_attr(MPI.TAG_UB)
    tags = [e.tag for e in events if e.tag is not None]
    if bound is not None and tags and not 0 <= min(tags) <= max(tags) <= bound:
        bad = next(e for e in events if e.tag is not None and not 0 <= e.tag <= bound)
        raise TraceError(f"{bad.where}: tag {bad.tag} is beyond this MPI's tags (0..{bound})")
    parts: list[RankPart] = [{p.id: p.for_rank(r) for p in phases} for r in range(size)]
    return plan, sig.anchor_rank, communicators(phases), parts


def sub_communicators(
    comm: MPI.Comm, subs: list[tuple[int, ...]]
) -> dict[tuple[int, ...], MPI.Comm]:
    """This rank's communicator for each set of ranks it belongs to. Every rank splits the
    world once per set, in the order rank 0 gave (``Split`` is collective over all of them,
    so no order of creation can deadlock); ranks outside a set get no communicator for it."""
    rank = comm.Get_rank()
    out: dict[tuple[int, ...], MPI.Comm] = {}
    for members in subs:
        sub = comm.Split(0 if rank in members else MPI.UNDEFINED, key=rank)
        if rank in members:
            out[members] = sub
    return out


def schedule(plan: ExecutionPlan) -> list[tuple[int, bool]]:
    """(phase id, timed) in replay order: the set-up once (if kept), then the plan's rounds
    (an untimed one first, each phase within half its share of the run: ``plan.runs``)."""
    head = [(p.id, True) for p in plan.phases if p.step == SETUP]
    return head + [(p.id, timed) for p, _, timed in plan.entries()]


def replay(
    comm: MPI.Comm,
    plan: ExecutionPlan,
    part: RankPart,
    busy: Busy,
    rate: float,
    comms: dict[tuple[int, ...], MPI.Comm] | None = None,
) -> dict[int, list[float]]:
    """Replay the schedule; this rank's seconds per phase, timed replays only. ``comms``: the
    sub-communicators, by their ranks, for collectives that name them."""
    comms = comms or {}
    largest = max((_bytes(a) for acts in part.values() for seq in acts for a in seq), default=0)
    out_buf = np.zeros(largest, dtype=np.uint8)
    in_buf = np.empty(largest, dtype=np.uint8)
    red_buf = np.empty(largest, dtype=np.uint8)
    times: dict[int, list[float]] = {p.id: [] for p in plan.phases}
    for pid, timed in schedule(plan):
        before, actions, after = part[pid]
        comm.Barrier()  # every replay starts together, none overlaps the previous one
        pending = [_isend(comm, out_buf, a) for a in before]
        t0 = time.perf_counter()
        for a in actions:
            if a[0] == "compute":
                busy.run(round(float(a[1]) * rate))
            elif a[0] == "send":
                pending.append(_isend(comm, out_buf, a))
            elif a[0] == "recv":
                _recv(comm, in_buf, a)
            else:
                on = comm if len(a) == 2 else comms[a[2]]  # type: ignore[index]
                n = int(a[1])
                if n == 0:
                    on.Barrier()
                else:
                    on.Allreduce([out_buf[:n], MPI.BYTE], [red_buf[:n], MPI.BYTE], op=MPI.BOR)
        took = time.perf_counter() - t0
        for a in after:
            _recv(comm, in_buf, a)
        MPI.Request.Waitall(pending)
        if timed:
            times[pid].append(took)
    return times


def _bytes(a: Action) -> int:
    """The buffer an action needs (a compute burst: none)."""
    if len(a) == 4:
        return int(a[2])
    return int(a[1]) if a[0] == "collective" else 0


def _isend(comm: MPI.Comm, buf: np.ndarray, a: Action) -> MPI.Request:
    _, peer, nbytes, tag = a  # type: ignore[misc]
    return comm.Isend([buf[: int(nbytes)], MPI.BYTE], dest=int(peer), tag=int(tag))


def _recv(comm: MPI.Comm, buf: np.ndarray, a: Action) -> None:
    _, peer, nbytes, tag = a  # type: ignore[misc]
    comm.Recv([buf[: int(nbytes)], MPI.BYTE], source=int(peer), tag=int(tag))


def result(
    args: argparse.Namespace,
    plan: ExecutionPlan,
    measured: dict[int, list[float]],
    cost: float,
    rate: float,
    source: str,
) -> dict[str, Any]:
    """The one-line JSON: the prediction (``Prediction.to_dict()``), what the replay cost and
    the busy-work rate it used."""
    prediction = predict(plan, measured)
    return {
        "traces": [str(t) for t in args.traces],
        "format": args.format,
        **prediction.to_dict(),
        "cost_s": cost,
        "replays": len(schedule(plan)),
        "rate": {"value": rate, "source": source, "kernel": KERNEL},
    }


if __name__ == "__main__":
    raise SystemExit(main())
