"""Real data: kernels measured on this machine (examples/runs/kernels.csv, written by
benchmarks/measure_kernels.py).  Fit on every size but the largest, predict the largest.

The bound is the model's own: the measured mean at the held-out size must lie in the 95 %
interval of a run there (which grows with the coefficients' uncertainty, the run noise, the
model's error at its own edge compounded per step beyond it, and the spread of the
alternative models).  Prophecy's auto-pick (least residual norm) is fitted alongside for the
one-parameter kernels; the search must extrapolate better than it on each.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from ppe.empirical.data import Measurements
from ppe.empirical.prophecy import fit_unknown
from ppe.empirical.search import search

DATASET = Path(__file__).resolve().parents[2] / "examples" / "runs" / "kernels.csv"


def kernels() -> dict[str, tuple[tuple[str, ...], np.ndarray, np.ndarray]]:
    groups: dict[str, list[dict[str, str]]] = {}
    with DATASET.open() as fh:
        for row in csv.DictReader(fh):
            groups.setdefault(f"{row['app']}/{row['kernel']}", []).append(row)
    out = {}
    for name, rows in groups.items():
        params = tuple(c for c in ("n", "p") if len({r[c] for r in rows}) > 1)
        x = np.array([[float(r[c]) for c in params] for r in rows])
        out[name] = (params, x, np.array([float(r["time"]) for r in rows]))
    return out


KERNELS = kernels()


def test_dataset_shape() -> None:
    with DATASET.open() as fh:
        header = next(csv.reader(fh))
    assert header == ["app", "kernel", "n", "p", "time"]
    assert {"numpy/matmul", "sor/sweep", "sor/strips"} <= set(KERNELS)
    assert KERNELS["sor/strips"][0] == ("n", "p")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_extrapolation_to_the_largest_size(name: str) -> None:
    params, x, y = KERNELS[name]
    held = x[:, 0] == x[:, 0].max()
    train = Measurements.from_arrays(params, x[~held], y[~held])
    test = Measurements.from_arrays(params, x[held], y[held])
    model = search(train)
    prophecy = fit_unknown(train) if len(params) == 1 else None
    for k in range(test.n_points):
        point = {p: float(test.points[k, j]) for j, p in enumerate(params)}
        measured = float(test.means[k])
        pred = model.predict(point)
        lo, hi = pred.interval
        assert lo <= measured <= hi, (
            f"{name} at {point}: {measured:.4g} outside [{lo:.4g}, {hi:.4g}]"
        )
        if prophecy is not None:
            ours = abs(pred.mean - measured) / measured
            theirs = abs(prophecy.predict(point).mean - measured) / measured
            assert ours < theirs, f"{name}: search {ours:.1%} vs Prophecy {theirs:.1%}"
