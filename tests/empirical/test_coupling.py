"""Kernel coupling per Prophecy's formulas, on a hand example."""

from __future__ import annotations

import pytest

from ppe.empirical.coupling import coupling_stability, loop_coupling, pair_coupling
from ppe.empirical.errors import CouplingError

ALONE = {"A": 10.0, "B": 20.0, "C": 5.0}
PAIRS = {("A", "B"): 27.0, ("B", "C"): 27.5, ("C", "A"): 18.0}


def test_pair_coupling_is_pair_time_over_the_sum() -> None:
    assert pair_coupling(27.0, 10.0, 20.0) == pytest.approx(0.9)


def test_three_kernel_loop_by_hand() -> None:
    lc = loop_coupling(["A", "B", "C"], ALONE, PAIRS)
    c_ab, c_bc, c_ca = 27 / 30, 27.5 / 25, 18 / 15
    assert lc.couplings == pytest.approx({("A", "B"): c_ab, ("B", "C"): c_bc, ("C", "A"): c_ca})
    psi = (c_ab * 27 + c_ca * 18) / (27 + 18)
    zeta = (c_ab * 27 + c_bc * 27.5) / (27 + 27.5)
    kappa = (c_bc * 27.5 + c_ca * 18) / (27.5 + 18)
    assert lc.coefficients == pytest.approx({"A": psi, "B": zeta, "C": kappa})
    assert lc.predict(ALONE) == pytest.approx(psi * 10 + zeta * 20 + kappa * 5)


def test_four_kernels_and_pairs_in_either_order() -> None:
    alone = {"A": 1.0, "B": 2.0, "C": 3.0, "D": 4.0}
    pairs = {("B", "A"): 3.3, ("B", "C"): 4.5, ("C", "D"): 7.7, ("A", "D"): 5.0}
    lc = loop_coupling(["A", "B", "C", "D"], alone, pairs)
    c_ab, c_da = 3.3 / 3, 5.0 / 5
    assert lc.coefficients["A"] == pytest.approx((c_ab * 3.3 + c_da * 5.0) / (3.3 + 5.0))


def test_pair_never_run() -> None:
    with pytest.raises(CouplingError, match="never run as a pair"):
        loop_coupling(["A", "B", "C"], ALONE, {("A", "B"): 27.0, ("B", "C"): 27.5})


def test_isocoupling_stability() -> None:
    small = loop_coupling(["A", "B", "C"], ALONE, PAIRS)
    same = loop_coupling(
        ["A", "B", "C"], {k: 2 * v for k, v in ALONE.items()}, {k: 2 * v for k, v in PAIRS.items()}
    )
    drift = loop_coupling(["A", "B", "C"], ALONE, {**PAIRS, ("B", "C"): 40.0})
    assert coupling_stability({"n=100": small, "n=200": same}).stable
    unstable = coupling_stability({"n=100": small, "n=400": drift})
    assert not unstable.stable and unstable.unstable == [("B", "C")]
    assert "B+C" in unstable.message()
