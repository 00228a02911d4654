"""Leave-one-point-out errors of many least-squares hypotheses at once.

For weighted least squares the leave-one-out residual of point ``i`` is
``e_i / (1 - h_ii)`` (``e`` the full-fit residual, ``h`` the hat matrix of the
weighted design), so one fit per hypothesis gives all its folds.  Hypotheses of
the same size are stacked and orthonormalised together by Gram-Schmidt (twice,
for stability), which for designs of at most four columns is much faster than a
LAPACK call per hypothesis.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: A column that keeps less than this fraction of its norm after projection is dependent.
DEPENDENT = 1e-9
#: A point with leverage this close to 1 has no leave-one-out prediction.
FULL_LEVERAGE = 1e-9


def loo_residuals(
    columns: FloatArray,
    y: FloatArray,
    w: FloatArray,
    hyps: IntArray,
    var: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Leave-one-out residuals ``y_i - yhat_(-i)``, shape ``(H, m)``, of ``c0 + sum c col_h``.

    ``columns`` is ``(m, K)``, ``hyps`` is ``(H, s)`` (column indices per hypothesis,
    ``s`` may be 0 for the constant alone), ``w`` the weights.  Hypotheses whose
    columns are dependent at these points, or that leave some point with no
    leave-one-out prediction, get ``inf`` residuals.

    Also returns the std each leave-one-out residual would have from noise alone if
    the hypothesis were true and ``y_i`` had variance ``var_i`` (zeros without
    ``var``).  With ``G = QQ'`` the weighted hat matrix, ``e = (I - P) y`` where
    ``P_ij = sqrt(w_j / w_i) G_ij``, so ``Var(e_i) = var_i (1 - 2 G_ii) +
    sum_j (w_j / w_i) G_ij^2 var_j``, and the leave-one-out residual is
    ``e_i / (1 - G_ii)``.  The sum is ``q_i' (Q' diag(w var) Q) q_i``.
    """
    m = y.size
    h_count, s = hyps.shape
    sw = np.sqrt(w)
    # Layout (H, k, m): each hypothesis' columns are contiguous rows.
    x = np.empty((h_count, s + 1, m))
    x[:, 0, :] = sw
    if s:
        x[:, 1:, :] = np.transpose(columns[:, hyps], (1, 2, 0)) * sw
    x /= np.linalg.norm(x, axis=2, keepdims=True)
    ok = np.ones(h_count, dtype=bool)
    for j in range(1, s + 1):
        v = x[:, j : j + 1, :]
        for _ in range(2):
            coef = v @ x[:, :j, :].transpose(0, 2, 1)  # (H, 1, j)
            v = v - coef @ x[:, :j, :]
        norm = np.linalg.norm(v[:, 0, :], axis=1)
        ok &= norm > DEPENDENT
        x[:, j, :] = v[:, 0, :] / np.where(norm > 0, norm, 1.0)[:, None]
    yw = y * sw
    fitted = ((x @ yw)[:, None, :] @ x)[:, 0, :]
    lev = np.sum(x * x, axis=1)
    ok &= (lev < 1.0 - FULL_LEVERAGE).all(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = (yw - fitted) / (1.0 - lev) / sw
    loo[~ok] = np.inf
    if var is None:
        return np.asarray(loo, dtype=np.float64), np.zeros_like(loo)
    inner = (x * (w * var)) @ x.transpose(0, 2, 1)  # (H, k, k)
    spread = np.sum((inner @ x) * x, axis=1) / w
    with np.errstate(divide="ignore", invalid="ignore"):
        noise = np.sqrt(np.maximum(var * (1.0 - 2.0 * lev) + spread, 0.0)) / (1.0 - lev)
    noise[~ok] = 0.0
    return np.asarray(loo, dtype=np.float64), np.asarray(noise, dtype=np.float64)
