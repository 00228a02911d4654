"""Replay-free comparison on synthetic stochastic hosts (fast version of the benchmark).

Schedules are planned on one set of draws and judged on independent Monte Carlo "actuals" from
the same distributions, the same actuals for every strategy (common random numbers), so
differences between strategies are measured with little noise.
"""

from __future__ import annotations

import pytest

from scheduler import STRATEGIES
from scheduler.synthetic import (
    SCENARIOS,
    Outcome,
    compare_strategies,
    paired_difference,
    synthetic_hosts,
)

ROWS = 4000
CASES = [(n, scenario, seed) for n in (8, 32) for scenario in SCENARIOS for seed in (0, 1, 2)]
_cache: dict[tuple[int, str, int], dict[str, Outcome]] = {}


def outcomes(n: int, scenario: str, seed: int) -> dict[str, Outcome]:
    key = (n, scenario, seed)
    if key not in _cache:
        hosts = synthetic_hosts(n, scenario, seed=seed, total_rows=ROWS)
        _cache[key] = compare_strategies(
            hosts, ROWS, STRATEGIES, plan_seed=seed, actual_seed=1000 + seed, actual_samples=20000
        )
    return _cache[key]


@pytest.mark.parametrize(("n", "scenario", "seed"), CASES)
def test_expected_is_never_worse_in_mean_than_mean(n: int, scenario: str, seed: int) -> None:
    res = outcomes(n, scenario, seed)
    diff, se = paired_difference(res["expected"].actuals, res["mean"].actuals)
    assert diff <= 3 * se + 1e-9, f"expected worse than mean by {diff:.4f} (se {se:.4f})"


@pytest.mark.parametrize("n", [8, 32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conservative_cuts_the_95th_percentile_on_high_variance_hosts(n: int, seed: int) -> None:
    res = outcomes(n, "high-variance", seed)
    assert res["conservative"].p95 < 0.95 * res["mean"].p95
    assert res["quantile-makespan"].p95 < res["mean"].p95


@pytest.mark.parametrize("n", [8, 32])
def test_stochastic_strategies_beat_mean_on_bimodal_hosts(n: int) -> None:
    res = outcomes(n, "bimodal", 0)
    for name in ("conservative", "quantile", "expected", "quantile-makespan"):
        assert res[name].mean < 0.9 * res["mean"].mean, name
        assert res[name].p95 < 0.9 * res["mean"].p95, name


@pytest.mark.parametrize("n", [8, 32])
def test_predictions_match_actuals_for_balanced_strategies(n: int) -> None:
    # Planned and actual draws are independent, so predicted means must agree with actuals.
    res = outcomes(n, "heterogeneous", 0)
    for name in ("mean", "conservative", "quantile", "expected"):
        assert res[name].predicted_mean == pytest.approx(res[name].mean, rel=0.01), name


def test_actual_seed_must_be_fresh() -> None:
    hosts = synthetic_hosts(4, "low-variance")
    with pytest.raises(ValueError, match="differ"):
        compare_strategies(hosts, 400, ["mean"], plan_seed=3, actual_seed=3)
