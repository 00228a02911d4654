"""Trace-driven simulator: hand computation, a slow reference, and edge cases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from ppe.replay.simulate import RateBank, RunSpec, SimConfig, simulate


def _makespan(ts, av, rows, bench, start, config) -> float:
    """One schedule over per-host (timestamps, availability) series, through ``simulate``."""
    bank = RateBank(list(zip(ts, av, strict=True)))
    run = RunSpec(hosts=list(range(len(rows))), rows=rows, benchmark=bench, start=start)
    return float(simulate(bank, [run], config).makespan[0])


def test_two_host_two_sample_hand_computation() -> None:
    # Host A: availability 1.0 then 0.5 from t=100; host B: 0.5 then 1.0.
    # SOR n=10, 5 rows each, benchmark 1 s/element -> 25 s dedicated per half-iteration.
    # One neighbour each, halo 10*8 = 80 bytes at 80 B/s -> 1 s per phase.
    # Iteration 1: A 25+1+25+1 = 52; B 50+1, then black 51..100 does 24.5, last 0.5 at
    #   rate 1 -> 100.5, +1 -> 101.5. Synchronise at 101.5.
    # Iteration 2: A at 0.5: 50+1+50+1 -> 203.5; B at 1: 25+1+25+1 -> 153.5. End 203.5.
    config = SimConfig("sor", n=10, iterations=2, bandwidth=80.0, latency=0.0)
    t = _makespan([[0, 100], [0, 100]], [[1.0, 0.5], [0.5, 1.0]], [5, 5], [1.0, 1.0], 0.0, config)
    assert t == pytest.approx(203.5, abs=1e-9)


def test_jacobi_latency_and_start_mid_segment() -> None:
    # One host alone: no neighbours, so no messages; starts at 50 with rate 0.5 until 100.
    # Work 4 rows * 10 * 1 = 40 s dedicated per iteration.
    # It 1: 50 -> 100 does 25, 15 left at rate 2 -> 107.5. It 2: 40/2 = 20 -> 127.5.
    config = SimConfig("jacobi2d", n=10, iterations=2, bandwidth=1.0, latency=3.0)
    t = _makespan([[0, 100]], [[0.5, 2.0]], [4], [1.0], 50.0, config)
    assert t == pytest.approx(77.5)


def test_zero_row_host_leaves_the_chain() -> None:
    # Middle host has no rows: the two others are chain ends with one message each.
    config = SimConfig("jacobi2d", n=10, iterations=3, bandwidth=80.0, latency=0.5)
    t = _makespan([[0]] * 3, [[1.0]] * 3, [2, 0, 2], [1.0] * 3, 0.0, config)
    assert t == pytest.approx(3 * (20 + 1.5))


def _reference(
    ts: Sequence[np.ndarray],
    av: Sequence[np.ndarray],
    rows: Sequence[int],
    bench: Sequence[float],
    start: float,
    config: SimConfig,
) -> float:
    """Slow, obviously-correct walk over segments, one host and phase at a time."""
    phases = (0.5, 0.5) if config.app == "sor" else (1.0,)
    active = [i for i, r in enumerate(rows) if r > 0]
    comm = {}
    for pos, i in enumerate(active):
        k = (pos > 0) + (pos < len(active) - 1)
        comm[i] = k * (config.latency + config.n * config.elt_size / config.bandwidth)

    def run(i: int, t: float, w: float) -> float:
        times, rates = list(ts[i]), list(av[i])
        while w > 1e-15:
            j = max(0, int(np.searchsorted(times, t, side="right")) - 1)
            r = rates[j]
            end = times[j + 1] if j + 1 < len(times) and times[j + 1] > t else np.inf
            if t < times[0]:
                end = times[0]
            if (end - t) * r >= w:
                return t + w / r
            w -= (end - t) * r
            t = end
        return t

    if not active:
        return 0.0
    t = start
    for _ in range(config.iterations):
        ends = []
        for i in active:
            u = t
            for share in phases:
                u = run(i, u, rows[i] * config.n * bench[i] * share) + comm[i]
            ends.append(u)
        t = max(ends)
    return t - start


@pytest.mark.parametrize("app", ["sor", "jacobi2d"])
def test_batched_fast_forward_matches_reference(app: str) -> None:
    rng = np.random.default_rng(5)
    hosts = 5
    ts = [np.cumsum(rng.uniform(20, 60, size=40)) for _ in range(hosts)]
    av = [np.clip(rng.uniform(-0.2, 1.0, size=40), 0.01, 1.0) for _ in range(hosts)]
    config = SimConfig(app, n=30, iterations=25, bandwidth=4000.0, latency=0.01)
    bank = RateBank(list(zip(ts, av, strict=True)))
    runs, expected = [], []
    for _ in range(12):
        chosen = rng.choice(hosts, size=int(rng.integers(1, hosts + 1)), replace=False)
        rows = rng.integers(0, 6, size=len(chosen))
        bench = rng.uniform(0.005, 0.02, size=len(chosen))
        start = float(rng.uniform(0, 900))
        runs.append(RunSpec(list(chosen), list(rows), list(bench), start))
        sub_ts = [ts[c] for c in chosen]
        sub_av = [av[c] for c in chosen]
        expected.append(_reference(sub_ts, sub_av, list(rows), list(bench), start, config))
    got = simulate(bank, runs, config).makespan
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-6)  # float64 on one long axis


def test_stopping_at_a_check_and_resuming_gives_the_same_run() -> None:
    # A re-planning run is simulated in slices: each slice stops at the first iteration
    # boundary at or after its check time; resumed with the iterations left, the slices add
    # up to the uninterrupted run, whether the stop falls in a fast-forward or not.
    rng = np.random.default_rng(11)
    ts = [np.cumsum(rng.uniform(20, 60, size=60)) for _ in range(3)]
    av = [np.clip(rng.uniform(-0.2, 1.0, size=60), 0.01, 1.0) for _ in range(3)]
    bank = RateBank(list(zip(ts, av, strict=True)))
    config = SimConfig("sor", n=30, iterations=40, bandwidth=4000.0, latency=0.01)
    base = RunSpec([0, 1, 2], [3, 5, 2], [0.01, 0.02, 0.015], 100.0)
    whole = simulate(bank, [base], config)
    assert whole.done is not None and whole.done[0] == 40
    t, left, slices = 100.0, 40, 0
    while left > 0:
        part = simulate(
            bank,
            [RunSpec(base.hosts, base.rows, base.benchmark, t, None, left)],
            config,
            until=t + 90.0,
        )
        assert part.done is not None and 1 <= part.done[0] <= left
        end = t + float(part.makespan[0])
        if part.done[0] < left:  # stopped at the first boundary past the check, not later
            assert end >= t + 90.0
            one_less = simulate(
                bank,
                [RunSpec(base.hosts, base.rows, base.benchmark, t, None, int(part.done[0]) - 1)],
                config,
            )
            assert t + float(one_less.makespan[0]) < t + 90.0
        t, left, slices = end, left - int(part.done[0]), slices + 1
    assert slices > 2
    assert t - 100.0 == pytest.approx(float(whole.makespan[0]), rel=1e-9)


def test_constant_trace_fast_forwards_in_one_step() -> None:
    config = SimConfig("sor", n=100, iterations=10_000, bandwidth=1e6, latency=0.0)
    bank = RateBank([([0.0], [0.5]), ([0.0], [1.0])])
    res = simulate(bank, [RunSpec([0, 1], [10, 10], [1e-3, 1e-3], 10.0)], config)
    per_iter = 10 * 100 * 1e-3 / 0.5 + 2 * 100 * 8 / 1e6
    assert res.makespan[0] == pytest.approx(10_000 * per_iter)
    assert res.steps <= 2


def test_network_bank_matches_constant_bandwidth_when_flat() -> None:
    config = SimConfig("sor", n=50, iterations=7, bandwidth=2000.0, latency=0.01)
    ts = [np.array([0.0, 30.0, 90.0])] * 3
    av = [np.array([1.0, 0.3, 0.8]), np.array([0.5, 0.9, 0.2]), np.array([0.7, 0.7, 0.1])]
    bank = RateBank(list(zip(ts, av, strict=True)))
    net = RateBank([([0.0], [2000.0])] * 3)
    run = RunSpec([0, 1, 2], [3, 4, 5], [0.01] * 3, 5.0, net=[0, 1, 2])
    flat = simulate(bank, [run], config).makespan[0]
    via_net = simulate(bank, [run], config, net_bank=net).makespan[0]
    assert via_net == pytest.approx(flat, rel=1e-8)
    slow = RateBank([([0.0], [1000.0])] * 3)
    assert simulate(bank, [run], config, net_bank=slow).makespan[0] > flat


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        RateBank([([0.0, 1.0], [1.0, 0.0])])
    with pytest.raises(ValueError, match="unknown app"):
        _makespan([[0]], [[1.0]], [1], [1.0], 0.0, SimConfig("fft", 10, 1))
    bank = RateBank([([0.0], [1.0])])
    run = RunSpec([0], [1], [1.0], 0.0)
    with pytest.raises(ValueError, match="NaN"):
        simulate(bank, [run], SimConfig("sor", 10, 5), until=[float("nan")])
    with pytest.raises(ValueError, match="non-negative"):
        simulate(bank, [RunSpec([0], [1], [1.0], 0.0, None, -1)], SimConfig("sor", 10, 5))


def test_blocks_give_their_elements_and_exchanges_by_hand() -> None:
    """A block's elements and its exchanges per phase replace rows x n and the halo rows.
    SOR, 2 iterations, benchmark 1 s/element, rate 1: host 0 has 30 elements and pays 2 s
    a phase (15 + 2 + 15 + 2 = 34 s an iteration), host 1 has 20 and pays 5 (10 + 5 + 10 +
    5 = 30 s); host 2 has no elements, so it neither computes nor pays its 100 s. Mixed in
    one call with a strip run, which keeps its halo rows (n = 10, 80 B at 80 B/s: 1 s)."""
    config = SimConfig("sor", n=10, iterations=2, bandwidth=80.0, latency=0.0)
    bank = RateBank([([0.0], [1.0])])
    block = RunSpec([0, 0, 0], [1, 1, 1], [1.0] * 3, 0.0, elements=[30, 20, 0], comm=[2, 5, 100])
    strip = RunSpec([0, 0], [3, 2], [1.0, 1.0], 0.0)  # 15 + 1 + 15 + 1 = 32 s an iteration
    got = simulate(bank, [block, strip], config)
    assert got.makespan.tolist() == pytest.approx([68.0, 64.0])
    assert got.busy[0, :3].tolist() == pytest.approx([60.0, 40.0, 0.0])
    with pytest.raises(ValueError, match="one finite, non-negative entry per host"):
        simulate(bank, [replace(block, comm=[1.0, float("nan"), 0.0])], config)
    with pytest.raises(ValueError, match="constant links"):
        simulate(bank, [replace(block, net=[0, 0, 0])], config, net_bank=bank)
