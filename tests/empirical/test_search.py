"""The normal-form search: exact single terms, recovery of true terms on noisy data, choice rules."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ppe.empirical.data import Measurements
from ppe.empirical.search import search, search_all
from ppe.empirical.terms import LOG_EXPONENTS, POLY_EXPONENTS, Factor, Term

POINTS = np.array([2.0, 4.0, 8.0, 16.0, 32.0])
PAIRS = [(i, j) for i in POLY_EXPONENTS for j in LOG_EXPONENTS if (i, j) != (0, 0)]


@pytest.mark.parametrize("i,j", PAIRS, ids=[f"{i}-{j}" for i, j in PAIRS])
def test_every_single_term_is_recovered_exactly(i: Fraction, j: int) -> None:
    term = Term.of(Factor("n", i, j))
    y = 2.5 + 0.75 * term.evaluate({"n": POINTS})
    model = search(Measurements.from_arrays(["n"], POINTS, y))
    assert model.terms == (term,)
    np.testing.assert_allclose(model.coefficients, [2.5, 0.75], rtol=1e-7)


def noisy(
    fn, names: list[str], xs: np.ndarray, cv: float, seed: int, reps: int = 5
) -> Measurements:  # type: ignore[no-untyped-def]
    """``reps`` runs per point with multiplicative normal noise of relative std ``cv``."""
    rng = np.random.default_rng(seed)
    x = np.repeat(xs.reshape(len(xs), -1), reps, axis=0)
    mu = np.array([fn(*row) for row in x])
    return Measurements.from_arrays(names, x, mu * (1 + cv * rng.standard_normal(mu.size)))


# The search was developed on seeds 0..340; these seeds were drawn afterwards.  At 1 % noise
# the recovery rates measured over seeds 300..339 were 100 % (n^2 log n), 97.5 % (p^(1/2))
# and 100 % (two parameters, seeds 300..319).
@pytest.mark.parametrize("seed", [1001, 1002])
def test_search_recovers_n2_log_n_on_noisy_data(seed: int) -> None:
    data = noisy(lambda n: 4 + 0.05 * n**2 * np.log2(n), ["n"], 2.0 ** np.arange(1, 8), 0.01, seed)
    model = search(data)
    assert [str(t) for t in model.terms] == ["n^2 * log2(n)"]
    assert model.coefficients[1] == pytest.approx(0.05, rel=0.05)


@pytest.mark.parametrize("seed", [1001, 1002])
def test_search_recovers_sqrt_p(seed: int) -> None:
    data = noisy(lambda p: 10 + 3 * p**0.5, ["p"], 2.0 ** np.arange(1, 11), 0.01, seed)
    assert [str(t) for t in search(data).terms] == ["p^(1/2)"]


@pytest.mark.parametrize("seed", [1001, 1002])
def test_search_recovers_terms_of_two_parameters(seed: int) -> None:
    grid = np.array([(a, b) for a in 2.0 ** np.arange(3, 9) for b in 2.0 ** np.arange(1, 7)])
    data = noisy(lambda n, p: 1 + 0.002 * n**2 + 3 * p**0.5, ["n", "p"], grid, 0.01, seed)
    assert sorted(str(t) for t in search(data).terms) == ["n^2", "p^(1/2)"]


def test_fewer_terms_win_when_the_data_cannot_tell() -> None:
    """A line at 2 % noise: three-term sums fit the means better, the line must still win.

    Selection among ~11 000 sums overfits now and then, so the property is a rate:
    at least 9 of 10 fresh seeds.
    """
    wins = 0
    for seed in range(1003, 1013):
        result = search_all(noisy(lambda n: 10 + 2 * n, ["n"], 2.0 ** np.arange(1, 9), 0.02, seed))
        assert result.ranked[0].score < min(
            s.score for s in result.ranked if [str(t) for t in s.terms] == ["n"]
        )
        wins += [str(t) for t in result.model.terms] == ["n"]
    assert wins >= 9


def test_chosen_model_keeps_its_score_and_alternatives() -> None:
    data = noisy(lambda n: 1 + n**1.5, ["n"], 2.0 ** np.arange(1, 9), 0.05, 1004)
    result = search_all(data)
    assert result.model.cv_error == min(
        s.score for s in result.ranked if s.terms == result.model.terms
    )
    for alt in result.model.alternatives:
        assert len(alt.terms) == len(result.model.terms)
