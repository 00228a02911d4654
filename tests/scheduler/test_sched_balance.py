"""Time balancing against hand-solved cases, bounds, infeasibility and brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import Infeasible, LinearHost, balance
from scheduler.balance import level_formula


def test_two_hosts_without_fixed_time() -> None:
    # A = (1, 2): T = 300 / (1 + 1/2) = 200 -> rows 200 and 100.
    alloc = balance([LinearHost("h1", 1.0, 0.0), LinearHost("h2", 2.0, 0.0)], 300)
    assert alloc.rows == {"h1": 200, "h2": 100}
    assert alloc.times == {"h1": 200.0, "h2": 200.0}
    assert alloc.makespan == alloc.level == 200.0


def test_two_hosts_with_fixed_time() -> None:
    # A = (1, 2), B = (10, 4): T = (300 + 10 + 2) / 1.5 = 208 -> rows 198 and 102.
    alloc = balance([LinearHost("h1", 1.0, 10.0), LinearHost("h2", 2.0, 4.0)], 300)
    assert alloc.rows == {"h1": 198, "h2": 102}
    assert alloc.makespan == pytest.approx(208.0)


def test_three_hosts_exact_split() -> None:
    # A = (1, 2, 4): sum 1/A = 1.75, T = 700 / 1.75 = 400 -> 400, 200, 100.
    hosts = [LinearHost(f"h{i}", a, 0.0) for i, a in enumerate((1.0, 2.0, 4.0))]
    assert list(balance(hosts, 700).rows.values()) == [400, 200, 100]


def test_three_hosts_rounding_adds_the_row_where_the_makespan_grows_least() -> None:
    # A = (1, 2, 4), B = (5, 10, 20): T = (700 + 15) / 1.75 = 408.571...
    # continuous rows 403.57, 199.29, 97.14 -> floors 403, 199, 97 (699 rows);
    # one more row would end at 409 (h0), 410 (h1) or 412 (h2): h0 gets it.
    hosts = [LinearHost("h0", 1, 5), LinearHost("h1", 2, 10), LinearHost("h2", 4, 20)]
    alloc = balance(hosts, 700)
    assert alloc.level == pytest.approx(715 / 1.75)
    assert alloc.rows == {"h0": 404, "h1": 199, "h2": 97}
    assert alloc.makespan == 409.0


def test_host_with_negative_share_is_dropped() -> None:
    # Naively T = (300 + 500) / 3 = 266.7 gives h3 -233 rows; without it T = 150.
    hosts = [LinearHost("h1", 1, 0), LinearHost("h2", 1, 0), LinearHost("h3", 1, 500)]
    alloc = balance(hosts, 300)
    assert alloc.rows == {"h1": 150, "h2": 150, "h3": 0}
    assert alloc.times["h3"] == 0.0
    assert alloc.used == ["h1", "h2"]
    assert alloc.makespan == 150.0


def test_dropping_cascades() -> None:
    # Dropping h4 alone (B = 300) still leaves h3 (B = 120) negative: T = 60 without both.
    hosts = [
        LinearHost("h1", 1, 0),
        LinearHost("h2", 1, 0),
        LinearHost("h3", 1, 120),
        LinearHost("h4", 1, 300),
    ]
    alloc = balance(hosts, 120)
    assert alloc.rows == {"h1": 60, "h2": 60, "h3": 0, "h4": 0}


def test_binding_max_rows() -> None:
    # Unbounded h1 would take 200; memory caps it at 150, so h2 takes the other 150.
    alloc = balance([LinearHost("h1", 1, 0, max_rows=150), LinearHost("h2", 2, 0)], 300)
    assert alloc.rows == {"h1": 150, "h2": 150}
    assert alloc.makespan == 300.0


def test_binding_min_rows() -> None:
    # h2 must hold 120 rows (time 240); the rest balance on h1: T + max(120, T/2) = 300.
    alloc = balance([LinearHost("h1", 1, 0), LinearHost("h2", 2, 0, min_rows=120)], 300)
    assert alloc.rows == {"h1": 180, "h2": 120}
    assert alloc.level == pytest.approx(180.0)
    assert alloc.makespan == 240.0


def test_binding_bounds_on_three_hosts() -> None:
    # Unbounded: 400, 200, 100. h1 capped at 300 -> remaining 400 over h2, h3: T = 400/0.75.
    hosts = [LinearHost("h1", 1, 0, max_rows=300), LinearHost("h2", 2, 0), LinearHost("h3", 4, 0)]
    alloc = balance(hosts, 700)
    assert alloc.level == pytest.approx(400 / 0.75)
    assert alloc.rows["h1"] == 300
    assert alloc.rows["h2"] + alloc.rows["h3"] == 400
    assert abs(alloc.rows["h2"] - 2 * alloc.rows["h3"]) <= 2


def test_min_rows_keep_a_slow_host_in() -> None:
    hosts = [LinearHost("h1", 1, 0), LinearHost("h2", 1, 500, min_rows=10)]
    assert balance(hosts, 300).rows == {"h1": 290, "h2": 10}


def test_total_equal_to_bounds() -> None:
    hosts = [LinearHost("h1", 1, 0, max_rows=100), LinearHost("h2", 5, 0, max_rows=50)]
    assert balance(hosts, 150).rows == {"h1": 100, "h2": 50}
    hosts = [LinearHost("h1", 1, 0, min_rows=100), LinearHost("h2", 5, 0, min_rows=50)]
    assert balance(hosts, 150).rows == {"h1": 100, "h2": 50}


def test_rounding_noise_on_a_flat_segment() -> None:
    # Found by fuzzing: the level's fill reaches the total at a knot followed by a flat
    # segment; rounding noise once put the level there, with no host left to balance.
    hosts = [
        LinearHost("h0", 6.763999042658161, 48.21180319033986, 3, 14),
        LinearHost("h1", 0.05, 59.700278865728066, 2, 3),
        LinearHost("h2", 2.586018137723681, 56.97776958244742, 2, 14),
    ]
    alloc = balance(hosts, 8)
    assert alloc.rows == {"h0": 3, "h1": 3, "h2": 2}
    assert math.isfinite(alloc.level)


def test_zero_rows() -> None:
    alloc = balance([LinearHost("h1", 1, 3)], 0)
    assert alloc.rows == {"h1": 0} and alloc.makespan == 0.0


@pytest.mark.parametrize(
    ("hosts", "rows", "phrase"),
    [
        (
            [LinearHost("h1", 1, 0, max_rows=100), LinearHost("h2", 1, 0, max_rows=150)],
            300,
            "max_rows sum to 250 < 300",
        ),
        (
            [LinearHost("h1", 1, 0, min_rows=200), LinearHost("h2", 1, 0, min_rows=150)],
            300,
            "min_rows sum to 350 > 300",
        ),
        ([], 10, "no hosts"),
    ],
)
def test_infeasible(hosts: list[LinearHost], rows: int, phrase: str) -> None:
    with pytest.raises(Infeasible, match=phrase):
        balance(hosts, rows)


@pytest.mark.parametrize(
    "make",
    [
        lambda: LinearHost("h", 0.0, 1.0),
        lambda: LinearHost("h", -1.0, 1.0),
        lambda: LinearHost("h", math.nan, 1.0),
        lambda: LinearHost("h", 1.0, math.inf),
        lambda: LinearHost("h", 1.0, 0.0, min_rows=-1),
        lambda: LinearHost("h", 1.0, 0.0, min_rows=5, max_rows=4),
        lambda: LinearHost("", 1.0, 0.0),
    ],
)
def test_bad_hosts_are_rejected(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_bad_totals_and_duplicate_names() -> None:
    with pytest.raises(ValueError, match="total_rows"):
        balance([LinearHost("h", 1, 0)], -1)
    with pytest.raises(ValueError, match="duplicate"):
        balance([LinearHost("h", 1, 0), LinearHost("h", 2, 0)], 10)


def test_level_formula_is_designs_closed_form() -> None:
    a, b = np.array([1.0, 2.0]), np.array([10.0, 4.0])
    assert level_formula(300, a, b) == pytest.approx((300 + 10 + 2) / (1 + 0.5))


# --- properties ------------------------------------------------------------------------------

host_st = st.builds(
    lambda a, b, lo, extra: (a, b, lo, None if extra is None else lo + extra),
    st.floats(0.05, 20.0),
    st.floats(0.0, 60.0),
    st.integers(0, 4),
    st.none() | st.integers(0, 12),
)


def _hosts(spec: list[tuple[float, float, int, int | None]]) -> list[LinearHost]:
    return [LinearHost(f"h{i}", a, b, lo, hi) for i, (a, b, lo, hi) in enumerate(spec)]


def _makespan(spec: list[tuple[float, float, int, int | None]], rows: tuple[int, ...]) -> float:
    return max((a * r + b if r > 0 else 0.0) for (a, b, _, _), r in zip(spec, rows, strict=True))


def _brute_force(spec: list[tuple[float, float, int, int | None]], total: int) -> float | None:
    ranges = [range(lo, (total if hi is None else min(hi, total)) + 1) for _, _, lo, hi in spec]
    best = None
    for rows in itertools.product(*ranges):
        if sum(rows) == total:
            m = _makespan(spec, rows)
            best = m if best is None else min(best, m)
    return best


@settings(max_examples=150, deadline=None)
@given(st.lists(host_st, min_size=1, max_size=3), st.integers(0, 24))
def test_integer_optimum_matches_brute_force(
    spec: list[tuple[float, float, int, int | None]], total: int
) -> None:
    best = _brute_force(spec, total)
    if best is None:
        with pytest.raises(Infeasible):
            balance(_hosts(spec), total)
        return
    alloc = balance(_hosts(spec), total)
    assert sum(alloc.rows.values()) == total
    assert alloc.makespan == pytest.approx(best, rel=1e-9, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.lists(host_st, min_size=1, max_size=12), st.integers(0, 100_000))
def test_rows_sum_and_times_equal_up_to_one_row(
    spec: list[tuple[float, float, int, int | None]], total: int
) -> None:
    lo_sum = sum(lo for _, _, lo, _ in spec)
    highs = [hi for _, _, _, hi in spec]
    hi_sum = math.inf if None in highs else sum(h for h in highs if h is not None)
    hosts = _hosts(spec)
    if not lo_sum <= total <= hi_sum:
        with pytest.raises(Infeasible):
            balance(hosts, total)
        return
    alloc = balance(hosts, total)
    rows = [alloc.rows[h.name] for h in hosts]
    assert sum(rows) == total
    for h, r in zip(hosts, rows, strict=True):
        assert h.min_rows <= r <= (h.max_rows if h.max_rows is not None else total)
    # No host that could give a row up finishes later than any host that could take one
    # would after taking it: predicted times are equal up to one row's worth.
    times = [alloc.times[h.name] for h in hosts]
    for p, hp in enumerate(hosts):
        if rows[p] <= hp.min_rows:
            continue
        for q, hq in enumerate(hosts):
            if q == p or (hq.max_rows is not None and rows[q] >= hq.max_rows):
                continue
            after = hq.a * (rows[q] + 1) + hq.b
            assert times[p] <= after + 1e-9 * max(1.0, after)
