"""Trace-driven execution of SOR / Jacobi2D strip schedules.

This gives the *actual* time a schedule would have taken, against which replay judges
predictions. A host's work progresses at the rate its recorded availability allows,
taken as piecewise constant from each sample to the next (the last value holds past
the end of the trace, the first before its start). Iterations synchronise: per
iteration every host runs its phases (SOR: red compute, communicate, black compute,
communicate; Jacobi2D: compute, communicate) from the common iteration start, and the
iteration ends when the slowest host is done — docs/architecture.md's
``IterTime(t) = max_p {RComp(p,t) + RComm(p,t+Δ1) + BComp(p,t+Δ2) + BComm(p,t+Δ3)}``.

Cost. Work is integrated through the cumulative integral ``C(t) = ∫ rate``: finishing
``w`` units of work started at ``t`` ends at ``C⁻¹(C(t) + w)``, two ``np.interp``
calls (binary searches). All hosts of all runs live in one :class:`RateBank` (their
integrals laid end to end on one monotone axis), so one call advances every host of
every run at once; the Python loop is over iterations only. On top, runs *fast-forward*:
while every host of a run stays inside one constant-rate segment, iterations have
identical length and are skipped in one step, so the loop count is about the number of
sample boundaries a run crosses, not its iteration count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ppe.pipeline import DEFAULT_LINK

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Compute share of each phase of one iteration: SOR updates its red half, then its black
#: half (each followed by a halo exchange); Jacobi2D updates everything once.
APP_PHASES: dict[str, tuple[float, ...]] = {"sor": (0.5, 0.5), "jacobi2d": (1.0,)}

#: How far (seconds) a trace's first and last values are extended so runs that start
#: close to its edges, or outlast it, still have a rate.
EDGE_PAD_S = 60 * 86400.0


def app_phases(app: str) -> tuple[float, ...]:
    """Phase compute shares of a built-in application; clear error for unknown names."""
    try:
        return APP_PHASES[app.lower()]
    except KeyError:
        raise ValueError(f"unknown app {app!r}; expected one of {sorted(APP_PHASES)}") from None


class RateBank:
    """Cumulative integrals of many piecewise-constant rate series on one monotone axis.

    Series ``k`` with samples ``(t_i, r_i)`` has rate ``r_i`` on ``[t_i, t_{i+1})``. It is
    stored shifted by ``k * span`` in time and ``k * span * max_rate`` in cumulative
    value so a single ``np.interp`` serves queries on any mixture of series.
    Rates must be positive (availability is clipped to at least 0.01 by the readers).
    """

    def __init__(self, series: Sequence[tuple[ArrayLike, ArrayLike]]) -> None:
        if not series:
            raise ValueError("RateBank needs at least one series")
        cleaned = [_clean_series(t, r) for t, r in series]
        self.origin = min(float(t[0]) for t, _ in cleaned) - EDGE_PAD_S
        last = max(float(t[-1]) for t, _ in cleaned) + EDGE_PAD_S
        self.span = (last - self.origin) + 1.0
        max_rate = max(float(r.max()) for _, r in cleaned)
        self.cum_span = self.span * max_rate * 1.0001 + 1.0
        xs, gs, rates, starts = [], [], [], []
        offset = 0
        for k, (t, r) in enumerate(cleaned):
            x = np.concatenate(([self.origin], t, [last])) - self.origin
            rr = np.concatenate(([r[0]], r))  # rate on [x_j, x_{j+1})
            g = np.concatenate(([0.0], np.cumsum(rr * np.diff(x))))
            xs.append(x + k * self.span)
            gs.append(g + k * self.cum_span)
            rates.append(np.concatenate((rr, [rr[-1]])))
            starts.append(offset)
            offset += len(x)
        self.x: FloatArray = np.concatenate(xs)
        self.g: FloatArray = np.concatenate(gs)
        self.rate: FloatArray = np.concatenate(rates)
        self.n_series = len(cleaned)

    # -- coordinate helpers -------------------------------------------------------
    def _x(self, idx: IntArray, t: FloatArray) -> FloatArray:
        return (t - self.origin) + idx * self.span

    def cumulative(self, idx: ArrayLike, t: ArrayLike) -> FloatArray:
        """Cumulative integral (in global units) of series ``idx`` at times ``t``."""
        i = np.asarray(idx, dtype=np.int64)
        return np.interp(self._x(i, np.asarray(t, dtype=float)), self.x, self.g)

    def advance(self, idx: ArrayLike, t: ArrayLike, amount: ArrayLike) -> FloatArray:
        """Time at which ``amount`` units have accrued, starting at ``t`` (vectorised)."""
        i = np.asarray(idx, dtype=np.int64)
        tt = np.asarray(t, dtype=float)
        g_end = self.cumulative(i, tt) + np.asarray(amount, dtype=float)
        x_end = np.interp(g_end, self.g, self.x)
        out = x_end - i * self.span + self.origin
        # amount 0 must leave time unchanged exactly (padding hosts, empty phases)
        return np.where(np.asarray(amount) > 0, np.maximum(out, tt), tt)

    def mean_rate(self, idx: ArrayLike, t0: ArrayLike, t1: ArrayLike) -> FloatArray:
        """Average rate of series ``idx`` over ``[t0, t1]`` (the rate at ``t0`` if empty)."""
        i = np.asarray(idx, dtype=np.int64)
        a, b = np.asarray(t0, dtype=float), np.asarray(t1, dtype=float)
        width = b - a
        g = self.cumulative(i, b) - self.cumulative(i, a)
        now = self.rate_at(i, a)[0]
        return np.where(width > 0, g / np.where(width > 0, width, 1.0), now)

    def rate_at(self, idx: IntArray, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Rate in force at ``t`` and the time its constant segment ends."""
        x = self._x(np.asarray(idx, dtype=np.int64), np.asarray(t, dtype=float))
        j = np.searchsorted(self.x, x, side="right") - 1
        j = np.clip(j, 0, len(self.x) - 2)
        seg_end = self.x[j + 1] - idx * self.span + self.origin
        return self.rate[j], seg_end


def _clean_series(t: ArrayLike, r: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Sorted, de-duplicated, finite, positive — or a clear error."""
    tt = np.asarray(t, dtype=float).ravel()
    rr = np.asarray(r, dtype=float).ravel()
    if tt.size == 0 or tt.size != rr.size:
        raise ValueError("a rate series needs equally many (>0) timestamps and values")
    ok = np.isfinite(tt) & np.isfinite(rr)
    tt, rr = tt[ok], rr[ok]
    if tt.size == 0:
        raise ValueError("a rate series has no finite samples")
    if np.any(rr <= 0):
        raise ValueError("rates must be positive (clip availability / bandwidth first)")
    order = np.argsort(tt, kind="stable")
    tt, rr = tt[order], rr[order]
    keep = np.concatenate(([True], np.diff(tt) > 0))
    return tt[keep], rr[keep]


@dataclass(frozen=True)
class RunSpec:
    """One schedule to execute: bank indices of its hosts in chain order and their rows.

    ``benchmark`` is each host's dedicated seconds per element update. ``net`` gives the
    bank index (in the network bank) of each host's link when bandwidth comes from a
    trace; when None the constant ``bandwidth`` of :func:`simulate` is used.
    """

    hosts: Sequence[int]
    rows: Sequence[int]
    benchmark: Sequence[float]
    start: float
    net: Sequence[int] | None = None
    #: iterations left to run (``SimConfig.iterations`` when None): a run resumed mid-way
    iterations: int | None = None
    #: elements each host updates per iteration (``rows · n`` when None): a 2-D or 3-D block
    elements: Sequence[float] | None = None
    #: seconds of each host's exchanges per communication phase over constant links (when
    #: None: its chain neighbours' halo rows, ``SimConfig``'s link); a block's faces
    comm: Sequence[float] | None = None


@dataclass(frozen=True)
class SimConfig:
    """Application and network constants shared by a batch of runs; links default to
    ``ppe.pipeline.DEFAULT_LINK``, what the service assumes for links without measurements."""

    app: str
    n: int
    iterations: int
    bandwidth: float = DEFAULT_LINK.bandwidth
    latency: float = DEFAULT_LINK.latency
    elt_size: float = 8.0

    def message_bytes(self) -> float:
        """A halo row: ``n · Size(Elt)`` bytes, one per neighbour per phase."""
        return self.n * self.elt_size

    @overload
    def message_seconds(self, bandwidth: None = None) -> float: ...
    @overload
    def message_seconds(self, bandwidth: FloatArray) -> FloatArray: ...
    def message_seconds(self, bandwidth: FloatArray | None = None) -> float | FloatArray:
        """One halo row over a link: latency + bytes / bandwidth (this config's link, or the
        bandwidths given)."""
        return self.latency + self.message_bytes() / (
            self.bandwidth if bandwidth is None else bandwidth
        )


def chain_messages(hosts: int) -> FloatArray:
    """Messages per communication phase of each position of a chain of ``hosts``: one to each
    neighbour (none alone)."""
    out = np.full(hosts, 2.0)
    if hosts == 1:
        out[:] = 0.0
    elif hosts > 1:
        out[[0, -1]] = 1.0
    return out


@dataclass
class SimResult:
    """Actual makespans (seconds) and each host's total compute time, per run.

    ``busy[r, p]`` is the wall time host ``p`` (chain position, unpadded order) of run
    ``r`` spent computing; with ``dedicated[r, p]`` (work per iteration) it gives the
    availability the host effectively delivered. ``critical[r, p]`` is the time during
    which host ``p`` was the slowest of its iteration — where extra rows cost makespan.
    The oracle uses both to re-balance.
    """

    makespan: FloatArray
    busy: FloatArray
    dedicated: FloatArray
    critical: FloatArray | None = None
    steps: int = 0
    per_run_hosts: list[int] = field(default_factory=list)
    #: iterations each run completed (all of them unless ``simulate(until=...)`` stopped it)
    done: IntArray | None = None


def simulate(
    bank: RateBank,
    runs: Sequence[RunSpec],
    config: SimConfig,
    net_bank: RateBank | None = None,
    until: ArrayLike | None = None,
) -> SimResult:
    """Execute every run against the recorded rates; vectorised over runs and hosts.

    ``until`` (a time per run) stops each run at the first iteration boundary at or after
    it, as an application that checks its progress between iterations would; ``done``
    then says how many iterations each run completed and ``makespan`` how long that took.
    """
    phases = app_phases(config.app)
    if not runs:
        empty = np.zeros(0)
        return SimResult(empty, np.zeros((0, 0)), np.zeros((0, 0)), done=np.zeros(0, np.int64))
    layout = _layout(runs, config, net_bank is not None)
    idx, work, nmsg, net_idx = layout.idx, layout.work, layout.nmsg, layout.net_idx
    const_comm, msg = layout.comm, config.message_bytes()
    R = len(runs)
    t = np.array([float(r.start) for r in runs])
    start = t.copy()
    total = np.array(
        [config.iterations if r.iterations is None else r.iterations for r in runs], dtype=np.int64
    )
    if np.any(total < 0):
        raise ValueError("iterations must be non-negative")
    left = total.copy()
    stop = (
        np.full(R, np.inf)
        if until is None
        else np.broadcast_to(np.asarray(until, dtype=float), (R,)).copy()
    )
    if np.isnan(stop).any():
        raise ValueError("until must be a time (or +inf) for every run, not NaN")
    busy = np.zeros_like(work)
    critical = np.zeros_like(work)
    steps = 0
    while True:
        live = np.flatnonzero((left > 0) & (t < stop))
        if live.size == 0:
            break
        steps += 1
        # 1. fast-forward whole iterations that stay inside constant-rate segments
        rate, seg_end = bank.rate_at(idx[live], np.repeat(t[live, None], idx.shape[1], 1))
        w = work[live]
        comp = np.where(w > 0, w / rate, 0.0)
        seg_end = np.where(w > 0, seg_end, np.inf)  # empty slots never limit a jump
        if net_bank is None:
            comm = const_comm[live]
        else:
            bw, nseg = net_bank.rate_at(net_idx[live], np.repeat(t[live, None], idx.shape[1], 1))
            comm = nmsg[live] * config.message_seconds(bw)
            seg_end = np.minimum(seg_end, np.where(nmsg[live] > 0, nseg, np.inf))
        horizon = seg_end.min(axis=1)
        host_iter = comp + len(phases) * comm
        per_iter = host_iter.max(axis=1)
        room = horizon - t[live]
        m = np.floor(np.where(per_iter > 0, room / np.where(per_iter > 0, per_iter, 1.0), 0.0))
        m = np.clip(m, 0, left[live])
        past = stop[live] - t[live]  # iterations that reach the stop time, rounded up
        m = np.minimum(m, np.ceil(past / np.where(per_iter > 0, per_iter, 1.0))).astype(np.int64)
        t[live] += m * per_iter
        left[live] -= m
        busy[live] += m[:, None] * comp
        critical[live, host_iter.argmax(axis=1)] += m * per_iter
        # 2. one exact iteration for runs that still have work
        live = live[(left[live] > 0) & (t[live] < stop[live])]
        if live.size == 0:
            continue
        before = t[live]
        t[live], spent, slowest = _exact_iteration(
            bank,
            net_bank,
            t[live],
            idx[live],
            work[live],
            nmsg[live],
            net_idx[live],
            const_comm[live],
            phases,
            config,
            msg,
        )
        busy[live] += spent
        critical[live, slowest] += t[live] - before
        left[live] -= 1
    return SimResult(
        makespan=t - start,
        busy=busy,
        dedicated=work * 1.0,
        critical=critical,
        steps=steps,
        per_run_hosts=[len(r.hosts) for r in runs],
        done=total - left,
    )


@dataclass(frozen=True)
class _Layout:
    idx: IntArray  # (R, P) bank index per host slot
    work: FloatArray  # (R, P) dedicated seconds of compute per iteration
    nmsg: FloatArray  # (R, P) messages per communication phase
    net_idx: IntArray  # (R, P) network bank index (0 when constant bandwidth)
    comm: FloatArray  # (R, P) seconds per communication phase over constant links


def _layout(runs: Sequence[RunSpec], config: SimConfig, with_net: bool) -> _Layout:
    """Pad runs to a common width; hosts without work (no rows, or no elements) are dropped
    from the chain and pay no exchanges."""
    width = max(1, max(len(r.hosts) for r in runs))
    R = len(runs)
    idx = np.zeros((R, width), dtype=np.int64)
    net_idx = np.zeros((R, width), dtype=np.int64)
    work = np.zeros((R, width))
    nmsg = np.zeros((R, width))
    comm = np.zeros((R, width))
    per_msg = config.message_seconds()
    for i, run in enumerate(runs):
        p = len(run.hosts)
        if not (p == len(run.rows) == len(run.benchmark)):
            raise ValueError("hosts, rows and benchmark must have one entry per host")
        if with_net and (run.net is None or len(run.net) != p):
            raise ValueError("a network bank needs RunSpec.net for every host")
        rows = np.asarray(run.rows, dtype=float)
        if np.any(rows < 0):
            raise ValueError("rows must be non-negative")
        elements = rows * config.n if run.elements is None else _per_host(run.elements, p)
        idx[i, :p] = run.hosts
        if run.net is not None:
            net_idx[i, :p] = run.net
        if run.comm is not None:
            if with_net:
                raise ValueError("RunSpec.comm is for constant links, not a network bank")
            comm[i, :p] = np.where(elements > 0, _per_host(run.comm, p), 0.0)
        work[i, :p] = elements * np.asarray(run.benchmark, dtype=float)
        active = np.flatnonzero(elements > 0)
        nmsg[i, active] = chain_messages(active.size)
        if run.comm is None:  # the chain's halo rows over SimConfig's link
            comm[i] = nmsg[i] * per_msg
    return _Layout(idx, work, nmsg, net_idx, comm)


def _per_host(values: Sequence[float], p: int) -> FloatArray:
    out = np.asarray(values, dtype=float)
    if out.shape != (p,) or not np.all(np.isfinite(out)) or np.any(out < 0):
        raise ValueError("elements and comm need one finite, non-negative entry per host")
    return out


def _exact_iteration(
    bank: RateBank,
    net_bank: RateBank | None,
    t: FloatArray,
    idx: IntArray,
    work: FloatArray,
    nmsg: FloatArray,
    net_idx: IntArray,
    const_comm: FloatArray,
    phases: tuple[float, ...],
    config: SimConfig,
    msg: float,
) -> tuple[FloatArray, FloatArray, IntArray]:
    """One synchronised iteration integrated exactly: end times, compute time per host,
    and which host was slowest."""
    tt = np.repeat(t[:, None], idx.shape[1], axis=1)
    spent = np.zeros_like(work)
    for share in phases:
        t0 = tt
        tt = bank.advance(idx, tt, work * share)
        spent += tt - t0
        tt = _communicate(net_bank, tt, nmsg, net_idx, const_comm, config, msg)
    return tt.max(axis=1), spent, tt.argmax(axis=1)


def _communicate(
    net_bank: RateBank | None,
    tt: FloatArray,
    nmsg: FloatArray,
    net_idx: IntArray,
    const_comm: FloatArray,
    config: SimConfig,
    msg: float,
) -> FloatArray:
    """Halo exchange: per message, latency then the bytes at the link's bandwidth (over
    constant links, ``const_comm``: each host's seconds per phase)."""
    if net_bank is None:
        return tt + const_comm
    for k in range(2):
        sending = nmsg > k
        after = net_bank.advance(net_idx, tt + config.latency, np.where(sending, msg, 0.0))
        tt = np.where(sending, after, tt)
    return tt
