"""Replay cases: hosts prepared from traces, the start times and host sets drawn from them,
what a plan records, and the run specs the simulator executes.

The bottom of ``ppe.replay``: plain types and deterministic preparation, no planning.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppe.replay.config import ReplayConfig
from ppe.replay.simulate import RateBank, RunSpec
from ppe.traces import AVAILABILITY_FLOOR, Trace

# --------------------------------------------------------------------------- hosts


@dataclass(frozen=True)
class HostData:
    """One trace prepared for replay: what the pipeline may see, what the simulator runs on,
    and what decides whether the host can be offered at a start."""

    name: str
    benchmark: float  # dedicated seconds per element update
    #: live samples only, what the host's sensor would have sent (a dead VM sends nothing)
    history_times: np.ndarray
    history_availability: np.ndarray
    #: every sample's time; ``sim_availability`` and ``bandwidth`` are given at these
    times: np.ndarray
    #: availability the simulator runs on: dead samples at the floor (a switched-off host
    #: computes nothing)
    sim_availability: np.ndarray
    dead_times: np.ndarray  # times of the dead samples
    #: link bandwidth left by the host's own recorded traffic, bytes/s (``--bandwidth-from-trace``)
    bandwidth: np.ndarray | None = None


def host_benchmark(name: str, config: ReplayConfig) -> float:
    """Dedicated seconds per element for a host, fixed by (seed, file name)."""
    rng = np.random.default_rng([config.seed, zlib.crc32(name.encode())])
    return float(config.benchmark * math.exp(config.benchmark_spread * rng.standard_normal()))


def link_bandwidth(trace: Trace, capacity: float) -> np.ndarray | None:
    """Bandwidth left on a host's link by its recorded traffic (KB/s in GWA-T-12)."""
    if trace.net_rx_kbs is None or trace.net_tx_kbs is None:
        return None
    used = (trace.net_rx_kbs + trace.net_tx_kbs) * 1024.0
    return np.clip(capacity - used, 0.05 * capacity, capacity)


def prepare_hosts(traces: Sequence[Trace], config: ReplayConfig) -> list[HostData]:
    """Per-trace arrays the experiment needs; names must be unique."""
    seen: set[str] = set()
    out = []
    for tr in traces:
        if tr.name in seen:
            raise ValueError(f"two traces are both named {tr.name!r}; host names must be unique")
        seen.add(tr.name)
        live = ~tr.dead
        bw = link_bandwidth(tr, config.sim.bandwidth) if config.bandwidth_from_trace else None
        if config.bandwidth_from_trace and bw is None:
            raise ValueError(f"trace {tr.name!r} has no network columns for --bandwidth-from-trace")
        out.append(
            HostData(
                name=tr.name,
                benchmark=host_benchmark(tr.name, config),
                history_times=tr.timestamps[live],
                history_availability=tr.availability[live],
                sim_availability=np.where(tr.dead, AVAILABILITY_FLOOR, tr.availability),
                times=tr.timestamps,
                dead_times=tr.timestamps[tr.dead],
                bandwidth=bw,
            )
        )
    return out


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One experiment: a start time and a chain of hosts (indices into the host list)."""

    index: int
    start: float
    hosts: tuple[int, ...]
    seed: int


def eligible(host: HostData, start: float, config: ReplayConfig) -> bool:
    """May this host be used for a run starting at ``start``? (README: which hosts a run may use)"""
    i = int(np.searchsorted(host.history_times, start, side="left"))
    if i == 0 or host.history_times[i - 1] < start - config.max_gap_s:
        return False
    if host.history_times[i - 1] - host.history_times[0] < config.min_history_s:
        return False
    j = int(np.searchsorted(host.times, start, side="left"))
    if j == 0 or j >= host.times.size:
        return False
    if host.times[-1] < start + config.window_s:
        return False
    k = int(np.searchsorted(host.times, start + config.window_s, side="right"))
    window = host.times[j - 1 : k + 1]
    if np.diff(window).max(initial=0.0) > config.max_gap_s:
        return False
    d0 = int(np.searchsorted(host.dead_times, start, side="left"))
    return not (d0 < host.dead_times.size and host.dead_times[d0] <= start + config.window_s)


def draw_cases(hosts: Sequence[HostData], config: ReplayConfig) -> list[Case]:
    """Start times uniform over the traces, host sets uniform among eligible hosts."""
    if len(hosts) < config.hosts:
        raise ValueError(f"{config.hosts} hosts per run but only {len(hosts)} traces given")
    rng = np.random.default_rng([config.seed, 1])
    lo = min(float(h.times[0]) for h in hosts) + config.min_history_s
    hi = max(float(h.times[-1]) for h in hosts) - config.window_s
    if hi <= lo:
        raise ValueError("traces are too short for the history and run window asked for")
    cases: list[Case] = []
    attempts = 0
    while len(cases) < config.starts and attempts < 200 * config.starts:
        attempts += 1
        start = float(np.floor(rng.uniform(lo, hi)))
        ok = [i for i, h in enumerate(hosts) if eligible(h, start, config)]
        if len(ok) < config.hosts:
            continue
        chosen = rng.choice(len(ok), size=config.hosts, replace=False)
        chain = tuple(ok[int(c)] for c in chosen)
        cases.append(Case(len(cases), start, chain, int(rng.integers(0, 2**31 - 1))))
    if len(cases) < config.starts:
        raise ValueError(
            f"found only {len(cases)} start times with {config.hosts} usable hosts "
            f"(asked for {config.starts}); relax --window/--max-gap or use fewer hosts"
        )
    return cases


@dataclass
class StrategyOutcome:
    """What one strategy planned for one case (or why it could not)."""

    rows: list[int]
    mean: float = math.nan
    std: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    horizon_s: float | None = None
    rounds: int = 0
    error: str | None = None
    #: re-planning runs only: each time the run asked again (``ppe.replay.adaptive``)
    replans: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class CasePlan:
    """All strategies' plans for one case, plus the modes the forecaster saw."""

    index: int
    multimode: dict[str, bool] = field(default_factory=dict)
    outcomes: dict[str, StrategyOutcome] = field(default_factory=dict)
    seconds: float = 0.0


# --------------------------------------------------------------------------- runs


def make_banks(hosts: Sequence[HostData]) -> tuple[RateBank, RateBank | None]:
    """The simulator's CPU bank, and a bandwidth bank when links come from the traces."""
    bank = RateBank([(h.times, h.sim_availability) for h in hosts])
    links = [(h.times, h.bandwidth) for h in hosts if h.bandwidth is not None]
    return bank, (RateBank(links) if len(links) == len(hosts) else None)


def run_specs(
    cases: Sequence[Case], hosts: Sequence[HostData], rows: Sequence[Sequence[int]], with_net: bool
) -> list[RunSpec]:
    return [
        RunSpec(
            hosts=list(c.hosts),
            rows=list(r),
            benchmark=[hosts[i].benchmark for i in c.hosts],
            start=c.start,
            net=list(c.hosts) if with_net else None,
        )
        for c, r in zip(cases, rows, strict=True)
    ]


def rows_or_block(outcome: StrategyOutcome, case: Case, config: ReplayConfig) -> list[int]:
    """A failed plan is scored as equal strips (the user would have had to run something)."""
    if outcome.error is None:
        return outcome.rows
    k = len(case.hosts)
    base, extra = divmod(config.sim.n, k)
    return [base + (1 if i < extra else 0) for i in range(k)]
