"""The oracle: the schedule one would pick knowing each host's future availability.

Replay reports every strategy's actual makespan relative to it. No closed form exists
(iterations synchronise, availability changes mid-run), so the oracle searches, always
judging candidates by the simulator on the *actual* trace:

1. balance with each host's true mean availability over the run, re-measured over the
   simulated run length (a few fixed-point rounds);
2. balance with the availability each host *effectively delivered* in the last
   simulation (compute work / compute wall time), which folds in when it was slow;
3. the best of those and of any extra candidates given (the strategies' own
   schedules) is then improved by local search: move rows away from the host that was
   most often the slowest of its iteration (the simulator reports it), to the least
   critical host or spread over all others, halving the step when nothing improves.
   A strategy can therefore tie the oracle but never beat it.

Everything is batched over runs: one simulator call per round for all cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ppe.replay.simulate import (
    RateBank,
    RunSpec,
    SimConfig,
    SimResult,
    app_phases,
    chain_messages,
    simulate,
)
from scheduler import LinearHost, balance


@dataclass(frozen=True)
class OracleResult:
    """Per run: the best rows found, their simulated makespan, and which step found them."""

    rows: list[list[int]]
    makespan: np.ndarray
    source: list[str]
    #: the simpler yardstick: balance on each host's true mean availability over the run,
    #: re-measured a few times (what balancing with a perfect horizon forecast would give).
    balance_makespan: np.ndarray | None = None


def _balanced(per_row: np.ndarray, fixed: np.ndarray, total: int) -> list[int]:
    names = [f"h{p}" for p in range(per_row.size)]
    hosts = [
        LinearHost(nm, float(a), float(b)) for nm, a, b in zip(names, per_row, fixed, strict=True)
    ]
    alloc = balance(hosts, total)
    return [alloc.rows[nm] for nm in names]


def _comm_time(config: SimConfig, hosts: int) -> np.ndarray:
    """Whole-run communication time of each chain position (constant-bandwidth estimate)."""
    nmsg = chain_messages(hosts)
    return config.iterations * len(app_phases(config.app)) * nmsg * config.message_seconds()


class _Search:
    """Best-so-far bookkeeping over batched simulations."""

    def __init__(
        self,
        bank: RateBank,
        runs: Sequence[RunSpec],
        config: SimConfig,
        net_bank: RateBank | None,
    ) -> None:
        self.bank, self.runs, self.config, self.net_bank = bank, runs, config, net_bank
        self.best_ms = np.full(len(runs), np.inf)
        self.best_rows: list[list[int]] = [list(r.rows) for r in runs]
        self.best_crit = [np.zeros(len(r.hosts)) for r in runs]
        self.source = ["none"] * len(runs)

    def consider(self, rows: Sequence[Sequence[int]], label: str) -> tuple[SimResult, np.ndarray]:
        """Simulate one allocation per run; keep improvements. Returns (result, improved)."""
        specs = [
            RunSpec(r.hosts, list(rw), r.benchmark, r.start, r.net)
            for r, rw in zip(self.runs, rows, strict=True)
        ]
        res = simulate(self.bank, specs, self.config, self.net_bank)
        better = res.makespan < self.best_ms * (1 - 1e-12)
        assert res.critical is not None
        for i in np.flatnonzero(better).tolist():
            self.best_ms[i] = res.makespan[i]
            self.best_rows[i] = list(rows[i])
            self.best_crit[i] = res.critical[i, : len(self.runs[i].hosts)].copy()
            self.source[i] = label
        return res, better


def oracle(
    bank: RateBank,
    runs: Sequence[RunSpec],
    config: SimConfig,
    total_rows: int,
    net_bank: RateBank | None = None,
    candidates: Sequence[Sequence[Sequence[int]]] = (),
    rounds: int = 3,
    search_rounds: int = 30,
) -> OracleResult:
    """Best schedule per run knowing the future; ``runs`` give hosts, benchmarks, starts
    (their rows are ignored). ``candidates[j][r]`` is an extra allocation for run ``r``
    (e.g. strategy ``j``'s)."""
    search = _Search(bank, runs, config, net_bank)
    work_row = [config.iterations * config.n * np.asarray(r.benchmark, float) for r in runs]
    fixed = [_comm_time(config, len(r.hosts)) for r in runs]
    starts = [np.full(len(r.hosts), r.start) for r in runs]
    idx = [np.asarray(r.hosts, dtype=np.int64) for r in runs]
    res, _ = search.consider(
        [_balanced(w, f, total_rows) for w, f in zip(work_row, fixed, strict=True)], "dedicated"
    )
    balance_ms = np.full(len(runs), np.inf)
    for rnd in range(rounds):
        span = res.makespan
        rows = [
            _balanced(
                work_row[i] / bank.mean_rate(idx[i], starts[i], starts[i] + span[i]),
                fixed[i],
                total_rows,
            )
            for i in range(len(runs))
        ]
        res, _ = search.consider(rows, f"mean-availability-{rnd}")
        balance_ms = np.minimum(balance_ms, res.makespan)
    for rnd in range(rounds):
        rows = [
            _balanced(
                work_row[i] / _effective(res, i, bank, idx[i], starts[i], config),
                fixed[i],
                total_rows,
            )
            for i in range(len(runs))
        ]
        res, _ = search.consider(rows, f"effective-{rnd}")
    for j, cand in enumerate(candidates):
        search.consider(cand, f"candidate-{j}")
    steps = np.full(len(runs), max(1, total_rows // 40))
    for rnd in range(search_rounds):
        moves = [
            _moves(search.best_rows[i], search.best_crit[i], int(steps[i]))
            for i in range(len(runs))
        ]
        _, won_a = search.consider([m[0] for m in moves], f"search-{rnd}")
        _, won_b = search.consider([m[1] for m in moves], f"search-{rnd}")
        steps = np.where(won_a | won_b, steps, np.maximum(1, steps // 2))
    return OracleResult(
        rows=search.best_rows,
        makespan=search.best_ms,
        source=search.source,
        balance_makespan=balance_ms,
    )


def _effective(
    res: SimResult,
    i: int,
    bank: RateBank,
    idx: np.ndarray,
    start: np.ndarray,
    config: SimConfig,
) -> np.ndarray:
    """Availability host by host as delivered in simulation ``res`` (work / compute time);
    hosts left without rows are judged by their mean availability over the run."""
    k = idx.size
    busy = res.busy[i, :k]
    done = res.dedicated[i, :k] * config.iterations
    ok = (done > 0) & (busy > 0)
    eff = np.ones(k)
    eff[ok] = done[ok] / busy[ok]
    if (~ok).any():
        eff[~ok] = bank.mean_rate(idx[~ok], start[~ok], start[~ok] + res.makespan[i])
    return eff


def _moves(rows: list[int], crit: np.ndarray, step: int) -> tuple[list[int], list[int]]:
    """Two neighbours of ``rows``: ``step`` rows from the most critical host to the least
    critical one, and the same rows spread over all other hosts by their current rows."""
    r = np.asarray(rows, dtype=np.int64)
    if r.size < 2:
        return list(rows), list(rows)
    donor = int(np.argmax(crit))
    step = min(step, int(r[donor]))
    others = np.delete(np.arange(r.size), donor)
    one, spread = r.copy(), r.copy()
    to = int(others[np.argmin(crit[others])])
    one[donor] -= step
    one[to] += step
    share = r[others] + 1.0
    add = np.floor(step * share / share.sum()).astype(np.int64)
    add[np.argmax(share)] += step - int(add.sum())
    spread[donor] -= step
    spread[others] += add
    return one.tolist(), spread.tolist()
