"""Distribution fitting: bimodal hosts are multi-mode, steady ones are not; the rules behind it."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster import Distribution, consolidate, fit_distribution
from ppe.traces import Trace

from ..conftest import TRACE_NAMES
from .conftest import BIMODAL, STEADY


@pytest.mark.parametrize("name", BIMODAL)
def test_bimodal_traces_are_multimode(traces: dict[str, Trace], name: str) -> None:
    d = fit_distribution(traces[name].availability)
    assert d.multimode and d.kind == "mixture"
    means = sorted(m for _, m, _ in d.components)
    assert means[0] < 0.2 and means[-1] > 0.9  # saturated and idle modes
    assert sum(w for w, _, _ in d.components) == pytest.approx(1.0)
    assert d.bic and min(d.bic, key=d.bic.__getitem__) > 1  # BIC alone wanted several


@pytest.mark.parametrize("name", STEADY)
def test_steady_traces_are_not_multimode(traces: dict[str, Trace], name: str) -> None:
    d = fit_distribution(traces[name].availability)
    assert not d.multimode and d.kind in ("normal", "point")


@pytest.mark.parametrize("name", [n for n in ("11", "4") if n in TRACE_NAMES])
def test_steady_trace_where_bic_overfits(traces: dict[str, Trace], name: str) -> None:
    """Traces 11 and 4 sit at 0.98 +- 0.004 and 0.99 +- 0.005; BIC prefers three or four
    components, consolidation keeps one."""
    d = fit_distribution(traces[name].availability)
    assert min(d.bic, key=d.bic.__getitem__) >= 3
    assert d.kind == "normal" and d.std == pytest.approx(traces[name].availability.std())


def test_synthetic_modes() -> None:
    rng = np.random.default_rng(1)
    two = np.concatenate([rng.normal(0.3, 0.03, 600), rng.normal(0.9, 0.03, 400)])
    d = fit_distribution(two)
    assert d.kind == "mixture" and len(d.components) == 2
    (w1, m1, s1), (w2, m2, s2) = sorted(d.components, key=lambda c: c[1])
    assert (w1, m1, m2) == (
        pytest.approx(0.6, abs=0.03),
        pytest.approx(0.3, abs=0.01),
        pytest.approx(0.9, abs=0.01),
    )
    assert d.interval(0.95)[0] < 0.3 < 0.9 < d.interval(0.95)[1]
    one = fit_distribution(rng.normal(0.7, 0.05, 1000))
    assert one.kind == "normal" and not one.multimode
    lo, hi = one.interval(0.95)
    assert lo == pytest.approx(0.7 - 1.96 * 0.05, abs=0.01)
    assert hi == pytest.approx(0.7 + 1.96 * 0.05, abs=0.01)
    assert fit_distribution([0.5] * 20).kind == "point"
    assert fit_distribution([0.5]).kind == "point"


def test_consolidate_rules() -> None:
    # a light component is folded in; weights and moments are preserved
    comps = consolidate([(0.97, 0.9, 0.02), (0.03, 0.1, 0.02)])
    assert len(comps) == 1
    w, mu, sd = comps[0]
    assert w == pytest.approx(1.0) and mu == pytest.approx(0.97 * 0.9 + 0.03 * 0.1)
    assert sd > 0.1
    # far apart relative to their widths but only 10 % apart in level: one mode
    assert len(consolidate([(0.5, 0.80, 0.001), (0.5, 0.88, 0.001)])) == 1
    # 25 %+ apart in level but overlapping (Ashman D < 2): one mode
    assert len(consolidate([(0.5, 0.5, 0.2), (0.5, 0.8, 0.2)])) == 1
    # well separated on both counts: two modes
    assert len(consolidate([(0.5, 0.3, 0.05), (0.5, 0.8, 0.05)])) == 2


def test_mixture_quantiles_match_sampling() -> None:
    d = Distribution("mixture", [(0.3, 0.05, 0.02), (0.7, 0.95, 0.03)], 0.68, 0.41, True, 100)
    rng = np.random.default_rng(0)
    draws = np.where(
        rng.random(200_000) < 0.3, rng.normal(0.05, 0.02, 200_000), rng.normal(0.95, 0.03, 200_000)
    )
    for q in (0.025, 0.2, 0.5, 0.975):
        assert d.ppf(q) == pytest.approx(np.quantile(draws, q), abs=0.005)
    components = d.to_dict()["components"]
    assert isinstance(components, list)  # to_dict() is typed dict[str, object]
    assert components[1] == {"weight": 0.7, "mean": 0.95, "std": 0.03}
