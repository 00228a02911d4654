"""ppe-cg's numerics without MPI: the CG is CG, strips compute what the whole grid computes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from ppe.apps.cg.numerics import (
    Problem,
    Strip,
    alpha,
    local_dot,
    matvec,
    new_strip,
    next_beta,
    relative,
    rhs_strip,
    solve_reference,
    true_residual,
    update,
)
from ppe.apps.sor.partition import block_split, firsts


def laplacian(n: int) -> sp.csr_matrix:
    """The 5-point Laplacian on an n x n grid, row-major, built independently of ppe.apps.cg."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    eye = sp.identity(n)
    return sp.csr_matrix(sp.kron(eye, t) + sp.kron(t, eye))


def textbook_cg(n: int, iterations: int) -> np.ndarray:
    a = laplacian(n)
    b = rhs_strip(Problem(n), 0, n)[1:-1, 1:-1].ravel()
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rr = r @ r
    for _ in range(iterations):
        q = a @ p
        al = rr / (p @ q)
        x += al * p
        r -= al * q
        rr_new = r @ r
        p = r + rr_new / rr * p
        rr = rr_new
    return x.reshape(n, n)


@pytest.mark.parametrize(("n", "iterations"), [(1, 1), (7, 5), (20, 30)])
def test_reference_is_textbook_cg(n: int, iterations: int) -> None:
    ref = solve_reference(Problem(n), iterations)
    expected = textbook_cg(n, iterations)
    np.testing.assert_allclose(ref.x[1:-1, 1:-1], expected, rtol=1e-10, atol=1e-14)
    assert not ref.x[0].any() and not ref.x[-1].any()
    assert not ref.x[:, 0].any() and not ref.x[:, -1].any()


def test_true_residual_is_b_minus_ax() -> None:
    n = 9
    ref = solve_reference(Problem(n), 6)
    b = rhs_strip(Problem(n), 0, n)[1:-1, 1:-1].ravel()
    res = b - laplacian(n) @ ref.x[1:-1, 1:-1].ravel()
    assert ref.residual == pytest.approx(np.linalg.norm(res) / np.linalg.norm(b), rel=1e-12)


def test_small_grid_converges_to_tolerance() -> None:
    ref = solve_reference(Problem(16), 120)
    assert ref.residual < 1e-10
    assert ref.history[-1] < 1e-10 < ref.history[9]
    # the recursive residual follows the true one
    assert ref.residual == pytest.approx(ref.history[-1], rel=1e-2, abs=1e-12)
    solution = np.linalg.solve(
        laplacian(16).toarray(), rhs_strip(Problem(16), 0, 16)[1:-1, 1:-1].ravel()
    )
    np.testing.assert_allclose(ref.x[1:-1, 1:-1].ravel(), solution, rtol=1e-8)


def copy_halos(strips: list[Strip], name: str) -> None:
    """What the halo exchange does: each strip's halo rows get its neighbours' edge rows."""
    for upper, lower in zip(strips, strips[1:], strict=False):
        getattr(lower, name)[0] = getattr(upper, name)[-2]
        getattr(upper, name)[-1] = getattr(lower, name)[1]


@pytest.mark.parametrize(("n", "ranks"), [(12, 3), (17, 4), (5, 5)])
def test_strips_compute_what_the_whole_grid_computes(n: int, ranks: int) -> None:
    problem, iterations = Problem(n), 15
    split = block_split(n, ranks)
    strips = [new_strip(problem, f, rows) for f, rows in zip(firsts(split), split, strict=True)]
    rr = sum(local_dot(s.r, s.r) for s in strips)
    for s in strips:
        s.rr = s.bb = rr
    copy_halos(strips, "r")
    for _ in range(iterations):
        pq = sum(matvec(s) for s in strips)
        for s in strips:
            s.pq = pq
        rr = sum(update(s, alpha(s)) for s in strips)
        copy_halos(strips, "r")
        for s in strips:
            next_beta(s, rr)
        # x's halos were never exchanged, yet hold the neighbours' edge rows exactly
        for upper, lower in zip(strips, strips[1:], strict=False):
            assert np.array_equal(lower.x[0], upper.x[-2])
            assert np.array_equal(upper.x[-1], lower.x[1])
    ref = solve_reference(problem, iterations)
    x = np.concatenate([s.x[1:-1] for s in strips])
    np.testing.assert_allclose(x, ref.x[1:-1], rtol=1e-11, atol=1e-15)
    sq = sum(true_residual(s)[0] for s in strips)
    assert relative(sq, strips[0].bb) == pytest.approx(ref.residual, rel=1e-8)
    biggest = max(true_residual(s)[1] for s in strips)
    assert biggest > 0


def test_a_signature_run_may_update_before_any_matvec() -> None:
    s = new_strip(Problem(4), 0, 4)
    s.rr = local_dot(s.r, s.r)
    assert alpha(s) == 0.0  # p·q is still 0: no division by zero
    assert update(s, alpha(s)) == pytest.approx(s.rr)
    next_beta(s, 0.0)
    next_beta(s, 1.0)  # r·r was 0: beta 0, not inf
    assert s.beta == 0.0 and np.isfinite(s.x).all()


def test_bad_problem_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Problem(0)
