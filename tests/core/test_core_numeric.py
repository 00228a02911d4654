"""The numeric engine: exact distributions for independent hosts.

How it is checked, and why that way:

* against Monte Carlo on the same model (``engine="mc"``, fixed seeds): means
  within 1 %, stds within 5 %, 95 % interval ends within 3 %.  Every comparison
  first checks that Monte Carlo itself can tell: its standard error must be a
  quarter of the tolerance or less (for the std that needs the samples' kurtosis:
  ``se(std)/std ~ sqrt((kurtosis - 1) / 4n)``).  With the CPU floored at 0.01, a
  normal availability with sigma/mu 0.2-0.3 gives each host a rare (1e-7..5e-4)
  but 50-100x slower outcome: the std then hangs on a handful of draws (kurtosis
  in the thousands), so there stds are checked against quadrature instead;
* against independent adaptive quadrature (``scipy.integrate.quad``) of the same
  definitions, to 1e-9: per-host moments, and the max's moments from the product
  of the per-host CDFs;
* the dedicated-host hand computation (points in, points out) to 1e-9.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import integrate, stats

import scheduler
from ppe.core import (
    HostInputs,
    Mixture,
    Normal,
    ParameterError,
    Point,
    Samples,
    linear_host_models,
    predict,
    use_engine,
)
from ppe.core.stochastic import Numeric, StochasticValue

N, ITERS, SIZE = 4000, 100, 8
PARAMS = {"n": N, "iterations": ITERS}
CPU_FLOOR = 0.01


def bimodal(mu: float) -> Mixture:
    """A host that is either mostly free or mostly busy (70/30)."""
    return Mixture([0.7, 0.3], [mu, 0.35 * mu], [0.03 * mu, 0.05 * mu])


def hosts(
    count: int, cpu: str, cv: float = 0.0, links: str = "point", seed: int = 4
) -> list[HostInputs]:
    rng = np.random.default_rng(seed)
    out = []
    for p in range(count):
        mu = float(rng.uniform(0.4, 0.95))
        avail: StochasticValue = Normal(mu, cv * mu) if cpu == "normal" else bimodal(mu)

        def link(bw: float) -> StochasticValue:
            if links == "normal":
                return Normal(bw, 0.1 * bw)
            if links == "mixture":
                return Mixture([0.5, 0.5], [bw, 0.5 * bw], [0.05 * bw, 0.05 * bw])
            return Point(bw)

        out.append(
            HostInputs(
                f"h{p}",
                float(rng.uniform(1.5e-8, 4e-8)),
                avail,
                link(1.25e7) if p < count - 1 else None,
                link(1.1e7) if p > 0 else None,
                5e-4,
            )
        )
    return out


def _kurtosis(x: np.ndarray) -> float:
    d = x - x.mean()
    return float(np.mean(d**4) / np.mean(d**2) ** 2)


def _agrees_with_mc(exact: StochasticValue, mc: Samples, *, stds: bool, upper: bool = True) -> None:
    """``exact`` against ``mc`` with tolerances Monte Carlo can resolve (see the
    module docstring); ``upper=False`` checks the upper interval end through the
    CDF instead (when it sits on a floor's point mass, the quantile jumps)."""
    x, n = mc.array, mc.n
    se_mean = x.std() / np.sqrt(n)
    assert 4 * se_mean <= 0.01 * abs(x.mean()), "too few samples to test the mean"
    assert exact.mean() == pytest.approx(x.mean(), rel=0.01)
    if stds:
        se_std = np.sqrt((_kurtosis(x) - 1) / (4 * n))
        assert 4 * se_std <= 0.05, "too few samples to test the std"
        assert exact.std() == pytest.approx(x.std(), rel=0.05)
    lo, hi = exact.interval(0.95)
    m_lo, m_hi = mc.interval(0.95)
    assert lo == pytest.approx(m_lo, rel=0.03)
    if upper:
        assert hi == pytest.approx(m_hi, rel=0.03)
    # the exact CDF at Monte Carlo's interval ends: 2.5 % and 97.5 % up to sampling noise
    band = 4 * np.sqrt(0.025 * 0.975 / n) + 1e-4
    assert float(exact.cdf(m_lo)) == pytest.approx(0.025, abs=band)
    assert float(exact.cdf(m_hi)) == pytest.approx(0.975, abs=band)


SCENARIOS = [
    # (hosts, cpu, cv, links, Monte Carlo samples, std checked, upper end checked)
    (64, "normal", 0.1, "point", 150_000, True, True),
    (64, "normal", 0.2, "point", 150_000, False, True),
    (8, "normal", 0.3, "point", 1_000_000, False, True),
    (2, "normal", 0.5, "point", 5_000_000, True, False),
    (64, "mixture", 0.0, "point", 150_000, True, True),
    (2, "mixture", 0.0, "point", 2_000_000, True, True),
    (16, "mixture", 0.0, "mixture", 500_000, True, True),
    (16, "normal", 0.1, "normal", 500_000, True, True),
]


@pytest.mark.parametrize(("count", "cpu", "cv", "links", "samples", "stds", "upper"), SCENARIOS)
def test_numeric_engine_agrees_with_monte_carlo(
    count: int, cpu: str, cv: float, links: str, samples: int, stds: bool, upper: bool
) -> None:
    hs = hosts(count, cpu, cv, links)
    rows = [N // count] * count
    exact = predict("sor", PARAMS, hs, rows)
    mc = predict("sor", PARAMS, hs, rows, engine="mc", samples=samples, seed=11)
    assert exact.engine == "numeric" and isinstance(exact.makespan, Numeric)
    assert isinstance(mc.makespan, Samples)
    _agrees_with_mc(exact.makespan, mc.makespan, stds=stds, upper=upper)
    for e, m in zip(exact.per_host, mc.per_host, strict=True):
        assert isinstance(m, Samples)
        _agrees_with_mc(e, m, stds=stds, upper=upper)


def _is_quantile(x: StochasticValue, q: np.ndarray, tol: float) -> None:
    """``ppf(q)`` is where the CDF reaches q (a point mass may hold q inside it)."""
    t = np.asarray(x.ppf(q))
    assert np.all(x.cdf(t * (1 + 1e-9)) >= q - tol)
    assert np.all(x.cdf(t * (1 - 1e-9)) <= q + tol)


def _quad_moments(cpu: StochasticValue, c: float) -> tuple[float, float]:
    """Mean and std of ``c / max(X, 0.01)`` by adaptive quadrature."""
    comps = cpu.components
    pdf = lambda x: sum(w * stats.norm.pdf(x, m, s) for w, m, s in comps)  # noqa: E731
    atom = sum(w * stats.norm.cdf(CPU_FLOOR, m, s) for w, m, s in comps)
    top = max(m + 12 * s for _, m, s in comps)
    kw = {"points": [m for _, m, _ in comps], "limit": 500, "epsabs": 0, "epsrel": 1e-12}
    e1 = atom * c / CPU_FLOOR + integrate.quad(lambda x: c / x * pdf(x), CPU_FLOOR, top, **kw)[0]
    e2 = (
        atom * (c / CPU_FLOOR) ** 2
        + integrate.quad(lambda x: (c / x) ** 2 * pdf(x), CPU_FLOOR, top, **kw)[0]
    )
    return e1, float(np.sqrt(e2 - e1 * e1))


@pytest.mark.parametrize(
    "cpu",
    [
        Normal(0.6, 0.06),
        Normal(0.5, 0.1),
        Normal(0.7, 0.21),
        Normal(0.5, 0.25),
        Normal(0.05, 0.05),
        bimodal(0.8),
    ],
)
def test_time_per_row_is_exact(cpu: StochasticValue) -> None:
    """``a = I * n * Benchmark / FracAvailCPU`` (whole run, per row), floor included."""
    bench = 2e-8
    (a, b), *_ = linear_host_models("sor", PARAMS, [HostInputs("h", bench, cpu)])
    assert isinstance(a, Numeric) and isinstance(b, Point)
    mean, std = _quad_moments(cpu, ITERS * N * bench)
    assert a.mean() == pytest.approx(mean, rel=1e-9)
    assert a.std() == pytest.approx(std, rel=1e-9)
    q = np.array([0.01, 0.3, 0.5, 0.9, 0.975])
    _is_quantile(a, q, 1e-9)
    if isinstance(cpu, Normal):  # closed form: the quantile of c / X' is c / X's
        x = np.maximum(stats.norm.ppf(1 - q, cpu.mu, cpu.sigma), CPU_FLOOR)
        assert np.allclose(a.ppf(q), ITERS * N * bench / x, rtol=1e-12)
    draws = a.rvs(200_000, random_state=3)
    assert draws.max() <= ITERS * N * bench / CPU_FLOOR * (1 + 1e-12)
    assert np.mean(draws) == pytest.approx(mean, rel=5 * std / mean / np.sqrt(2e5) + 1e-3)


def test_per_host_stds_match_quadrature_where_monte_carlo_cannot() -> None:
    """sigma/mu 0.2-0.3: the floor's rare point mass dominates the std."""
    for cv in (0.2, 0.3):
        hs = hosts(8, "normal", cv)
        pred = predict("sor", PARAMS, hs, [500] * 8)
        for h, t in zip(hs, pred.per_host, strict=True):
            # time = I * 2 * (rows * n/2 * Benchmark / X') + I * 2 * (comm + latency)
            mean, std = _quad_moments(h.cpu, ITERS * 500 * N * h.benchmark)
            links = [bw for bw in (h.bw_next, h.bw_prev) if bw is not None]
            comm = ITERS * 2 * sum(N * SIZE / bw.mean() + h.latency for bw in links)
            assert isinstance(t, Numeric)
            assert t.mean() == pytest.approx(comm + mean, rel=1e-9)
            assert t.std() == pytest.approx(std, rel=1e-9)


def test_makespan_moments_match_quadrature_of_the_product_cdf() -> None:
    """The max's grid against adaptive quadrature of ``prod_i F_i`` (floors on)."""
    for count, cv in ((16, 0.3), (4, 0.5), (64, 0.1)):
        pred = predict("sor", PARAMS, hosts(count, "normal", cv), [N // count] * count)
        ms = pred.makespan
        assert isinstance(ms, Numeric)
        top = float(ms.ppf(1.0))
        lo = float(ms.ppf(1e-12))
        jumps = sorted({float(h.ppf(1.0)) for h in pred.per_host})
        pts = [p for p in jumps if lo < p < top][:50]
        kw = {"points": pts or None, "limit": 2000, "epsabs": 0, "epsrel": 1e-11}

        def tail(t: float, ms: StochasticValue = ms) -> float:
            return float(1.0 - ms.cdf(t))

        m1 = lo + integrate.quad(tail, lo, top, **kw)[0]
        m2 = lo * lo + integrate.quad(lambda t, f=tail: 2 * t * f(t), lo, top, **kw)[0]
        assert ms.mean() == pytest.approx(m1, rel=2e-4)
        assert ms.std() == pytest.approx(np.sqrt(m2 - m1 * m1), rel=2e-3)
        _is_quantile(ms, np.array([0.025, 0.5, 0.975]), 2e-4)


def test_dedicated_hosts_stay_exact_next_to_a_stochastic_one() -> None:
    """Points in, points out (hand computation to 1e-9), even when another
    host's availability is a mixture."""
    bench = [2.0e-8, 3.1e-8, 2.5e-8, 4.0e-8]
    cpu: list[StochasticValue] = [Point(0.9), Point(0.55), bimodal(0.8), Point(0.35)]
    bw = 1.25e7
    hs = [
        HostInputs(
            f"h{p}",
            bench[p],
            cpu[p],
            Point(bw) if p < 3 else None,
            Point(bw) if p > 0 else None,
            5e-4,
        )
        for p in range(4)
    ]
    rows = [1200, 700, 1100, 1000]
    pred = predict("sor", PARAMS, hs, rows)
    assert pred.engine == "numeric"
    for p in (0, 1, 3):
        comm = sum(N * SIZE / bw + 5e-4 for q in (p - 1, p + 1) if 0 <= q < 4)
        hand = ITERS * 2 * (rows[p] * N / 2 * bench[p] / cpu[p].mean() + comm)
        got = pred.per_host[p]
        assert isinstance(got, Point)
        assert got.mean() == pytest.approx(hand, rel=1e-9, abs=0)
    assert isinstance(pred.per_host[2], Numeric)
    assert pred.makespan.ppf(0.0) == pytest.approx(
        max(pred.per_host[p].mean() for p in (0, 1, 3)), rel=1e-8
    )


def test_bimodal_availability_numeric_prediction_has_two_humps() -> None:
    """The exact answer to a bimodal host: a CDF flat across the valley, the slow
    hump holding exactly the slow mode's weight, and the 95 % interval reaching
    it - what a normal summary cannot show."""
    fast, slow, w_slow = 0.9, 0.3, 0.3
    mix = Mixture([1 - w_slow, w_slow], [fast, slow], [0.02, 0.02])
    hs = [
        HostInputs(
            f"h{p}",
            2e-8,
            mix if p == 0 else Normal(0.9, 0.02),
            Point(1.25e7) if p < 3 else None,
            Point(1.25e7) if p > 0 else None,
            5e-4,
        )
        for p in range(4)
    ]
    rows = [1000] * 4
    pred = predict("sor", PARAMS, hs, rows)
    ms = pred.makespan
    assert pred.engine == "numeric" and isinstance(ms, Numeric)
    comm = ITERS * 2 * (N * SIZE / 1.25e7 + 5e-4)
    half = ITERS * 1000 * N / 2 * 2e-8
    steady, slow_hump = comm + 2 * half / fast, comm + 2 * half / slow
    assert float(ms.cdf(1.3 * steady)) == pytest.approx(1 - w_slow, abs=1e-6)
    assert float(ms.cdf(0.7 * slow_hump) - ms.cdf(1.3 * steady)) < 1e-9  # the empty valley
    lo, hi = ms.interval(0.95)
    assert lo < 1.1 * steady and 0.9 * slow_hump < hi < 1.2 * slow_hump
    # a normal with the same mean and std puts its peak in the valley
    peak = Normal(ms.mean(), ms.std())
    assert 1.3 * steady < peak.mean() < 0.7 * slow_hump
    mc = predict("sor", PARAMS, hs, rows, engine="mc", samples=400_000, seed=3).makespan
    assert isinstance(mc, Samples)
    _agrees_with_mc(ms, mc, stds=True)


def test_draws_are_exact_and_aligned_with_the_inputs() -> None:
    """Numeric values are drawn from their inputs, so under Monte Carlo the
    makespan is, draw by draw, the max of the per-host times."""
    pred = predict("sor", PARAMS, hosts(8, "mixture", links="normal"), [500] * 8)
    with use_engine("mc", samples=5000, seed=2) as space:
        makespan = pred.makespan._draw(space)
        per_host = np.array([t._draw(space) for t in pred.per_host])
        slack = pred.makespan - pred.per_host[3]
    assert np.allclose(makespan, per_host.max(axis=0), rtol=1e-12)
    assert isinstance(slack, Samples) and slack.array.min() >= -1e-9
    draws = pred.makespan.rvs(100_000, random_state=4)
    assert draws.mean() == pytest.approx(pred.makespan.mean(), rel=0.01)
    assert np.mean(draws <= pred.makespan.ppf(0.9)) == pytest.approx(0.9, abs=0.005)


MIN_MODEL = """
param n
param I
NumElts[p] = rows[p] * n
HostTime[p] = I * NumElts[p] * Benchmark[p] / FracAvailCPU[p]
ExecTime = 3 + min(p in hosts: HostTime[p] + n * 8 / BWAvail[p, if p > 0 then p - 1 else p + 1])
"""

PAIR_MODEL = """
param n
param I
Comp[p] = rows[p] * n * Benchmark[p] / FracAvailCPU[p]
Comm[p] = max(q in neighbours(p): n * 8 / BWAvail[p, q])
HostTime[p] = I * max(Comp[p], Comm[p])
ExecTime = max(p in hosts: HostTime[p])
"""


@pytest.mark.parametrize("text", [MIN_MODEL, PAIR_MODEL])
def test_user_models_with_min_and_inner_max_are_exact(text: str) -> None:
    hs = hosts(6, "mixture", links="normal")
    rows = [40] * 6
    pred = predict(text, {"n": N, "I": 10}, hs, rows)
    mc = predict(text, {"n": N, "I": 10}, hs, rows, engine="mc", samples=400_000, seed=5)
    assert pred.engine == "numeric"
    assert isinstance(mc.makespan, Samples)
    _agrees_with_mc(pred.makespan, mc.makespan, stds=True)
    for e, m in zip(pred.per_host, mc.per_host, strict=True):
        assert isinstance(m, Samples)
        _agrees_with_mc(e, m, stds=True)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("rows[p] * Benchmark[p] / FracAvailCPU[p] / FracAvailCPU[p]", "quotient of two"),
        ("rows[p] * Benchmark[p] / (FracAvailCPU[p] + 1)", "quotient by a sum"),
        ("rows[p] * FracAvailCPU[p] * FracAvailCPU[p]", "product of two"),
        ("rows[p] * (FracAvailCPU[p] + 1 / FracAvailCPU[p])", "both proportional"),
    ],
)
def test_structures_the_numeric_engine_hands_over(body: str, reason: str) -> None:
    text = f"HostTime[p] = {body}\nExecTime = max(p in hosts: HostTime[p])\n"
    hs = hosts(3, "normal", 0.05)
    with pytest.raises(ParameterError) as info:
        predict(text, {}, hs, [10] * 3, engine="numeric")
    assert info.value.name == "engine" and reason in info.value.message
    auto = predict(text, {}, hs, [10] * 3)
    assert auto.engine in ("analytic", "mc") and auto.note is not None and reason in auto.note


def test_inputs_sharing_a_source_hand_over() -> None:
    """Two derived normals built on one input are dependent: not numeric."""
    base = Normal(0.6, 0.05)
    with use_engine("analytic"):
        a, b = base * 1.0 + 0.1, base * 0.5 + 0.2
    bw = Point(1.25e7)
    hs = [HostInputs("a", 2e-8, a, bw_next=bw), HostInputs("b", 2e-8, b, bw_prev=bw)]
    with pytest.raises(ParameterError) as info:
        predict("jacobi2d", PARAMS, hs, [100, 100], engine="numeric")
    assert "shares randomness" in info.value.message
    assert predict("jacobi2d", PARAMS, hs, [100, 100]).engine == "analytic"
    # the very same object twice is one input: fine within a host
    same = Normal(1.25e7, 1e6)
    hs2 = [
        HostInputs("a", 2e-8, Normal(0.6, 0.05), bw_next=same),
        HostInputs("b", 2e-8, Normal(0.7, 0.05), bw_prev=Normal(1.25e7, 1e6), bw_next=same),
        HostInputs("c", 2e-8, Normal(0.8, 0.05), bw_prev=Normal(1.2e7, 1e6)),
    ]
    pred = predict("sor", PARAMS, hs2, [100] * 3)
    assert pred.engine != "numeric" and "share an input" in (pred.note or "")


def test_scheduler_balances_numeric_linear_models() -> None:
    """The scheduler reads numeric values through the scipy-shaped protocol."""
    hs = hosts(17, "mixture")
    hs[5] = replace(hs[5], name="wide", cpu=Normal(hs[5].cpu.mean(), 0.4 * hs[5].cpu.mean()))
    models = linear_host_models("sor", PARAMS, hs)
    assert all(isinstance(a, Numeric) for a, _ in models)
    stoch = [scheduler.StochasticHost(h.name, a, b) for h, (a, b) in zip(hs, models, strict=True)]
    for strategy in ("mean", "conservative", "quantile", "expected"):
        sched = scheduler.schedule(stoch, N, strategy, samples=2000)
        assert sum(sched.rows.values()) == N
    mean = scheduler.schedule(stoch, N, "mean").rows
    cons = scheduler.schedule(stoch, N, "conservative").rows
    assert cons["wide"] < mean["wide"]
