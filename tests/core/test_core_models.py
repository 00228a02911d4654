"""Built-in SOR/Jacobi2D models and the prediction API."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from forecaster import fit_distribution
from ppe.core import (
    HostInputs,
    Mixture,
    Normal,
    ParameterError,
    Point,
    Samples,
    builtin_models,
    compile_model,
    linear_host_models,
    predict,
)

N, ITERS, SIZE = 4000, 100, 8
BENCH = [2.0e-8, 3.1e-8, 2.5e-8, 4.0e-8]
CPU = [0.9, 0.55, 0.8, 0.35]
BW_NEXT = [1.25e7, 9.0e6, 2.0e7, None]
BW_PREV = [None, 1.1e7, 8.5e6, 1.6e7]
LAT = [5e-4, 8e-4, 3e-4, 1e-3]
ROWS = [1200, 700, 1100, 1000]


def _point(x: float | None) -> Point | None:
    return None if x is None else Point(x)


def dedicated_hosts() -> list[HostInputs]:
    return [
        HostInputs(f"h{p}", BENCH[p], Point(CPU[p]), _point(BW_NEXT[p]), _point(BW_PREV[p]), LAT[p])
        for p in range(4)
    ]


def hand_iter_time(p: int) -> float:
    """docs/architecture.md's equations written out by hand for host p."""
    num_elts = ROWS[p] * N / 2
    r_comp = num_elts * BENCH[p] / CPU[p]
    r_comm = 0.0
    for bw in (BW_NEXT[p], BW_PREV[p]):
        if bw is not None:  # end hosts have one neighbour
            r_comm += N * SIZE / bw + LAT[p]
    b_comp, b_comm = r_comp, r_comm  # the black half is the same
    return r_comp + r_comm + b_comp + b_comm


@pytest.mark.parametrize("engine", ["auto", "numeric", "analytic", "mc"])
def test_sor_dedicated_hosts_reproduce_hand_computation(engine: str) -> None:
    pred = predict("sor", {"n": N, "iterations": ITERS}, dedicated_hosts(), ROWS, engine=engine)
    end, middle = 0, 1
    for p in (end, middle, 2, 3):
        got = pred.per_host[p]
        assert isinstance(got, Point if engine != "mc" else Samples)
        assert got.std() <= 1e-12 * got.mean()
        assert got.mean() == pytest.approx(ITERS * hand_iter_time(p), rel=1e-9, abs=0)
    expected = ITERS * max(hand_iter_time(p) for p in range(4))
    assert pred.makespan.mean() == pytest.approx(expected, rel=1e-9, abs=0)
    assert pred.makespan.std() <= 1e-12 * expected


def test_jacobi2d_dedicated_hosts() -> None:
    pred = predict("jacobi2d", {"n": N, "I": ITERS}, dedicated_hosts(), ROWS)
    for p in range(4):
        comp = ROWS[p] * N * BENCH[p] / CPU[p]
        comm = sum(N * SIZE / bw + LAT[p] for bw in (BW_NEXT[p], BW_PREV[p]) if bw is not None)
        assert pred.per_host[p].mean() == pytest.approx(ITERS * (comp + comm), rel=1e-9, abs=0)


def test_builtin_models_are_grammar_text() -> None:
    texts = builtin_models()
    assert set(texts) == {"sor", "jacobi2d"}
    model = compile_model(texts["sor"])
    assert {"RComp", "RComm", "BComp", "BComm", "HostTime", "ExecTime"} <= set(model.definitions)
    assert model.param("iterations") is not None and model.param("Size").default == 8.0  # type: ignore[union-attr]
    assert model.describe()["params"][0]["name"] == "n"


def stochastic_hosts(k: int, cv: float = 0.05, bw_cv: float = 0.08) -> list[HostInputs]:
    rng = np.random.default_rng(4)
    return [
        HostInputs(
            f"h{p}",
            float(rng.uniform(1.5e-8, 4e-8)),
            Normal(m := float(rng.uniform(0.4, 0.95)), cv * m),
            Normal(1.25e7, bw_cv * 1.25e7) if p < k - 1 else None,
            Normal(1.1e7, bw_cv * 1.1e7) if p > 0 else None,
            5e-4,
        )
        for p in range(k)
    ]


@pytest.mark.parametrize("model", ["sor", "jacobi2d"])
def test_model_predictions_agree_across_engines(model: str) -> None:
    """Whole-model check (16 hosts, normal inputs with small spreads): means
    within 1 %, stds within 8 % (the analytic max fits each host's skewness with
    three moments; see ppe.core.analytic)."""
    hs = stochastic_hosts(16)
    rows = [250] * 16
    a = predict(model, {"n": N, "iterations": ITERS}, hs, rows, engine="analytic")
    m = predict(
        model, {"n": N, "iterations": ITERS}, hs, rows, engine="mc", samples=100_000, seed=1
    )
    assert (a.engine, m.engine, m.samples, m.seed) == ("analytic", "mc", 100_000, 1)
    for x, y in [(a.makespan, m.makespan), *zip(a.per_host, m.per_host, strict=True)]:
        assert x.mean() == pytest.approx(y.mean(), rel=0.01)
        assert x.std() == pytest.approx(y.std(), rel=0.08)


def test_auto_engine_prefers_numeric_and_says_why_not() -> None:
    params = {"n": N, "iterations": ITERS}
    # independent hosts: the exact numeric engine, whatever the spread or shape
    assert predict("sor", params, stochastic_hosts(4), [500] * 4).engine == "numeric"
    wide = predict("sor", params, stochastic_hosts(4, cv=0.3), [500] * 4)
    assert wide.engine == "numeric" and wide.samples is None and wide.note is None
    hs = stochastic_hosts(4)
    hs[2] = replace(hs[2], cpu=Mixture([0.5, 0.5], [0.3, 0.9], [0.02, 0.02]))
    assert predict("sor", params, hs, [500] * 4).engine == "numeric"
    with pytest.raises(ParameterError):
        predict("sor", params, hs, [500] * 4, engine="analytic")
    # two hosts given the same bandwidth object: their times share an input, so
    # the max is not of independent values; analytic (Clark) takes it
    link = Normal(1.25e7, 1e6)
    pair = [
        HostInputs("a", 2e-8, Normal(0.8, 0.04), bw_next=link, latency=5e-4),
        HostInputs("b", 3e-8, Normal(0.7, 0.03), bw_prev=link, latency=5e-4),
    ]
    two = predict("sor", params, pair, [500, 500])
    assert two.engine == "analytic" and two.note is not None
    assert two.note.startswith("analytic because numeric:") and "share an input" in two.note
    # four hosts on it: analytic hands over too (pairwise Clark is inaccurate)
    shared = [
        HostInputs(
            f"h{p}", 2e-8, Normal(0.8, 0.04), link if p < 3 else None, link if p > 0 else None, 5e-4
        )
        for p in range(4)
    ]
    many = predict("sor", params, shared, [250] * 4)
    assert many.engine == "mc" and many.samples == 20_000 and many.seed == 0
    assert many.note is not None and "numeric:" in many.note and "analytic:" in many.note
    with pytest.raises(ParameterError) as info:
        predict("sor", params, shared, [250] * 4, engine="numeric")
    assert info.value.name == "engine" and "share an input" in info.value.message


def test_availability_floor_keeps_quotients_finite() -> None:
    """A normal forecast with mass at/below zero availability: availability is
    floored at 0.01, so the prediction stays finite; the floor's mass becomes a
    point mass at the slowest time, in both engines."""
    hs = [HostInputs("h", 1e-8, Normal(0.05, 0.05))]
    top = 100 * 100 * 1e-8 / 0.01
    exact = predict("sor", {"n": 100, "I": 1}, hs, [100])
    mc = predict("sor", {"n": 100, "I": 1}, hs, [100], engine="mc")
    assert exact.engine == "numeric" and np.isfinite(exact.makespan.mean())
    assert exact.makespan.ppf(1.0) == pytest.approx(top, rel=1e-12)
    assert mc.makespan.ppf(1.0) == pytest.approx(top)
    atom = Normal(0.05, 0.05).cdf(0.01)  # P(availability <= floor)
    assert 1.0 - exact.makespan.cdf(top * (1 - 1e-9)) == pytest.approx(atom, rel=1e-9)
    assert np.mean(mc.makespan.array == top) == pytest.approx(atom, abs=0.01)  # type: ignore[attr-defined]
    assert exact.makespan.mean() == pytest.approx(mc.makespan.mean(), rel=0.01)


def bimodal_hosts(cpu0: object) -> list[HostInputs]:
    return [
        HostInputs(
            f"h{p}",
            2e-8,
            cpu0 if p == 0 else Normal(0.9, 0.02),
            Point(1.25e7) if p < 3 else None,
            Point(1.25e7) if p > 0 else None,
            5e-4,
        )
        for p in range(4)
    ]


def test_bimodal_availability_gives_a_wide_two_humped_prediction() -> None:
    params = {"n": N, "iterations": ITERS}
    rows = [1000] * 4
    fast, slow, w_slow = 0.9, 0.3, 0.3
    mix = Mixture([1 - w_slow, w_slow], [fast, slow], [0.02, 0.02])
    bimodal = predict("sor", params, bimodal_hosts(mix), rows, engine="mc", seed=3)
    steady = predict("sor", params, bimodal_hosts(Normal(fast, 0.02)), rows)
    assert isinstance(bimodal.makespan, Samples)

    lo, hi = bimodal.makespan.interval(0.95)
    s_lo, s_hi = steady.makespan.interval(0.95)
    assert hi - lo > 5 * (s_hi - s_lo)

    # two humps: host 0 fast (the steady makespan) and host 0 slow (host 0 is
    # an end host: one neighbour)
    x = bimodal.makespan.array
    half = ITERS * 1000 * N / 2 * 2e-8
    slow_hump = ITERS * 2 * (N * SIZE / 1.25e7 + 5e-4) + 2 * half / slow
    split = 0.5 * (steady.makespan.mean() + slow_hump)
    counts, edges = np.histogram(x, bins=60)
    centres = 0.5 * (edges[1:] + edges[:-1])
    valley = counts[(centres > 1.3 * steady.makespan.mean()) & (centres < 0.8 * slow_hump)]
    assert counts[centres < split].max() > 20 * valley.max()
    assert counts[centres >= split].max() > 20 * valley.max()
    assert np.mean(x > split) == pytest.approx(w_slow, abs=0.02)
    humps = fit_distribution(x)  # the forecaster's BIC fit finds the two modes too
    assert humps.multimode and len(humps.components) == 2
    assert humps.components[1][0] == pytest.approx(w_slow, abs=0.02)

    # A normal fit would miss the modes.  Of the prediction: N(mean, std) peaks
    # in the empty valley and gives the slow hump a fraction of its mass.
    m, s = bimodal.makespan.mean(), bimodal.makespan.std()
    assert np.mean(np.abs(x - m) < 0.25 * s) < 0.01
    band = np.array([0.9 * slow_hump, 1.1 * slow_hump])
    true_mass = float(np.mean((x > band[0]) & (x < band[1])))
    normal_mass = float(np.diff(Normal(m, s).cdf(band))[0])
    assert true_mass > 0.25 and normal_mass < 0.5 * true_mass
    # Of the input: a normal availability with the mixture's mean and std gives
    # a one-hump prediction that almost never lands on the slow mode.
    as_normal = Normal(mix.mean(), mix.std())
    one_hump = predict("sor", params, bimodal_hosts(as_normal), rows, engine="mc", seed=3).makespan
    y = one_hump.array  # type: ignore[attr-defined]
    assert np.mean((y > band[0]) & (y < band[1])) < 0.25 * true_mass


@pytest.mark.parametrize("engine", ["numeric", "analytic", "mc"])
def test_linear_host_models_match_predictions(engine: str) -> None:
    hs = stochastic_hosts(6)
    params = {"n": N, "iterations": ITERS}
    models = linear_host_models("sor", params, hs, engine=engine, seed=5)
    rows = [300, 900, 10, 450, 0, 2000]
    pred = predict("sor", params, hs, rows, engine=engine, seed=5)
    for (a, b), r, t in zip(models, rows, pred.per_host, strict=True):
        assert b.mean() > 0 and a.mean() > 0
        assert r * a.mean() + b.mean() == pytest.approx(t.mean(), rel=1e-9)
        # a depends on the CPU only, b on the links only: independent
        assert np.hypot(r * a.std(), b.std()) == pytest.approx(
            t.std(), rel=0.01 if engine == "mc" else 1e-6
        )
    # dedicated: a = I * n * Benchmark / cpu exactly
    (a0, b0), *_ = linear_host_models("sor", params, dedicated_hosts())
    assert a0.mean() == pytest.approx(ITERS * N * BENCH[0] / CPU[0], rel=1e-9)
    assert b0.mean() == pytest.approx(ITERS * 2 * (N * SIZE / BW_NEXT[0] + LAT[0]), rel=1e-9)  # type: ignore[operator]


def test_linear_host_models_reject_non_affine_models() -> None:
    text = "HostTime[p] = rows[p] * rows[p]\nExecTime = max(p in hosts: HostTime[p])\n"
    with pytest.raises(ParameterError) as info:
        linear_host_models(text, {}, dedicated_hosts())
    assert info.value.name == "HostTime"


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"params": {"n": N}}, "I"),
        ({"params": {"n": N, "I": 10, "bogus": 1}}, "bogus"),
        ({"params": {"n": -5, "I": 10}}, "n"),
        ({"params": {"n": N, "iterations": 2.5}}, "I"),
        ({"allocation": [1, 2, 3]}, "allocation"),
        ({"allocation": [1, 2, 3, -4]}, "allocation[3]"),
        ({"allocation": [1, 2, 3, 4.5]}, "allocation[3]"),
        ({"engine": "fast"}, "engine"),
        ({"samples": 10}, "samples"),
        ({"model": "nope"}, "model"),
    ],
)
def test_bad_parameters_name_the_culprit(kwargs: dict[str, object], name: str) -> None:
    args: dict[str, object] = {
        "model": "sor",
        "params": {"n": N, "I": ITERS},
        "hosts": dedicated_hosts(),
        "allocation": ROWS,
    }
    args.update(kwargs)
    with pytest.raises(ParameterError) as info:
        predict(**args)  # type: ignore[arg-type]
    assert info.value.name == name
    assert info.value.to_dict()["type"] == "parameter"


def test_bad_host_inputs_name_the_field() -> None:
    hs = dedicated_hosts()
    hs[2] = HostInputs("h2", -1.0, Point(0.5))
    with pytest.raises(ParameterError) as info:
        predict("sor", {"n": N, "I": 1}, hs, ROWS)
    assert info.value.name == "hosts[2].benchmark"
    hs[2] = HostInputs("h2", 1e-8, Normal(-0.5, 0.1))
    with pytest.raises(ParameterError) as info:
        predict("sor", {"n": N, "I": 1}, hs, ROWS)
    assert info.value.name == "hosts[2].cpu"


def test_prediction_to_dict() -> None:
    hs = stochastic_hosts(3)
    pred = predict("sor", {"n": N, "I": ITERS}, hs, [100, 200, 300], engine="analytic")
    d = pred.to_dict(0.9)
    assert d["engine"] == "analytic" and d["samples"] is None
    assert [h["host"] for h in d["hosts"]] == ["h0", "h1", "h2"]
    assert d["makespan"]["confidence"] == 0.9 and d["makespan"]["kind"] == "normal"
    d = predict("sor", {"n": N, "I": ITERS}, hs, [100, 200, 300]).to_dict(0.9)
    assert d["engine"] == "numeric" and d["samples"] is None and d["note"] is None
    ms = d["makespan"]
    assert set(ms) == {"mean", "std", "interval", "confidence", "kind", "components"}
    assert ms["kind"] == "numeric" and ms["confidence"] == 0.9
    assert ms["components"] == [{"weight": 1.0, "mean": ms["mean"], "std": ms["std"]}]
    assert ms["interval"][0] < ms["mean"] < ms["interval"][1]
    assert all(h["time"]["kind"] == "numeric" for h in d["hosts"])
