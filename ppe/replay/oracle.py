"""The oracle: the schedule one would pick knowing each host's future availability.

Replay reports every strategy's actual makespan relative to it. No closed form exists
(iterations synchronise, availability changes mid-run), so the oracle searches, always
judging candidates by the simulator on the *actual* trace:

1. balance with each host's true mean availability over the run, re-measured over the
   simulated run length (a few fixed-point rounds);
2. balance with the availability each host *effectively delivered* in the last
   simulation (compute work / compute wall time), which folds in when it was slow;
3. the best of those, and of any extra candidates given (the strategies' own
   schedules), is the oracle — so a strategy can tie the oracle but never beat it.

Everything is batched over runs: one simulator call per round for all cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ppe.replay.simulate import RateBank, RunSpec, SimConfig, app_phases, simulate
from scheduler import LinearHost, balance


@dataclass(frozen=True)
class OracleResult:
    """Per run: the best rows found and their simulated makespan, and which round won."""

    rows: list[list[int]]
    makespan: np.ndarray
    source: list[str]


def _balanced(
    per_row: np.ndarray, fixed: np.ndarray, total: int, names: Sequence[str]
) -> list[int]:
    hosts = [
        LinearHost(str(nm), float(a), float(b))
        for nm, a, b in zip(names, per_row, fixed, strict=True)
    ]
    alloc = balance(hosts, total)
    return [alloc.rows[str(nm)] for nm in names]


def _comm_time(config: SimConfig, hosts: int) -> np.ndarray:
    """Whole-run communication time of each chain position (constant-bandwidth estimate)."""
    nmsg = np.full(hosts, 2.0)
    nmsg[[0, -1]] = 1.0
    if hosts == 1:
        nmsg[:] = 0.0
    per_msg = config.latency + config.message_bytes() / config.bandwidth
    return config.iterations * len(app_phases(config.app)) * nmsg * per_msg


def oracle(
    bank: RateBank,
    runs: Sequence[RunSpec],
    config: SimConfig,
    total_rows: int,
    net_bank: RateBank | None = None,
    candidates: Sequence[Sequence[Sequence[int]]] = (),
    rounds: int = 3,
) -> OracleResult:
    """Best schedule per run knowing the future; ``runs`` give hosts, benchmarks, starts.

    ``candidates[j][r]`` is an extra allocation for run ``r`` (e.g. strategy ``j``'s).
    """
    R = len(runs)
    best_ms = np.full(R, np.inf)
    best_rows: list[list[int]] = [list(r.rows) for r in runs]
    source = ["none"] * R

    def consider(rows: list[list[int]], label: str) -> np.ndarray:
        specs = [
            RunSpec(r.hosts, rw, r.benchmark, r.start, r.net) for r, rw in zip(runs, rows, strict=True)
        ]
        res = simulate(bank, specs, config, net_bank)
        better = res.makespan < best_ms
        for i in np.flatnonzero(better):
            best_ms[i] = res.makespan[i]
            best_rows[i] = list(rows[i])
            source[i] = label
        return res

    names = [[f"h{p}" for p in range(len(r.hosts))] for r in runs]
    work_row = [config.iterations * config.n * np.asarray(r.benchmark, float) for r in runs]
    fixed = [_comm_time(config, len(r.hosts)) for r in runs]
    # round 0: idle hosts; horizon = that run's simulated length
    rows = [_balanced(w, f, total_rows, nm) for w, f, nm in zip(work_row, fixed, names, strict=True)]
    res = consider(rows, "dedicated")
    span = res.makespan.copy()
    for rnd in range(rounds):
        rows = []
        for i, r in enumerate(runs):
            idx = np.asarray(r.hosts, dtype=np.int64)
            avail = bank.mean_rate(idx, np.full(idx.size, r.start), np.full(idx.size, r.start + span[i]))
            rows.append(_balanced(work_row[i] / avail, fixed[i], total_rows, names[i]))
        res = consider(rows, f"mean-availability-{rnd}")
        span = res.makespan.copy()
    for rnd in range(rounds):
        rows = []
        for i, _ in enumerate(runs):
            used = res.dedicated[i] > 0
            eff = np.ones(len(runs[i].hosts))
            k = len(runs[i].hosts)
            busy, ded = res.busy[i, :k], res.dedicated[i, :k] * config.iterations
            ok = used[:k] & (busy > 0)
            eff[ok] = ded[ok] / busy[ok]
            if (~ok).any():  # hosts left idle: judge them by their mean availability
                idx = np.asarray(runs[i].hosts, dtype=np.int64)[~ok]
                eff[~ok] = bank.mean_rate(idx, np.full(idx.size, runs[i].start),
                                          np.full(idx.size, runs[i].start + span[i]))
            rows.append(_balanced(work_row[i] / eff, fixed[i], total_rows, names[i]))
        res = consider(rows, f"effective-{rnd}")
    for j, cand in enumerate(candidates):
        consider([list(c) for c in cand], f"candidate-{j}")
    return OracleResult(rows=best_rows, makespan=best_ms, source=source)
