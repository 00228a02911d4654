"""The MPI run: block strips of rows, one rank each, the steps of ``ppe.apps.cg.steps``.

Every step is one compute burst followed by its messages, so the trace (``--trace``) cuts into
PAS2P phases along the steps; the allreduce that ends a step puts every rank at the same
logical time, so each phase holds exactly every rank's events of its step.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from ppe.apps.cg.numerics import (
    Problem,
    Strip,
    alpha,
    local_dot,
    matvec,
    new_strip,
    next_beta,
    relative,
    solve_reference,
    true_residual,
    update,
)
from ppe.apps.cg.steps import CHECK, CHECKPOINT, KINDS, MATVEC, UPDATE, Schedule, Step
from ppe.apps.guard import Watchdog, watch_signals
from ppe.apps.signature import StepTimes, step_times
from ppe.apps.sor.partition import block_split, firsts
from ppe.apps.trace import Tracer, now

__all__ = ["CGRank", "Options", "Outcome", "RunFailed", "run", "write_checkpoint"]

TAG_UP, TAG_DOWN = 21, 22


@dataclass(frozen=True)
class Options:
    problem: Problem
    schedule: Schedule
    tolerance: float | None = None
    checkpoint_dir: Path | None = None  # None: a temporary directory per rank, removed after
    trace: str | None = None
    stall_timeout_s: float = 120.0
    verify_max: int = 256


@dataclass(frozen=True)
class Outcome:
    """A finished run as rank 0 sees it."""

    total_s: float
    iterations: int
    residual: float  # ‖b - Ax‖ / ‖b‖ at the last check
    residual_max: float  # max |b - Ax| there
    history: list[tuple[int, float]]  # (iteration, relative true residual) at every check
    split: list[int]
    compute_s: list[dict[str, float]]  # per rank: seconds of compute per step kind
    checkpoints: int
    reference_error: float | None  # max |x - x_ref| / max |x_ref| (n <= verify_max)


class RunFailed(RuntimeError):
    """The run cannot start (more ranks than rows, a step the run does not have...)."""


class CGRank:
    """One rank's strip, its neighbours and its traced communication."""

    def __init__(self, comm: MPI.Comm, opts: Options, tracer: Tracer, checkpoint_dir: Path) -> None:
        self.comm, self.opts, self.tracer = comm, opts, tracer
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.up = self.rank - 1 if self.rank > 0 else MPI.PROC_NULL
        self.down = self.rank + 1 if self.rank < self.size - 1 else MPI.PROC_NULL
        self.checkpoint_dir = checkpoint_dir
        self.split = block_split(opts.problem.n, self.size)
        first, rows = firsts(self.split)[self.rank], self.split[self.rank]
        self.s: Strip = new_strip(opts.problem, first, rows)
        self.compute_s = dict.fromkeys(KINDS, 0.0)
        self.residual = self.residual_max = float("nan")
        self.checkpoints = 0
        self.watchdog: Watchdog | None = None

    def tick(self) -> None:
        if self.watchdog is not None:
            self.watchdog.tick()

    # -------------------------------------------------------------- communication

    def exchange(self, u: np.ndarray) -> None:
        """Edge rows of ``u`` to the chain neighbours, theirs into ``u``'s halos."""
        t0 = now()
        self.comm.Sendrecv(u[1], self.up, TAG_UP, u[-1], self.down, TAG_UP)
        t1 = now()
        self.comm.Sendrecv(u[-2], self.down, TAG_DOWN, u[0], self.up, TAG_DOWN)
        t2 = now()
        row = u.shape[1] * u.itemsize
        self.tracer.halo_swap(
            (t0, t1, t2), self.up, self.down, row, (TAG_UP, TAG_DOWN), MPI.PROC_NULL
        )
        self.tick()

    def allreduce(self, value: float, op: MPI.Op = MPI.SUM) -> float:
        t0 = now()
        out = float(self.comm.allreduce(value, op=op))
        self.tracer.event("collective", t0, now(), nbytes=8)
        self.tick()
        return out

    def collective(self, call: Callable[[], Any]) -> Any:
        t0 = now()
        out = call()
        self.tracer.event("collective", t0, now())
        self.tick()
        return out

    # -------------------------------------------------------------- the steps

    def setup(self) -> None:
        """``r·r = b·b`` everywhere, ``r``'s halos, and every rank ready (not a step: no burst)."""
        self.s.rr = self.s.bb = self.allreduce(local_dot(self.s.r, self.s.r))
        self.exchange(self.s.r)
        self.collective(self.comm.Barrier)

    def burst(self, kind: str, t0: float) -> float:
        t1 = now()
        self.tracer.event("compute", t0, t1)
        self.compute_s[kind] += t1 - t0
        return t1 - t0

    def step(self, step: Step) -> float:
        """Run one step; returns its compute burst's seconds."""
        s, t0 = self.s, now()
        if step.kind == MATVEC:
            local = matvec(s)
            seconds = self.burst(MATVEC, t0)
            s.pq = self.allreduce(local)
        elif step.kind == UPDATE:
            local = update(s, alpha(s))
            seconds = self.burst(UPDATE, t0)
            self.exchange(s.r)
            next_beta(s, self.allreduce(local))
        elif step.kind == CHECK:
            sq, biggest = true_residual(s)
            seconds = self.burst(CHECK, t0)
            self.residual = relative(self.allreduce(sq), s.bb)
            self.residual_max = self.allreduce(biggest, MPI.MAX)
        elif step.kind == CHECKPOINT:
            write_checkpoint(self.checkpoint_dir, self.rank, s)
            seconds = self.burst(CHECKPOINT, t0)
            self.checkpoints += 1
        else:
            raise ValueError(f"unknown step kind {step.kind!r}")
        return seconds

    def close(self) -> list[dict[str, float]] | None:
        """What a full run does after its last step (in the last step's phase): rank 0 gets
        every rank's compute seconds per step kind."""
        self.collective(self.comm.Barrier)
        return self.collective(lambda: self.comm.gather(self.compute_s, root=0))


def write_checkpoint(directory: Path, rank: int, s: Strip) -> None:
    """This rank's interior rows of ``x`` to ``directory/x.<rank>.npy``, on disk (fsync'd)
    before it replaces the previous checkpoint: the ranks' files in rank order are the grid."""
    path = directory / f"x.{rank}.npy"
    tmp = directory / f"x.{rank}.npy.tmp"
    with open(tmp, "wb") as f:
        np.save(f, s.x[1:-1, 1:-1])
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename too
    finally:
        os.close(fd)


def run(
    comm: MPI.Comm, opts: Options, steps: Sequence[int] | None = None
) -> Outcome | StepTimes | None:
    """Run on every rank; rank 0 gets the :class:`Outcome` (or, with ``steps``, the signature
    run's :class:`StepTimes`), the others None."""
    rank = comm.Get_rank()
    if opts.problem.n < comm.Get_size():
        raise RunFailed(f"--n {opts.problem.n} gives some of the {comm.Get_size()} ranks no row")
    with tempfile.TemporaryDirectory(prefix="ppe-cg-") as tmp, Tracer(opts.trace, rank) as tracer:
        directory = opts.checkpoint_dir or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        me = CGRank(comm, opts, tracer, directory)

        def stalled(idle: float) -> None:
            say(f"rank {rank}: no progress for {idle:.0f} s (a peer died or hangs); aborting")
            comm.Abort(3)

        watch_signals(lambda name: say(f"rank {rank}: stopped by {name}"))
        me.watchdog = Watchdog(opts.stall_timeout_s * (1 if rank == 0 else 2), stalled)
        try:
            if steps is not None:
                return _run_steps(me, steps)
            return _run(me)
        finally:
            me.watchdog.stop()


def say(message: str) -> None:
    print(f"ppe-cg: {message}", file=sys.stderr, flush=True)


def _run(me: CGRank) -> Outcome | None:
    opts = me.opts
    me.setup()
    started = now()
    history: list[tuple[int, float]] = []
    done = 0
    stop_after: int | None = None
    for step in opts.schedule.all():
        if stop_after is not None and step.iteration > stop_after:
            break
        me.step(step)
        done = step.iteration
        if step.kind == CHECK:
            history.append((step.iteration, me.residual))
            # every rank holds the same allreduced residual: they stop together
            if opts.tolerance is not None and me.residual < opts.tolerance:
                stop_after = step.iteration  # its checkpoint, if any, still runs
    compute = me.close()
    total = now() - started
    error = _verify(me, done)
    if me.rank != 0:
        return None
    assert compute is not None
    return Outcome(
        total,
        done,
        me.residual,
        me.residual_max,
        history,
        me.split,
        compute,
        me.checkpoints,
        error,
    )


def _run_steps(me: CGRank, steps: Sequence[int]) -> StepTimes | None:
    """The set-up as in a full run, then each step of ``steps`` (indices into the schedule)
    with its own messages, and after the last step of the run what the run does after it. The
    values do not matter to the time, so any step runs in any order, as often as asked."""
    schedule, comm = me.opts.schedule, me.comm
    last = schedule.count - 1
    if any(not 0 <= k <= last for k in steps):
        raise RunFailed(
            f"the signature's steps must be 0..{last} (the steps of --iterations "
            f"{schedule.iterations}, --check-every, --checkpoint-every)"
        )
    started = now()
    me.setup()
    marks: list[float] = []
    compute: list[float] = []
    for k in steps:
        marks.append(now())
        compute.append(me.step(schedule.at(k)))
        if k == last:
            me.close()
    marks.append(now())
    return step_times(comm, me.collective, started, marks, compute, me.split)


def _verify(me: CGRank, done: int) -> float | None:
    """On grids up to ``verify_max``: the largest difference from the single-process run,
    relative to its largest value (not 0: the dot products add up in another order)."""
    if me.opts.problem.n > me.opts.verify_max:
        return None
    parts = me.comm.gather(me.s.x[1:-1, 1:-1], root=0)
    if me.rank != 0:
        return None
    assert parts is not None
    reference = solve_reference(me.opts.problem, done).x[1:-1, 1:-1]
    scale = float(np.abs(reference).max()) or 1.0
    return float(np.abs(np.concatenate(parts) - reference).max()) / scale
