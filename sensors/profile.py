"""`ppe profile`: measure this machine's PMaC profile (ppe.pmac.profile) with numpy kernels.

Method (docs/pmac.md has the numbers behind the choices):

* **Kernels are numpy**, the code PPE's applications run (ppe-sor's sweep is numpy), so a
  profile measures the rates those applications can get; no compiler is needed. A numpy call
  costs about half a microsecond before it touches data, which at 8 KiB is three quarters of
  the call (``overhead_fraction`` in each point says how much). So each kernel's cost on a
  16-element array (not 1: numpy is slower on one-element arrays) is measured too and
  subtracted: memory figures are marginal bytes per second, and the per-call cost is a figure
  of its own (``overheads``) that signatures count separately.
* **Memory curves**: for each working-set size (8 KiB up, x4 steps, to several times the last
  cache level) and each pattern and kind: ``read unit`` = ``a.sum()``, ``rmw unit`` =
  ``a += 1``; ``stride2`` = the same on one colour of a square red-black grid (``g[::2, ::2]``:
  every other element of every other row, what a red-black sweep touches); ``read random`` =
  ``np.take(a, idx, out=buf)``, ``rmw random`` = take, add, ``np.put`` (index and output
  streams included; at most 2^17 random elements per call). Rates are bytes of elements
  accessed per second.
* **Times are CPU seconds of the process** (``time.process_time``): the machine's cores are
  shared, and wall time would mostly measure the wait for a core; memory stalls are CPU time,
  so contention still shows.
* **Repetitions**: each figure is measured ``reps`` times (3 quick, 5 full), each repetition
  an inner loop of at least ``min_time`` seconds; the samples are kept.
* **Sharing**: the same memory sweep in ``k`` processes at once (fork), which meet at a
  barrier before each size so their measurements overlap; a figure is the rate each copy got.
* **Flops**: ``dense`` = a float64 matrix multiply on one BLAS thread (2 n^3 flops);
  ``stencil`` = a 5-point numpy stencil (4 flops per point) on a grid in the first cache
  levels, its call overhead subtracted.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import queue as queue_module
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ppe.pmac.profile import (
    KINDS,
    PATTERNS,
    Curve,
    CurvePoint,
    Figure,
    MachineProfile,
    profile_from_dict,
    profile_to_dict,
    profile_to_json,
)
from sensors.config import ConfigError, parse_peer
from sensors.netprobe import HostLock, MessageSweep, SweepConfig, sweep_peers
from sensors.probe_config import MIN_BYTES, ProbeConfig

FloatArray = npt.NDArray[np.float64]
RANDOM_CAP = 1 << 17  # random elements per call: bounds the time at large working sets
METHOD = "numpy kernels, CPU time (process_time), per-call overhead subtracted"


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    try:
        from threadpoolctl import threadpool_limits  # with scikit-learn, a ppe dependency
    except ImportError:  # pragma: no cover - then BLAS runs as configured
        yield
        return
    with threadpool_limits(limits=1):
        yield


def _per_call(fn: Callable[[], object], min_time: float) -> float:
    """CPU seconds per call of ``fn``: calls doubled until the loop takes ``min_time``."""
    fn()
    calls = 1
    while True:
        t0 = time.process_time()
        for _ in range(calls):
            fn()
        dt = time.process_time() - t0
        if dt >= min_time:
            return dt / calls
        calls *= 2 if dt < min_time / 8 else max(2, int(min_time / max(dt, 1e-9) * 1.2) + 1)


def _kernel(pattern: str, kind: str, a: FloatArray, rng: np.random.Generator) -> tuple[Any, int]:
    """The kernel for one pattern and kind over the array ``a`` (the working set), and the
    bytes of elements it accesses per call."""
    if pattern == "random":
        k = min(a.size, RANDOM_CAP)
        idx = rng.integers(0, a.size, size=k)
        buf = np.empty(k)
        if kind == "read":
            return (lambda: np.take(a, idx, out=buf)), 8 * k

        def rmw() -> None:
            np.take(a, idx, out=buf)
            np.add(buf, 1.0, out=buf)
            np.put(a, idx, buf)

        return rmw, 8 * k
    if pattern == "unit":
        v = a
    else:  # one colour of a square red-black grid: every other element of every other row
        side = max(2, int(np.sqrt(a.size)))
        v = a[: side * side].reshape(side, side)[::2, ::2]
    if kind == "read":
        return v.sum, 8 * v.size
    return (lambda: np.add(v, 1.0, out=v)), 8 * v.size


def _memory_point(pattern: str, kind: str, a: FloatArray, cfg: ProbeConfig) -> CurvePoint:
    rng = np.random.default_rng(a.size)
    # 16 elements, not 1: numpy takes a slower path for one-element arrays
    tiny, _ = _kernel(pattern, kind, np.ones(64 if pattern == "stride2" else 16), rng)
    fn, nbytes = _kernel(pattern, kind, a, rng)
    t0 = time.perf_counter()
    overhead = min(_per_call(tiny, cfg.min_time / 2) for _ in range(2))
    samples, fractions = [], []
    for _ in range(cfg.reps):
        per_call = _per_call(fn, cfg.min_time)
        marginal = max(per_call - overhead, 0.02 * per_call)
        samples.append(nbytes / marginal)
        fractions.append(min(overhead / per_call, 0.99))
    wall = time.perf_counter() - t0
    fig = Figure.of(samples, wall, f"{kind} {pattern}: {nbytes} B accessed per call")
    return CurvePoint(a.nbytes, fig, float(np.mean(fractions)))


def measure_memory(
    cfg: ProbeConfig, barrier: Any | None = None, report: Callable[[str], None] | None = None
) -> dict[tuple[str, str], list[CurvePoint]]:
    """Every (pattern, kind) curve over ``cfg.sizes()`` (all copies meet at ``barrier``
    before each size, so sharing copies measure the same size at the same time)."""
    out: dict[tuple[str, str], list[CurvePoint]] = {(p, k): [] for p in PATTERNS for k in KINDS}
    if barrier is not None:
        barrier.wait()
    _memory_point("unit", "read", np.ones(MIN_BYTES // 8), cfg)  # a fresh process's warm-up
    for size in cfg.sizes():
        if barrier is not None:
            barrier.wait()
        a = np.ones(size // 8)  # one working set for all kernels: its pages fault in once
        for pattern in PATTERNS:
            for kind in KINDS:
                out[(pattern, kind)].append(_memory_point(pattern, kind, a, cfg))
        del a
        if report:
            report(f"memory {size} B done")
    return out


def _copy_worker(cfg: ProbeConfig, barrier: Any, queue: Any) -> None:
    with _one_blas_thread():
        queue.put(measure_memory(cfg, barrier))


def measure_sharing(cfg: ProbeConfig, copies: int) -> list[Curve]:
    """The memory curves with ``copies`` processes measuring at once: per size, the samples
    of all copies pooled (each is the rate one copy got)."""
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(copies), ctx.Queue()
    procs = [ctx.Process(target=_copy_worker, args=(cfg, barrier, queue)) for _ in range(copies)]
    for p in procs:
        p.start()
    results: list[dict[tuple[str, str], list[CurvePoint]]] = []
    try:
        while len(results) < copies:
            try:
                results.append(queue.get(timeout=1.0))
            except queue_module.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    raise RuntimeError("a sharing copy of the probe failed") from None
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():  # only after a failure: the others wait at the barrier
                p.terminate()
                p.join()
    curves = []
    for pattern in PATTERNS:
        for kind in KINDS:
            points = []
            for i, size in enumerate(cfg.sizes()):
                per_copy = [r[(pattern, kind)][i] for r in results]
                samples = [s for pt in per_copy for s in pt.rate.samples]
                wall = max(pt.rate.seconds for pt in per_copy)
                method = f"{per_copy[0].rate.method}; {copies} copies at once"
                frac = float(np.mean([pt.overhead_fraction for pt in per_copy]))
                points.append(CurvePoint(size, Figure.of(samples, wall, method), frac))
            curves.append(Curve(pattern, kind, copies, tuple(points)))
    return curves


def measure_flops(
    cfg: ProbeConfig, call_overhead: float, view_overhead: float
) -> dict[str, Figure]:
    n = cfg.dense_n
    a, b = np.ones((n, n)), np.full((n, n), 0.5)
    t0 = time.perf_counter()
    dense = [2.0 * n**3 / _per_call(lambda: a @ b, cfg.min_time) for _ in range(cfg.reps)]
    dense_fig = Figure.of(dense, time.perf_counter() - t0, f"matmul {n}x{n} float64, 1 thread")
    g = np.ones((96, 96))
    t = np.empty((94, 94))

    def stencil() -> None:
        np.add(g[:-2, 1:-1], g[2:, 1:-1], out=t)
        np.add(t, g[1:-1, :-2], out=t)
        np.add(t, g[1:-1, 2:], out=t)
        np.multiply(t, 0.25, out=t)

    fixed = 4 * call_overhead + 4 * view_overhead
    t0 = time.perf_counter()
    rates = []
    for _ in range(cfg.reps):
        per_call = _per_call(stencil, cfg.min_time)
        rates.append(4 * t.size / max(per_call - fixed, 0.05 * per_call))
    stencil_fig = Figure.of(
        rates, time.perf_counter() - t0, "5-point numpy stencil 96x96, 4 flops/point, overhead out"
    )
    return {"dense": dense_fig, "stencil": stencil_fig}


def measure_overheads(cfg: ProbeConfig) -> dict[str, Figure]:
    """Fixed costs as stencil code pays them: ``call`` is one ufunc call on 4 x 4 views of
    every other element of a grid (the mix a red-black sweep makes: a new temporary, two
    in-place updates, an update of the grid), about twice a call on a contiguous array;
    ``view`` is one 2-D strided slice whose bounds are computed at run time."""
    g = np.ones((8, 8))
    x, y = g[::2, ::2], g[1::2, 1::2]
    t = x + y

    def mix() -> None:
        x + y
        t.__iadd__(y)
        t.__imul__(0.25)
        x.__iadd__(t)

    t0 = time.perf_counter()
    calls = [_per_call(mix, cfg.min_time) / 4 for _ in range(cfg.reps)]
    call_fig = Figure.of(
        calls, time.perf_counter() - t0, "ufunc call on 2-D stride-2 4x4 views (mix of 4)"
    )
    k0, m, j0, c = 1, 3, 2, 3

    def view() -> object:
        return g[k0 - 1 : k0 + 2 * m - 2 : 2, j0 : j0 + 2 * c - 1 : 2]

    t0 = time.perf_counter()
    views = [_per_call(view, cfg.min_time) for _ in range(cfg.reps)]
    view_fig = Figure.of(views, time.perf_counter() - t0, "2-D strided slice, bounds computed")
    return {"call": call_fig, "view": view_fig}


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - not Linux


def _machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cpus": os.cpu_count() or 1, "numpy": np.__version__}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError):
        info["load_average"] = list(os.getloadavg())
    return info


def measure_profile(
    cfg: ProbeConfig,
    *,
    quick: bool = False,
    host: str | None = None,
    report: Callable[[str], None] | None = None,
) -> MachineProfile:
    """Measure this machine: overheads, memory curves, flop rates, then sharing curves for
    the copy counts of ``cfg.sharing_counts`` over the CPUs this process may use."""
    started = time.time()
    with _one_blas_thread():
        overheads = measure_overheads(cfg)
        memory = measure_memory(cfg, report=report)
        flops = measure_flops(cfg, overheads["call"].value, overheads["view"].value)
    curves = [Curve(p, k, 1, tuple(memory[(p, k)])) for p in PATTERNS for k in KINDS]
    for copies in cfg.sharing_counts(_usable_cpus()):
        if report:
            report(f"sharing: {copies} copies")
        curves.extend(measure_sharing(cfg, copies))
    machine = _machine()
    machine["probe_wall_seconds"] = round(time.time() - started, 3)
    return MachineProfile(
        host=host or socket.gethostname(),
        measured_at=started,
        method=METHOD,
        memory=tuple(curves),
        flops=flops,
        overheads=overheads,
        quick=quick,
        machine=machine,
    )


def format_profile(p: MachineProfile) -> str:
    """A table a person reads: GB/s by size for each curve, then flops and overheads."""
    lines = [f"profile of {p.host} ({'quick' if p.quick else 'full'}; {p.method})"]
    sizes = [pt.bytes for pt in p.memory[0].points]
    head = "curve".ljust(22) + "".join(f"{_size(s):>9}" for s in sizes)
    lines += ["memory, GB/s of elements accessed (per copy):", head]
    for c in p.memory:
        row = c.name.ljust(22) + "".join(f"{pt.rate.value / 1e9:9.2f}" for pt in c.points)
        lines.append(row)
    first = p.memory[0]
    lines.append(
        "overhead share".ljust(22)
        + "".join(f"{pt.overhead_fraction:9.0%}" for pt in first.points)
        + f"  (of one {first.name} call)"
    )
    for k, f in p.flops.items():
        lines.append(f"flops {k}: {f.value / 1e9:.2f} GFLOP/s (+/- {f.rel_sd:.0%})")
    for k, f in p.overheads.items():
        lines.append(f"overhead {k}: {f.value * 1e6:.3f} us (+/- {f.rel_sd:.0%})")
    for m in p.messages:
        lines.append(f"messages to {m.peer}, one-way microseconds by size:")
        lines.append("".join(f"{_size(size):>9}" for size, _ in m.points))
        lines.append("".join(f"{fig.value * 1e6:9.1f}" for _, fig in m.points))
    lines.append(f"measured in {p.machine.get('probe_wall_seconds', '?')} s wall")
    return "\n".join(lines)


def _size(b: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale:
            return f"{b / scale:g}{unit}"
    return str(b)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ppe profile", description="Measure this machine's PMaC profile (docs/pmac.md)."
    )
    p.add_argument("--quick", action="store_true", help="fewer, shorter repetitions (< 20 s)")
    p.add_argument("--out", type=Path, default=None, help="write the profile JSON here")
    p.add_argument(
        "--max-bytes",
        type=int,
        default=None,
        help="largest working set (default 128 MiB quick, 512 MiB full)",
    )
    p.add_argument(
        "--copies",
        type=int,
        default=None,
        help=(
            "sharing curves for 2, 4, 8, ... copies up to K and K itself, at most one copy "
            "per usable CPU (default 4 quick, 16 full; 1: none)"
        ),
    )
    p.add_argument("--host", default=None, help="the host name to record (default: this host's)")
    p.add_argument(
        "--peers",
        default="",
        metavar="LIST",
        help="also sweep message sizes to these sensors' probe responders: [name=]host:port,...",
    )
    p.add_argument(
        "--message-max",
        type=int,
        default=SweepConfig().max_bytes,
        metavar="BYTES",
        help="largest message of the sweep (default 4 MiB; sizes 8 B up in powers of 4)",
    )
    return p


def with_messages(profile: MachineProfile, sweeps: Sequence[MessageSweep]) -> MachineProfile:
    """The profile with a message curve per sweep (read through the profile's JSON form, the
    one the daemon posts)."""
    body = profile_to_dict(profile)
    body["messages"] = [s.to_json() for s in sweeps]
    return profile_from_dict(body)


def _warn(text: str) -> None:
    print(f"ppe profile: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = ProbeConfig.quick() if args.quick else ProbeConfig.full()
    changes: dict[str, Any] = {}
    if args.max_bytes is not None:
        if args.max_bytes < 4 * MIN_BYTES:
            print(f"ppe profile: --max-bytes must be at least {4 * MIN_BYTES}", file=sys.stderr)
            return 2
        changes["max_bytes"] = args.max_bytes
    if args.copies is not None:
        if args.copies < 1:
            print("ppe profile: --copies must be at least 1", file=sys.stderr)
            return 2
        changes["copies"] = args.copies
    if changes:
        cfg = ProbeConfig(**{**cfg.__dict__, **changes})
    try:
        peers = [parse_peer(p) for p in args.peers.split(",") if p.strip()]
        sweep = SweepConfig(max_bytes=args.message_max)
        sweep.sizes()
    except (ConfigError, ValueError) as exc:
        print(f"ppe profile: {exc}", file=sys.stderr)
        return 2
    profile = measure_profile(cfg, quick=args.quick, host=args.host)
    if peers:
        sweeps = sweep_peers(
            tuple(peers), HostLock(), sweep, threading.Event(), me=profile.host, warn=_warn
        )
        profile = with_messages(profile, sweeps)
    print(format_profile(profile))
    if args.out is not None:
        args.out.write_text(profile_to_json(profile))
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
