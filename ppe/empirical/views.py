"""What the dashboard's Models page draws, computed here so that the page and its data route
hold no modelling: a slice of the runs along one parameter, the fitted curve with its
prediction band and an extrapolated point, Prophecy's two-range surface, and the coupling
table of an application's kernels run alone and in pairs (kernel ``"A+B"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .coupling import Pair, coupling_stability, loop_coupling, pair_coupling
from .data import Measurements
from .errors import CouplingError, EmpiricalError
from .model import EmpiricalModel
from .prophecy import PROPHECY_TYPES, fit_graph_type
from .search import search

FloatArray = npt.NDArray[np.float64]
#: The automatic choice: the normal-form search (Prophecy's own is ``unknown``).
SEARCH = "search"
VIEW_TYPES: tuple[str, ...] = (SEARCH, *PROPHECY_TYPES)
#: Curve samples, surface samples per side, and how far beyond the largest measured value
#: the curve runs and the default extrapolated point lies.
CURVE_POINTS = 120
SURFACE_POINTS = 30
EXTRAPOLATE = 2.0
PAIR_SEPARATOR = "+"


@dataclass(frozen=True)
class Run:
    """One stored run as the views see it: kernel, parameter values, repetitions."""

    kernel: str
    params: Mapping[str, float]
    values: Sequence[float]


def common_params(runs: Sequence[Run]) -> tuple[str, ...]:
    """The parameters every run gives (sorted): the ones a model can use."""
    if not runs:
        return ()
    keys = set(runs[0].params).intersection(*(set(r.params) for r in runs[1:]))
    return tuple(sorted(keys))


def measurements(runs: Sequence[Run], params: Sequence[str]) -> Measurements:
    """Every repetition of ``runs`` as a point over ``params``."""
    pairs = [(r.params, v) for r in runs for v in r.values]
    if not pairs:
        raise EmpiricalError("no measured values for this kernel")
    return Measurements.from_runs(params, pairs)


def distinct_values(data: Measurements) -> dict[str, list[float]]:
    return {p: sorted(set(data.column(p).tolist())) for p in data.params}


def hold_fixed(
    data: Measurements, keep: Sequence[str], fixed: Mapping[str, float] | None = None
) -> tuple[Measurements, dict[str, float]]:
    """The points where the parameters not in ``keep`` take one value each (``fixed``, else
    the combination with the most distinct values of ``keep``), over ``keep`` alone."""
    others = [p for p in data.params if p not in keep]
    for p in keep:
        data.index(p)  # an unknown parameter is named
    if others and fixed is None:
        combos: dict[tuple[float, ...], set[tuple[float, ...]]] = {}
        for row in data.points:
            key = tuple(float(row[data.index(p)]) for p in others)
            combos.setdefault(key, set()).add(tuple(float(row[data.index(p)]) for p in keep))
        best = max(combos, key=lambda k: (len(combos[k]), [-v for v in k]))
        fixed = dict(zip(others, best, strict=True))
    held = {p: float((fixed or {})[p]) for p in others if p in (fixed or {})}
    missing = [p for p in others if p not in held]
    if missing:
        raise EmpiricalError(f"give a value for {missing[0]!r} to hold it fixed", name=missing[0])
    mask = np.ones(data.n_points, dtype=bool)
    for p, v in held.items():
        mask &= data.column(p) == v
    sub = data.select(mask)
    cols = [sub.index(p) for p in keep]
    return (
        Measurements(tuple(keep), sub.points[:, cols], sub.values, sub.means, sub.stds, sub.counts),
        held,
    )


def fit(data: Measurements, kind: str) -> EmpiricalModel:
    """The search, or one of Prophecy's 13 choices (one parameter)."""
    if kind == SEARCH:
        return search(data)
    if kind not in PROPHECY_TYPES:
        raise EmpiricalError(f"unknown graph type {kind!r}; expected one of {list(VIEW_TYPES)}")
    return fit_graph_type(data, kind)


def axis(lo: float, hi: float, n: int) -> FloatArray:
    """``n`` values from ``lo`` to ``hi``: geometric when both are > 0 and span a factor of 4
    or more (measured sizes usually double), else even."""
    if lo > 0 and hi / lo >= 4:
        return np.geomspace(lo, hi, n)
    return np.linspace(lo, hi, n)


def _band(
    model: EmpiricalModel, points: list[dict[str, float]], confidence: float
) -> dict[str, Any]:
    mean, std = model.predict_arrays(points)
    t = model.t_quantile(confidence)
    finite = bool(np.isfinite(std).all() and np.isfinite(t))
    return {
        "mean": mean.tolist(),
        "lower": (mean - t * std).tolist() if finite else None,
        "upper": (mean + t * std).tolist() if finite else None,
    }


def _finite(v: float) -> float | None:
    """JSON has no infinity: an interval without degrees of freedom has no bounds."""
    return float(v) if np.isfinite(v) else None


def curve(
    model: EmpiricalModel,
    data: Measurements,
    at: float | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """The measured points of a one-parameter slice, the model's curve and prediction band
    from the smallest measured value to the extrapolated point (default: twice the largest)."""
    [x] = data.params
    col = data.column(x)
    lo, hi = float(col.min()), float(col.max())
    target = EXTRAPOLATE * hi if at is None else float(at)
    xs = axis(min(lo, target), max(hi, target), CURVE_POINTS)
    band = _band(model, [{x: float(v)} for v in xs], confidence)
    pred = model.predict({x: target}, confidence).to_dict()
    pred["std"] = _finite(pred["std"])
    pred["interval"] = [_finite(v) for v in pred["interval"]]
    return {
        "x": x,
        "points": [
            {"x": float(col[k]), "values": data.values[k].tolist(), "mean": float(data.means[k])}
            for k in np.argsort(col)
        ],
        "curve": {"x": xs.tolist(), **band},
        "extrapolated": pred,
        "confidence": confidence,
    }


def surface(model: EmpiricalModel, data: Measurements, confidence: float = 0.95) -> dict[str, Any]:
    """Prophecy's two-range plot: the model's mean over both parameters, from their smallest
    measured values to twice their largest, with the measured point means."""
    x, y = data.params
    xs = axis(
        float(data.column(x).min()), EXTRAPOLATE * float(data.column(x).max()), SURFACE_POINTS
    )
    ys = axis(
        float(data.column(y).min()), EXTRAPOLATE * float(data.column(y).max()), SURFACE_POINTS
    )
    gx, gy = np.meshgrid(xs, ys)
    points = [{x: float(a), y: float(b)} for a, b in zip(gx.ravel(), gy.ravel(), strict=True)]
    mean, _ = model.predict_arrays(points)
    return {
        "x": x,
        "y": y,
        "xs": xs.tolist(),
        "ys": ys.tolist(),
        "z": mean.reshape(gy.shape).tolist(),
        "points": {
            "x": data.column(x).tolist(),
            "y": data.column(y).tolist(),
            "mean": data.means.tolist(),
        },
        "formula": model.formula,
        "confidence": confidence,
    }


def describe(model: EmpiricalModel) -> dict[str, Any]:
    return {
        "type": model.kind,
        "formula": model.formula,
        "params": list(model.params),
        "cv_error": model.cv_error,
        "residual_norm": model.residual_norm,
        "n_points": model.n_points,
        "n_obs": model.n_obs,
        "noise": model.noise,
        "dof": model.dof,
    }


# ------------------------------------------------------------------ coupling


def split_pair(kernel: str) -> Pair | None:
    """``"A+B"`` names kernels A and B run together; anything else is a kernel alone."""
    parts = kernel.split(PAIR_SEPARATOR)
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        return None
    return parts[0], parts[1]


def _loop_order(pairs: Sequence[Pair]) -> list[str] | None:
    """The kernels of a loop whose adjacent pairs are exactly ``pairs``, else None."""
    if len(pairs) == 1:
        return list(pairs[0])
    links: dict[str, list[str]] = {}
    for a, b in pairs:
        links.setdefault(a, []).append(b)
        links.setdefault(b, []).append(a)
    if any(len(v) != 2 for v in links.values()):
        return None
    start = min(links)
    order, prev = [start], None
    while True:
        here = order[-1]
        nxt = links[here][0] if links[here][0] != prev else links[here][1]
        if nxt == start:
            break
        prev = here
        order.append(nxt)
    return order if len(order) == len(links) else None


def coupling_table(runs: Sequence[Run], params: Sequence[str]) -> dict[str, Any] | None:
    """Per input (a parameter point where pairs were run), each pair's ``C_AB = P_AB / (P_A +
    P_B)`` from the mean times; when the pairs form one loop, each kernel's coefficient and
    whether the couplings are stable across inputs.  None without pair runs."""
    means: dict[tuple[str, tuple[float, ...]], list[float]] = {}
    for r in runs:
        if not all(p in r.params for p in params):
            continue
        point = tuple(float(r.params[p]) for p in params)
        means.setdefault((r.kernel, point), []).extend(float(v) for v in r.values)
    time = {key: float(np.mean(vals)) for key, vals in means.items() if vals}
    pairs = sorted({pair for k, _ in time if (pair := split_pair(k)) is not None})
    if not pairs:
        return None
    points = sorted({pt for k, pt in time if split_pair(k) is not None})
    rows = []
    loops: dict[str, Any] = {}
    order = _loop_order(pairs)
    for pt in points:
        label = ", ".join(f"{p}={v:g}" for p, v in zip(params, pt, strict=True)) or "all"
        cells: dict[str, float | None] = {}
        for a, b in pairs:
            found = [time.get((k, pt)) for k in (f"{a}+{b}", a, b)]
            known = [t for t in found if t is not None]
            cells[f"{a}+{b}"] = pair_coupling(*known) if len(known) == 3 else None
        row: dict[str, Any] = {"input": label, "point": dict(zip(params, pt, strict=True))}
        row["couplings"] = cells
        if order is not None and all(v is not None for v in cells.values()):
            alone = {k: time[(k, pt)] for k in order}
            together = {pair: time[(f"{pair[0]}+{pair[1]}", pt)] for pair in pairs}
            try:
                lc = loop_coupling(order, alone, together)
            except CouplingError:
                lc = None
            if lc is not None:
                loops[label] = lc
                row["coefficients"] = dict(lc.coefficients)
        rows.append(row)
    out: dict[str, Any] = {
        "pairs": [f"{a}+{b}" for a, b in pairs],
        "loop": order,
        "rows": rows,
        "stability": None,
    }
    if len(loops) >= 2:
        stab = coupling_stability(loops)
        out["stability"] = {"stable": stab.stable, "message": stab.message()}
    return out
