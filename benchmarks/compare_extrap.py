"""Side by side with Extra-P: extrapolation to held-out largest points.

For every kernel of examples/runs/kernels.csv and a few synthetic sets, the
points at the largest value of the size parameter ``n`` are held out; the rest
are written in Extra-P's text input format and modelled by Extra-P's own
command line (``extrap --text FILE --print functions-python``, default modeler);
PPE's search (``ppe.empirical.search``) and Prophecy's auto-pick fit the same
points.  Printed per set: both chosen models and each tool's relative error at
the held-out points (against the measured mean there), PPE's 95 % interval of a
run and how many held-out repetitions it covers; then the medians.

Synthetic sets draw fresh noise from ``--seed`` (multiplicative normal noise,
5 repetitions); the search was developed on seed 0, so other seeds are data it
was not tuned on.

    .venv/bin/python benchmarks/compare_extrap.py [--csv examples/runs/kernels.csv] [--seed 1]
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppe.empirical.data import Measurements
from ppe.empirical.errors import EmpiricalError
from ppe.empirical.prophecy import fit_unknown
from ppe.empirical.search import search

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Dataset:
    name: str
    params: tuple[str, ...]
    x: np.ndarray  # one row per repetition
    y: np.ndarray


def load_kernels(path: Path) -> list[Dataset]:
    """One dataset per (app, kernel); parameters that never vary within it are dropped."""
    groups: dict[str, list[dict[str, str]]] = {}
    with path.open() as fh:
        for row in csv.DictReader(fh):
            groups.setdefault(f"{row['app']}/{row['kernel']}", []).append(row)
    out = []
    for name, rows in groups.items():
        cols = [c for c in rows[0] if c not in ("app", "kernel", "time")]
        params = tuple(c for c in cols if len({r[c] for r in rows}) > 1)
        x = np.array([[float(r[c]) for c in params] for r in rows])
        y = np.array([float(r["time"]) for r in rows])
        out.append(Dataset(name, params, x, y))
    return out


def synthetic(seed: int, reps: int = 5) -> list[Dataset]:
    rng = np.random.default_rng(seed)
    sets: list[
        tuple[str, tuple[str, ...], list[tuple[float, ...]], Callable[..., float], float]
    ] = [
        (
            "syn/n^2*log2(n)",
            ("n",),
            [(2.0**k,) for k in range(2, 9)],
            lambda n: 5 + 0.02 * n**2 * math.log2(n),
            0.03,
        ),
        ("syn/p^(1/2)", ("n",), [(2.0**k,) for k in range(1, 8)], lambda n: 20 + 3 * n**0.5, 0.05),
        (
            "syn/n^3+n",
            ("n",),
            [(8.0 * 2**k,) for k in range(0, 7)],
            lambda n: 1e-3 * n**3 + 0.5 * n,
            0.02,
        ),
        (
            "syn/n*log2(n)",
            ("n",),
            [(16.0 * 2**k,) for k in range(0, 8)],
            lambda n: 2 + 0.1 * n * math.log2(n),
            0.02,
        ),
        (
            "syn/n^(4/3)",
            ("n",),
            [(float(v),) for v in (10, 20, 40, 60, 80, 120, 160, 240)],
            lambda n: 1 + 0.3 * n ** (4 / 3),
            0.04,
        ),
        (
            "syn/n^2*log2(p)",
            ("n", "p"),
            [(8.0 * 2**a, 2.0**b) for a in range(6) for b in range(1, 6)],
            lambda n, p: 1 + 0.01 * n**2 * math.log2(p),
            0.03,
        ),
        (
            "syn/n^(3/2)+p^(1/2)",
            ("n", "p"),
            [(8.0 * 2**a, 2.0**b) for a in range(6) for b in range(1, 6)],
            lambda n, p: 5 + 0.02 * n**1.5 + 0.8 * p**0.5,
            0.03,
        ),
    ]
    out = []
    for name, params, points, fn, cv in sets:
        x = np.repeat(np.array(points), reps, axis=0)
        mu = np.array([fn(*row) for row in x])
        out.append(Dataset(name, params, x, mu * (1 + cv * rng.standard_normal(mu.size))))
    return out


def write_extrap_text(path: Path, ds: Dataset, mask: np.ndarray) -> None:
    """Extra-P's text input format (PARAMETER, POINTS, REGION, METRIC, DATA) of the rows in ``mask``."""
    x, y = ds.x[mask], ds.y[mask]
    points = sorted({tuple(r) for r in x.tolist()})
    lines = [f"PARAMETER {p}" for p in ds.params]
    if len(ds.params) == 1:
        lines.append("POINTS " + " ".join(f"{p[0]:g}" for p in points))
    else:
        lines.append(
            "POINTS " + " ".join("( " + " ".join(f"{v:g}" for v in p) + " )" for p in points)
        )
    lines += ["REGION kernel", "METRIC time"]
    for p in points:
        sel = (x == np.array(p)).all(axis=1)
        lines.append("DATA " + " ".join(f"{v:.9g}" for v in y[sel]))
    path.write_text("\n".join(lines) + "\n")


def extrap_model(exe: str, path: Path) -> str:
    """Extra-P's model of the one region in ``path`` as a Python expression."""
    out = subprocess.run(
        [exe, "--text", str(path), "--print", "functions-python", "--disable-progress"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    return lines[-1]


def eval_extrap(expr: str, point: dict[str, float]) -> float:
    names = {"log2": math.log2, "log": math.log, "sqrt": math.sqrt, "math": math, **point}
    return float(eval(re.sub(r"\bmath\.", "", expr), {"__builtins__": {}}, names))  # noqa: S307


@dataclass(frozen=True)
class Outcome:
    name: str
    ours: str
    theirs: str
    prophecy: str
    err_ours: list[float]
    err_theirs: list[float]
    err_prophecy: list[float]
    covered: int
    held_runs: int


def compare(exe: str, ds: Dataset, workdir: Path) -> Outcome:
    size = ds.params[0]
    col = ds.params.index(size)
    held = ds.x[:, col] == ds.x[:, col].max()
    data = Measurements.from_arrays(ds.params, ds.x[~held], ds.y[~held])
    ours = search(data)
    try:
        proph = fit_unknown(data, size) if len(ds.params) == 1 else None
    except EmpiricalError:
        proph = None
    path = workdir / (re.sub(r"\W+", "_", ds.name) + ".txt")
    write_extrap_text(path, ds, ~held)
    theirs = extrap_model(exe, path)
    test = Measurements.from_arrays(ds.params, ds.x[held], ds.y[held])
    e_o, e_t, e_p, covered, runs = [], [], [], 0, 0
    for k in range(test.n_points):
        point = {p: float(test.points[k, j]) for j, p in enumerate(ds.params)}
        truth = float(test.means[k])
        pred = ours.predict(point)
        e_o.append(abs(pred.mean - truth) / truth)
        e_t.append(abs(eval_extrap(theirs, point) - truth) / truth)
        if proph is not None:
            e_p.append(abs(proph.predict(point).mean - truth) / truth)
        lo, hi = pred.interval
        covered += int(np.sum((test.values[k] >= lo) & (test.values[k] <= hi)))
        runs += test.values[k].size
    return Outcome(
        ds.name, ours.formula, theirs, proph.formula if proph else "-", e_o, e_t, e_p, covered, runs
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=ROOT / "examples/runs/kernels.csv")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--extrap", default=shutil.which("extrap") or str(Path(sys.executable).parent / "extrap")
    )
    args = ap.parse_args()
    sets = load_kernels(args.csv) + synthetic(args.seed)
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in sets:
            o = compare(args.extrap, ds, Path(tmp))
            outcomes.append(o)
            print(f"== {o.name}  (held out: largest {ds.params[0]}, {len(o.err_ours)} point(s))")
            print(f"   PPE search : {o.ours}")
            print(f"   Extra-P    : {o.theirs}")
            print(f"   Prophecy   : {o.prophecy}")
            fmt = lambda v: " ".join(f"{e:7.2%}" for e in v)  # noqa: E731
            print(
                f"   rel. error  PPE {fmt(o.err_ours)} | Extra-P {fmt(o.err_theirs)} | Prophecy {fmt(o.err_prophecy)}"
            )
            print(f"   PPE 95 % run interval covers {o.covered}/{o.held_runs} held-out runs")
    all_o = [e for o in outcomes for e in o.err_ours]
    all_t = [e for o in outcomes for e in o.err_theirs]
    all_p = [e for o in outcomes for e in o.err_prophecy]
    cov = sum(o.covered for o in outcomes) / sum(o.held_runs for o in outcomes)
    print()
    print(f"held-out points: {len(all_o)} over {len(outcomes)} sets (seed {args.seed})")
    print(
        f"median relative error  PPE search {statistics.median(all_o):.2%}   Extra-P {statistics.median(all_t):.2%}"
        f"   Prophecy auto-pick {statistics.median(all_p):.2%} (one-parameter sets)"
    )
    print(
        f"mean relative error    PPE search {statistics.mean(all_o):.2%}   Extra-P {statistics.mean(all_t):.2%}"
    )
    print(f"PPE 95 % interval coverage of held-out runs: {cov:.1%}")


if __name__ == "__main__":
    main()
