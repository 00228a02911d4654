"""Coverage of single runs by the spread model's intervals, before and after calibration.

For every kernel of examples/runs/kernels.csv and synthetic sets with known
heteroscedastic noise (mean ``2 + 0.01 n^2``, std ``0.02 * (2 + 0.01 n^2)`` or
``c * n^(1/2)``, normal, 6 repetitions per size, seeds ``--seeds``), prints the
share of left-out runs inside the central 80/90/95 % intervals and the mean
interval width relative to the measured mean:

* ``mean``: the mean model's run interval (what the pipeline used before), each
  point left out and the terms refitted;
* ``original``: the spread model's normal intervals as they were, ``sqrt(std^2 +
  se_mean^2)`` (no misfit term, no calibration), same test;
* ``normal``: the same with the mean model's misfit in the scale, uncalibrated;
* ``calibrated``: the conformal intervals, nested leave-one-point-out (the left-out
  point is in neither the fit nor the calibration): the coverage a fit states.

    PYTHONPATH=. .venv/bin/python benchmarks/spread_coverage.py [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import replace
from pathlib import Path

import numpy as np

from ppe.empirical.data import Measurements
from ppe.empirical.model import fit_terms
from ppe.empirical.spread import CONFIDENCES, fit_spread, spread_coverage
from ppe.empirical.terms import Term

KERNELS = Path(__file__).resolve().parents[1] / "examples" / "runs" / "kernels.csv"


def kernels() -> dict[str, Measurements]:
    groups: dict[str, list[dict[str, str]]] = {}
    with KERNELS.open() as fh:
        for row in csv.DictReader(fh):
            groups.setdefault(f"{row['app']}/{row['kernel']}", []).append(row)
    out = {}
    for name, rows in groups.items():
        params = tuple(c for c in ("n", "p") if len({r[c] for r in rows}) > 1)
        x = np.array([[float(r[c]) for c in params] for r in rows])
        out[name] = Measurements.from_arrays(params, x, [float(r["time"]) for r in rows])
    return out


def synthetic(seed: int, shape: str, reps: int = 6) -> Measurements:
    """Mean ``2 + 0.01 n^2``; std ``0.02 * mean`` (``rel``) or ``0.5 * n^(1/2)`` (``sqrt``)."""
    rng = np.random.default_rng(seed)
    n = np.repeat(np.array([16, 24, 32, 48, 64, 96, 128, 192, 256, 384], dtype=float), reps)
    mu = 2.0 + 0.01 * n**2
    sd = 0.02 * mu if shape == "rel" else 0.5 * np.sqrt(n)
    return Measurements.from_arrays(["n"], n, mu + sd * rng.standard_normal(n.size))


def mean_model_coverage(
    data: Measurements, terms: tuple[Term, ...], noise: str
) -> tuple[dict[float, float], dict[float, float]]:
    """The mean model's leave-one-point-out coverage and mean relative width."""
    hits = dict.fromkeys(CONFIDENCES, 0)
    widths = dict.fromkeys(CONFIDENCES, 0.0)
    total = 0
    for k in range(data.n_points):
        keep = np.arange(data.n_points) != k
        try:
            m = fit_terms(data.select(keep), terms, noise=noise)
        except Exception:  # noqa: BLE001 - a point the rest cannot fit is skipped
            continue
        point = {p: float(data.points[k, j]) for j, p in enumerate(data.params)}
        for c in CONFIDENCES:
            lo, hi = m.predict(point, c).interval
            hits[c] += int(np.sum((data.values[k] >= lo) & (data.values[k] <= hi)))
            widths[c] += data.values[k].size * (hi - lo) / abs(float(data.means[k]))
        total += data.values[k].size
    return {c: hits[c] / total for c in CONFIDENCES}, {c: widths[c] / total for c in CONFIDENCES}


def row(name: str, data: Measurements) -> list[float]:
    sp = fit_spread(data)
    cal = sp.calibration
    assert cal is not None
    mean, mean_width = mean_model_coverage(data, sp.mean.terms, sp.mean.noise)
    orig = spread_coverage(data, replace(sp, misfit=0.0, calibration=None))
    cells = [name, f"{sp.std.formula[:28]}"]
    for c in CONFIDENCES:
        cells.append(f"{mean[c]:.2f}/{orig[c]:.2f}/{cal.normal[c]:.2f}/{cal.coverage[c]:.2f}")
    cells += [f"{mean_width[c]:.3f}/{cal.width[c]:.3f}" for c in CONFIDENCES]
    cells.append(f"{cal.multiplier(0.95):.2f}")
    print(" | ".join(cells))
    return [cal.coverage[c] for c in CONFIDENCES]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    args = ap.parse_args()
    head = ["set", "std model"]
    head += [f"{c:.0%} mean/original/normal/calibrated" for c in CONFIDENCES]
    head += [f"width {c:.0%} mean/calibrated" for c in CONFIDENCES] + ["q95"]
    print(" | ".join(head))
    for name, data in sorted(kernels().items()):
        row(name, data)
    for shape in ("sqrt", "rel"):
        covs = [row(f"synthetic {shape} seed {s}", synthetic(s, shape)) for s in args.seeds]
        mean = np.mean(covs, axis=0)
        print(f"synthetic {shape} mean calibrated coverage: " + ", ".join(f"{v:.2f}" for v in mean))


if __name__ == "__main__":
    main()
