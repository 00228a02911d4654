"""The MPI run: one rank per host, strips in chain order, halos by Sendrecv, real migrations.

Every rank runs :func:`run`; rank 0 also holds the :class:`~ppe.apps.sor.planner.Planner` and
decides, at iteration boundaries, when to check the pace (broadcast, so every rank takes part
in the check and in any migration that follows).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter, thread_time
from typing import Any

import numpy as np
from mpi4py import MPI

from ppe.apps.guard import Watchdog, watch_signals
from ppe.apps.signature import StepTimes, step_times
from ppe.apps.sor.numerics import (
    COLOURS,
    Grid,
    Problem,
    checksum,
    half_sweep,
    initial_strip,
    residual_norm,
    residual_sq,
    solve_reference,
)
from ppe.apps.sor.partition import assemble, firsts, transfers
from ppe.apps.sor.planner import Plan, Planner, Replan, behind
from ppe.apps.trace import Tracer, now

TAG_UP, TAG_DOWN, TAG_MOVE = 11, 12, 13
TAGS = (TAG_UP, TAG_DOWN)


@dataclass(frozen=True)
class Options:
    problem: Problem
    iterations: int
    tolerance: float | None = None
    residual_every: int = 10
    check_s: float = 5.0
    replan: bool = True
    slack: float = 0.1
    stall_timeout_s: float = 120.0
    verify_max: int = 512
    trace: str | None = None
    rows: int | None = None  # signature runs only: every rank holds this many rows (a probe)


@dataclass
class RankStats:
    """One rank's account of the run (gathered by rank 0 for the report)."""

    rank: int
    host: str
    core: int | None
    iter_s: list[float] = field(default_factory=list)
    compute_s: float = 0.0
    #: the CPU time the rank's thread got inside its compute bursts: with the wall-clock
    #: ``compute_s``, the share of the core it really had (calibration reads it)
    cpu_s: float = 0.0
    comm_s: float = 0.0
    segments: list[dict[str, Any]] = field(default_factory=list)
    #: per neighbour rank: each halo receive's seconds (``ppe.apps.sor.halo`` summarises
    #: them for the report) and the bytes of one edge row
    halo_s: dict[int, list[float]] = field(default_factory=dict)
    halo_bytes: dict[int, int] = field(default_factory=dict)


@dataclass
class Progress:
    """What rank 0 knows so far: enough to report a run that stops half-way."""

    plan: Plan | None = None
    first_schedule: int | None = None
    split: list[int] = field(default_factory=list)
    initial_split: list[int] = field(default_factory=list)
    done: int = 0
    started: float | None = None
    replans: list[dict[str, Any]] = field(default_factory=list)
    migrations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    """A finished run as rank 0 sees it."""

    progress: Progress
    total_s: float
    residual: float
    checksum: str | None
    checksum_ok: bool | None
    ranks: list[RankStats]


class RunFailed(RuntimeError):
    """The run cannot go on (a schedule that does not fit, an unreachable server...)."""


class Rank:
    """One rank's strip and its neighbours."""

    def __init__(self, comm: MPI.Comm, opts: Options, tracer: Tracer, stats: RankStats) -> None:
        self.comm, self.opts, self.tracer, self.stats = comm, opts, tracer, stats
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.up = self.rank - 1 if self.rank > 0 else MPI.PROC_NULL
        self.down = self.rank + 1 if self.rank < self.size - 1 else MPI.PROC_NULL
        self.first = 0
        self.u: Grid = np.zeros((0, 0))
        self.watchdog: Watchdog | None = None

    def tick(self) -> None:
        if self.watchdog is not None:
            self.watchdog.tick()

    # -------------------------------------------------------------- communication

    def exchange(self) -> float:
        """Edge rows to the chain neighbours, their edge rows into the halos; each receive's
        time is kept per neighbour (``RankStats.halo_s``)."""
        u, t0, c0 = self.u, now(), perf_counter()
        self.comm.Sendrecv(u[1], self.up, TAG_UP, u[-1], self.down, TAG_UP)
        t1, c1 = now(), perf_counter()
        self.comm.Sendrecv(u[-2], self.down, TAG_DOWN, u[0], self.up, TAG_DOWN)
        t2, c2 = now(), perf_counter()
        # Durations from the monotonic clock: time.time()'s float steps are ~0.24 us today,
        # a tenth of a small halo's transfer.
        row = u.shape[1] * u.itemsize
        for src, seconds in ((self.down, c1 - c0), (self.up, c2 - c1)):
            if src != MPI.PROC_NULL:
                self.stats.halo_s.setdefault(src, []).append(seconds)
                self.stats.halo_bytes[src] = row
        self.tracer.halo_swap((t0, t1, t2), self.up, self.down, row, TAGS, MPI.PROC_NULL)
        self.tick()
        return t2 - t0

    def collective(self, call: Callable[[], Any]) -> Any:
        t0 = now()
        out = call()
        self.tracer.event("collective", t0, now())
        self.tick()
        return out

    # -------------------------------------------------------------- the strip

    def place(self, split: list[int]) -> None:
        self.first = firsts(split)[self.rank]
        self.u = initial_strip(self.opts.problem, self.first, split[self.rank])
        self.exchange()

    def iterate(self) -> None:
        t_start = now()
        for colour in COLOURS:
            self.half(colour)
        self.stats.iter_s.append(now() - t_start)

    def half(self, colour: int) -> float:
        """One half-sweep (a compute burst) and its halo exchange; returns the burst's seconds."""
        t0, c0 = now(), thread_time()
        half_sweep(self.u, self.first, colour, self.opts.problem)
        t1, c1 = now(), thread_time()
        self.tracer.event("compute", t0, t1)
        self.stats.compute_s += t1 - t0
        self.stats.cpu_s += c1 - c0
        self.stats.comm_s += self.exchange()
        return t1 - t0

    def residual(self) -> float:
        total = self.collective(
            lambda: self.comm.allreduce(residual_sq(self.u, self.opts.problem), op=MPI.SUM)
        )
        return residual_norm(total, self.opts.problem)

    def migrate(self, old: list[int], new: list[int]) -> int:
        """Move rows so that this rank holds its strip of ``new``; returns the rows it sent."""
        moves = transfers(old, new)
        old_first, n = self.first, self.opts.problem.n
        sends = []
        for t in moves:
            if t.src == self.rank:
                lo = 1 + t.start - old_first
                block = np.ascontiguousarray(self.u[lo : lo + t.count])
                t0 = now()
                sends.append((self.comm.Isend(block, t.dst, TAG_MOVE), block))
                self.tracer.event("send", t0, now(), t.dst, block.nbytes, TAG_MOVE)
        pieces: list[tuple[int, Grid]] = [(old_first, self.u[1:-1])]
        for t in moves:
            if t.dst == self.rank:
                block = np.empty((t.count, n + 2))
                t0 = now()
                self.comm.Recv(block, t.src, TAG_MOVE)
                self.tracer.event("recv", t0, now(), t.src, block.nbytes, TAG_MOVE)
                pieces.append((t.start, block))
        MPI.Request.Waitall([req for req, _ in sends])
        self.first = firsts(new)[self.rank]
        base = initial_strip(self.opts.problem, self.first, new[self.rank])
        self.u = assemble(base, self.first, pieces)
        self.exchange()
        return sum(t.count for t in moves if t.src == self.rank)

    def open_segment(self, iteration: int) -> None:
        self.stats.segments.append(
            {
                "from": iteration,
                "rows": int(self.u.shape[0] - 2),
                "first": self.first,
                "start": now(),
                "compute_s": self.stats.compute_s,
                "cpu_s": self.stats.cpu_s,
                "comm_s": self.stats.comm_s,
            }
        )

    def close_segment(self, iteration: int) -> None:
        seg = self.stats.segments[-1]
        seg.update(
            to=iteration,
            end=now(),
            compute_s=self.stats.compute_s - seg["compute_s"],
            cpu_s=self.stats.cpu_s - seg["cpu_s"],
            comm_s=self.stats.comm_s - seg["comm_s"],
        )


def run(
    comm: MPI.Comm,
    opts: Options,
    stats: RankStats,
    progress: Progress,
    planner: Planner | None = None,
    on_failure: Callable[[str], None] | None = None,
    steps: Sequence[int] | None = None,
) -> Outcome | StepTimes | None:
    """Run the solver on every rank; rank 0 (which alone has ``planner`` and ``on_failure``)
    gets the :class:`Outcome`, the others None. ``progress`` is filled as the run goes. A
    stall calls ``on_failure`` on rank 0 and then aborts the whole job. With ``steps``, run
    only those half-sweeps (a PAS2P signature, docs/pas2p.md) and get :class:`StepTimes`."""
    rank = comm.Get_rank()
    with Tracer(opts.trace, rank) as tracer:
        me = Rank(comm, opts, tracer, stats)

        def stalled(idle: float) -> None:
            message = f"rank {rank}: no progress for {idle:.0f} s (a peer died or hangs); aborting"
            print(f"ppe-sor: {message}", file=sys.stderr, flush=True)
            if on_failure is not None:
                on_failure(message)
            comm.Abort(3)

        def stopped(name: str) -> None:
            message = f"rank {rank}: stopped by {name} (a rank died or the job was cancelled)"
            print(f"ppe-sor: {message}", file=sys.stderr, flush=True)
            if on_failure is not None:
                on_failure(message)

        watch_signals(stopped)
        # Rank 0 reports a stall before anyone aborts the job: the others wait twice as long.
        timeout = opts.stall_timeout_s * (1 if rank == 0 else 2)
        me.watchdog = Watchdog(timeout, stalled)
        try:
            if steps is not None:
                return _run_steps(me, opts, planner, steps)
            return _run(me, opts, planner, progress)
        finally:
            me.watchdog.stop()


def _first_plan(me: Rank, planner: Planner | None) -> Plan:
    """Rank 0 plans; everyone gets the plan or rank 0's error."""
    answer: Plan | str | None = None
    if planner is not None:
        try:
            answer = planner.initial()
        except Exception as exc:  # noqa: BLE001 - every rank must hear about it
            answer = f"no schedule from the service: {exc or type(exc).__name__}"
    answer = me.collective(lambda: me.comm.bcast(answer, root=0))
    if isinstance(answer, str):
        raise RunFailed(answer)
    assert answer is not None
    return answer


def _run(me: Rank, opts: Options, planner: Planner | None, progress: Progress) -> Outcome | None:
    comm, rank = me.comm, me.rank
    plan = _first_plan(me, planner)
    progress.plan, progress.first_schedule = plan, plan.schedule_id
    progress.split, progress.initial_split = list(plan.split), list(plan.split)
    me.place(plan.split)
    checking = opts.replan and plan.predicted_s is not None
    me.collective(comm.Barrier)
    started = progress.started = now()
    plan_t0 = last_check = started
    me.open_segment(0)
    done = 0
    while done < opts.iterations:
        me.iterate()
        done = progress.done = done + 1
        if opts.tolerance is not None and done % opts.residual_every == 0:
            if me.residual() < opts.tolerance:
                break
        if not checking or done >= opts.iterations:
            continue
        check = rank == 0 and now() - last_check >= opts.check_s
        if not me.collective(partial(comm.bcast, check, root=0)):
            continue
        decision: Replan | None = None
        if rank == 0:
            assert planner is not None and progress.plan is not None
            last_check = now()
            if behind(progress.plan, done, last_check - plan_t0, opts.slack):
                t0 = now()
                decision = planner.replan(progress.plan, progress.split, done)
                decision.record.update(elapsed_s=t0 - started, ask_s=now() - t0)
                progress.replans.append(decision.record)
                if "refused" in decision.record:
                    print(
                        f"ppe-sor: re-plan refused ({decision.record['refused']}); "
                        "carrying on with the current strips",
                        file=sys.stderr,
                        flush=True,
                    )
        proposal = None if decision is None else decision.plan.split
        new = me.collective(partial(comm.bcast, proposal, root=0))
        if decision is not None and decision.plan is not progress.plan:
            progress.plan = decision.plan  # a new plan or the verdict to keep: a new pace
            plan_t0 = now()
        if new is None or new == progress.split:
            continue
        me.close_segment(done)
        t0 = now()
        sent = me.migrate(progress.split, new)
        moved = me.collective(partial(comm.allreduce, sent, op=MPI.SUM))
        if rank == 0:
            progress.migrations.append(
                {
                    "iteration": done,
                    "rows_before": list(progress.split),
                    "rows_after": list(new),
                    "rows_moved": moved,
                    "seconds": now() - t0,
                }
            )
            print(f"ppe-sor: migrated {progress.split} -> {new} at iteration {done}", flush=True)
        progress.split = list(new)
        plan_t0 = now()
        me.open_segment(done)
    me.close_segment(done)
    me.collective(comm.Barrier)
    total = now() - started
    residual = me.residual()
    ranks = me.collective(lambda: comm.gather(me.stats, root=0))
    if me.watchdog is not None:
        me.watchdog.stop()
    digest, ok = _verify(me, opts, done)
    if rank != 0:
        return None
    return Outcome(progress, total, residual, digest, ok, ranks)


def _run_steps(
    me: Rank, opts: Options, planner: Planner | None, steps: Sequence[int]
) -> StepTimes | None:
    """The set-up as in a full run, then each half-sweep ``k`` of ``steps`` (0-based: colour
    ``k % 2`` of iteration ``k // 2 + 1``) with what the full run does right after it: the
    residual check where it falls, the closing collectives after the last one. The data do not
    matter to the time, so any half-sweep can run in any order, as often as asked."""
    comm = me.comm
    last = 2 * opts.iterations - 1
    if any(not 0 <= k <= last for k in steps):
        raise RunFailed(f"the signature's steps must be half-sweeps 0..{last} (--iterations)")
    if opts.rows is not None and opts.rows * me.size > opts.problem.n:
        raise RunFailed(f"--rows {opts.rows} x {me.size} ranks is more than the {opts.problem.n}")
    started = now()
    plan = _first_plan(me, planner)
    split = list(plan.split) if opts.rows is None else [opts.rows] * me.size
    me.place(split)
    me.collective(comm.Barrier)
    marks: list[float] = []
    compute: list[float] = []
    for k in steps:
        marks.append(now())
        compute.append(me.half(COLOURS[k % 2]))
        done = k // 2 + 1
        if k % 2 == 1 and opts.tolerance is not None and done % opts.residual_every == 0:
            me.residual()
        if k == last:
            me.collective(comm.Barrier)
            me.residual()
            me.collective(lambda: comm.gather(me.stats, root=0))
    marks.append(now())
    return step_times(comm, me.collective, started, marks, compute, split)


def _verify(me: Rank, opts: Options, done: int) -> tuple[str | None, bool | None]:
    """On grids up to ``verify_max``: gather the result, rerun it in one process, compare bits."""
    if opts.problem.n > opts.verify_max:
        return None, None
    parts = me.comm.gather(me.u[1:-1], root=0)
    if me.rank != 0:
        return None, None
    assert parts is not None
    reference = solve_reference(opts.problem, done).grid
    grid = reference.copy()
    grid[1:-1] = np.concatenate(parts)
    return checksum(grid), bool(np.array_equal(grid, reference))
