"""Measure real kernels on this machine and write the dataset examples/runs/kernels.csv.

Kernels (one CSV row per repetition: ``app,kernel,n,p,time`` in seconds):

* ``numpy,matmul``: ``a @ b`` for n x n float64 matrices, BLAS held to one thread
  (threadpoolctl) so that the other engineers' load on the 2 cores disturbs it less;
* ``numpy,solve``: ``np.linalg.solve`` of an n x n system (LU, one BLAS thread);
* ``numpy,sort``: ``np.sort`` of n*n random float64 values (an n log n kernel);
* ``numpy,fft2``: ``np.fft.rfft2`` of an n x n array (sizes with small prime factors);
* ``sor,sweep``: 10 red-black SOR sweeps (omega 1.5) over an n x n grid, in numpy;
* ``sor,strips``: the same 10 sweeps with the grid cut into p row strips, one
  process per strip (multiprocessing, fork), ghost rows exchanged over pipes after
  each half sweep; the time runs from the start signal to the last strip's end
  (process start-up excluded). p is 1 or 2.

Sequential kernels carry ``p=1`` (they run in one process) and are timed in CPU
time of this process (``time.process_time``): the machine's 2 cores are shared,
and wall-clock time would mostly measure the wait for a core.  A measurement of
a short kernel repeats it in an inner loop of at least ~20 ms and records the
time per call, so timer resolution does not dominate the small sizes.  The
strips are timed in wall-clock time (their point is the parallel run), so they
carry the machine's load: the load average is printed before and after.

    .venv/bin/python benchmarks/measure_kernels.py [--out examples/runs/kernels.csv] [--reps 5]
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

FloatArray = npt.NDArray[np.float64]
OMEGA = 1.5
SWEEPS = 10
MIN_MEASURE_S = 0.02

SQRT2_STEPS = [64, 91, 128, 181, 256, 362, 512, 724, 1024, 1448]
SIZES: dict[tuple[str, str], list[int]] = {
    ("numpy", "matmul"): SQRT2_STEPS,
    ("numpy", "solve"): SQRT2_STEPS,
    ("numpy", "sort"): SQRT2_STEPS,
    ("numpy", "fft2"): [64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536],
    ("sor", "sweep"): SQRT2_STEPS,
    ("sor", "strips"): [128, 181, 256, 362, 512, 724, 1024, 1448],
}


def time_per_call(fn: Callable[[], object]) -> float:
    """CPU seconds per call of ``fn``, repeated until at least MIN_MEASURE_S of CPU has passed."""
    fn()
    calls, t0 = 0, time.process_time()
    while True:
        fn()
        calls += 1
        elapsed = time.process_time() - t0
        if elapsed >= MIN_MEASURE_S:
            return elapsed / calls


def half_sweep(u: FloatArray, f: FloatArray, h2: float, color: int, row0: int) -> None:
    """Update the points of one colour ((global row + column) % 2 == color) of ``u``'s interior.

    ``u`` has one ghost/boundary row and column on each side; ``row0`` is the global
    index of its first interior row (for the colour parity of a strip).
    """
    m, n = u.shape[0] - 2, u.shape[1] - 2
    for r in (1, 2):
        c = 1 + ((color - (row0 + r - 1) - 1) % 2)
        rows, cols = slice(r, m + 1, 2), slice(c, n + 1, 2)
        up, down = slice(r - 1, m, 2), slice(r + 1, m + 2, 2)
        left, right = slice(c - 1, n, 2), slice(c + 1, n + 2, 2)
        nb = u[up, cols] + u[down, cols] + u[rows, left] + u[rows, right] - h2 * f[rows, cols]
        u[rows, cols] = (1.0 - OMEGA) * u[rows, cols] + (OMEGA / 4.0) * nb


def sor_grid(n: int, rows: int) -> tuple[FloatArray, FloatArray]:
    rng = np.random.default_rng(n)
    return rng.random((rows + 2, n + 2)), rng.random((rows + 2, n + 2))


def sor_sweeps(n: int) -> Callable[[], None]:
    u, f = sor_grid(n, n)
    h2 = 1.0 / (n + 1) ** 2

    def run() -> None:
        for _ in range(SWEEPS):
            half_sweep(u, f, h2, 0, 1)
            half_sweep(u, f, h2, 1, 1)

    return run


def strip_worker(
    n: int, rows: int, row0: int, up: Connection | None, down: Connection | None, ctl: Connection
) -> None:
    """One strip's process: on each ``go`` run SWEEPS sweeps, exchanging ghost rows."""
    u, f = sor_grid(n, rows)
    h2 = 1.0 / (n + 1) ** 2
    while ctl.recv() == "go":
        for _ in range(SWEEPS):
            for color in (0, 1):
                half_sweep(u, f, h2, color, row0)
                if up is not None:
                    up.send_bytes(u[1].tobytes())
                if down is not None:
                    down.send_bytes(u[rows].tobytes())
                if up is not None:
                    u[0] = np.frombuffer(up.recv_bytes(), dtype=np.float64)
                if down is not None:
                    u[rows + 1] = np.frombuffer(down.recv_bytes(), dtype=np.float64)
        ctl.send("done")


def measure_strips(n: int, p: int, reps: int) -> list[float]:
    """Wall-clock seconds of SWEEPS sweeps over p strip processes, ``reps`` times."""
    ctx = mp.get_context("fork")
    links = [ctx.Pipe() for _ in range(p - 1)]
    ctls, procs = [], []
    bounds = np.linspace(0, n, p + 1).astype(int)
    for k in range(p):
        parent, child = ctx.Pipe()
        up = links[k - 1][1] if k > 0 else None
        down = links[k][0] if k < p - 1 else None
        rows, row0 = int(bounds[k + 1] - bounds[k]), int(bounds[k]) + 1
        proc = ctx.Process(target=strip_worker, args=(n, rows, row0, up, down, child))
        proc.start()
        ctls.append(parent)
        procs.append(proc)
    times = []
    try:
        for _ in range(reps + 1):  # the first round warms up
            t0 = time.perf_counter()
            for c in ctls:
                c.send("go")
            for c in ctls:
                c.recv()
            times.append(time.perf_counter() - t0)
    finally:
        for c in ctls:
            c.send("stop")
        for proc in procs:
            proc.join()
    return times[1:]


def kernel_fn(app: str, kernel: str, n: int) -> Callable[[], object]:
    rng = np.random.default_rng(n)
    if kernel == "matmul":
        a, b = rng.random((n, n)), rng.random((n, n))
        return lambda: a @ b
    if kernel == "solve":
        a, b = rng.random((n, n)) + n * np.eye(n), rng.random(n)
        return lambda: np.linalg.solve(a, b)
    if kernel == "fft2":
        z = rng.random((n, n))
        return lambda: np.fft.rfft2(z)
    if kernel == "sort":
        x = rng.random(n * n)
        return lambda: np.sort(x)
    if kernel == "sweep":
        return sor_sweeps(n)
    raise ValueError(f"unknown kernel {app}/{kernel}")


def measure(reps: int) -> list[tuple[str, str, int, int, float]]:
    rows: list[tuple[str, str, int, int, float]] = []
    for (app, kernel), sizes in SIZES.items():
        for n in sizes:
            if kernel == "strips":
                for p in (1, 2):
                    rows += [(app, kernel, n, p, t) for t in measure_strips(n, p, reps)]
                    print(f"{app}/{kernel} n={n} p={p} done", flush=True)
                continue
            fn = kernel_fn(app, kernel, n)
            rows += [(app, kernel, n, 1, time_per_call(fn)) for _ in range(reps)]
            print(f"{app}/{kernel} n={n} done", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("examples/runs/kernels.csv"))
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with threadpool_limits(limits=1):
        rows = measure(args.reps)
    print(f"load average after: {os.getloadavg()}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["app", "kernel", "n", "p", "time"])
        for app, kernel, n, p, t in rows:
            w.writerow([app, kernel, n, p, f"{t:.6e}"])
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
