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
  cache level) and each pattern and kind: ``rmw unit`` = ``a += 1``; ``read unit`` = what one
  more input operand adds to an element-wise pass, ``buf += v`` minus ``buf += 1`` over the
  same ``buf`` (numpy code reads its arrays as ufunc operands, several streams in one loop;
  ``a.sum()``, the kernel before session 33, took numpy's reduction loop, which such code does
  not run, and priced every operand as a pass of its own: ppe-sor's sweep in cache came out
  15-27 % slow); ``stride2`` = the same on one colour of a square red-black grid
  (``g[::2, ::2]``: every other element of every other row, what a red-black sweep touches);
  ``read random`` = ``np.take(a, idx, out=buf)``, ``rmw random`` = take, add, ``np.put``
  (index and output streams included; at most 2^17 random elements per call). Rates are bytes
  of elements accessed per second; the working set is the whole array, ``buf`` included.
* **Times are CPU seconds of the process** (``time.process_time``): the machine's cores are
  shared, and wall time would mostly measure the wait for a core; memory stalls are CPU time,
  so contention still shows.
* **Repetitions in rounds**: each figure is measured ``reps`` times (3 quick, 5 full), each
  repetition an inner loop of at least ``min_time`` seconds, one repetition of every figure
  per round, so a figure's samples span the whole probe; the samples are kept and the figure
  is their median (a shared machine's speed drifts over seconds: back-to-back repetitions
  agreed with each other and not with the next profile).
* **Sharing**: the same memory sweep in ``k`` processes at once (fork), which meet at a
  barrier before each size so their measurements overlap, in every round after the single
  copy's sweep; a figure pools the rates each copy got.
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
from dataclasses import dataclass
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
METHOD = (
    "numpy kernels, CPU time (process_time), per-call overhead subtracted, "
    "a read as one more operand of an element-wise pass, "
    "repetitions in rounds, median"
)


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


@dataclass(frozen=True)
class Kernel:
    """A memory kernel: ``run`` accesses ``nbytes`` of elements per call; with a ``baseline``
    the figure is the difference (``run`` minus ``baseline``: the cost of one more operand)."""

    run: Callable[[], object]
    nbytes: int
    baseline: Callable[[], object] | None = None


def _kernel(pattern: str, kind: str, a: FloatArray, rng: np.random.Generator) -> Kernel:
    """The kernel for one pattern and kind over the array ``a`` (the working set)."""
    if pattern == "random":
        k = min(a.size, RANDOM_CAP)
        idx = rng.integers(0, a.size, size=k)
        buf = np.empty(k)
        if kind == "read":
            return Kernel(lambda: np.take(a, idx, out=buf), 8 * k)

        def rmw() -> None:
            np.take(a, idx, out=buf)
            np.add(buf, 1.0, out=buf)
            np.put(a, idx, buf)

        return Kernel(rmw, 8 * k)
    if kind == "read":
        v, acc = _operand_and_accumulator(pattern, a)
        return Kernel(
            lambda: np.add(acc, v, out=acc), 8 * v.size, lambda: np.add(acc, 1.0, out=acc)
        )
    v = a if pattern == "unit" else _colour(a, max(2, int(np.sqrt(a.size))))
    return Kernel(lambda: np.add(v, 1.0, out=v), 8 * v.size)


def _colour(a: FloatArray, side: int) -> FloatArray:
    """One colour of a square red-black grid of ``side`` laid over the start of ``a``: every
    other element of every other row."""
    return a[: side * side].reshape(side, side)[::2, ::2]


def _operand_and_accumulator(pattern: str, a: FloatArray) -> tuple[FloatArray, FloatArray]:
    """A read's operand ``v`` (half of ``a``, or one colour of a grid in four fifths of it) and
    a contiguous accumulator of its shape in the rest of ``a``."""
    if pattern == "unit":
        half = a.size // 2
        return a[:half], a[half : 2 * half]
    side = max(2, int(np.sqrt(a.size / 1.25)) // 2 * 2)
    v = _colour(a, side)
    return v, a[side * side : side * side + v.size].reshape(v.shape)


Key = tuple[str, str, int]  # pattern, kind, working-set bytes


@dataclass(frozen=True)
class Sample:
    """One repetition of one figure: the value, the share of a call that was fixed cost
    (subtracted), the wall seconds it took, and what was measured."""

    value: float
    overhead_fraction: float
    seconds: float
    method: str


def _memory_sample(pattern: str, kind: str, a: FloatArray, cfg: ProbeConfig) -> Sample:
    """One repetition of one memory figure: the marginal rate with this moment's per-call
    cost (measured just before, on a 16-element array: numpy takes a slower path for one
    element) subtracted, and for a read the pass without the operand too."""
    rng = np.random.default_rng(a.size)
    tiny = _kernel(pattern, kind, np.ones(64 if pattern == "stride2" else 16), rng)
    kernel = _kernel(pattern, kind, a, rng)
    t0 = time.perf_counter()
    overhead = _per_call(tiny.run, cfg.min_time / 2)
    per_call = _per_call(kernel.run, cfg.min_time)
    marginal = per_call - overhead
    if kernel.baseline is not None and tiny.baseline is not None:
        base_overhead = _per_call(tiny.baseline, cfg.min_time / 2)
        marginal -= _per_call(kernel.baseline, cfg.min_time) - base_overhead
    marginal = max(marginal, 0.02 * per_call)
    return Sample(
        kernel.nbytes / marginal,
        min(overhead / per_call, 0.99),
        time.perf_counter() - t0,
        f"{kind} {pattern}: {kernel.nbytes} B accessed per call"
        + (" (one more operand of a pass)" if kernel.baseline is not None else ""),
    )


def memory_round(cfg: ProbeConfig, barrier: Any | None = None) -> dict[Key, Sample]:
    """One repetition of every memory figure, size by size (sharing copies meet at
    ``barrier`` before each size, so they measure the same size at the same time)."""
    out: dict[Key, Sample] = {}
    for size in cfg.sizes():
        if barrier is not None:
            barrier.wait()
        a = np.ones(size // 8)  # one working set for all kernels: its pages fault in once
        for pattern in PATTERNS:
            for kind in KINDS:
                out[(pattern, kind, size)] = _memory_sample(pattern, kind, a, cfg)
        del a
    return out


def _warm_up(cfg: ProbeConfig) -> None:
    """A fresh process's first calls are slow (imports, caches): one thrown-away sample."""
    _memory_sample("unit", "read", np.ones(MIN_BYTES // 8), cfg)


def _copy_worker(cfg: ProbeConfig, barrier: Any, queue: Any) -> None:
    """A sharing copy: memory kernels only (no BLAS; the parent's thread limit is inherited
    through the fork anyway)."""
    _warm_up(cfg)
    queue.put(memory_round(cfg, barrier))


def sharing_round(cfg: ProbeConfig, copies: int) -> list[dict[Key, Sample]]:
    """One memory round in ``copies`` processes at once (fork): each copy's samples."""
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(copies), ctx.Queue()
    procs = [ctx.Process(target=_copy_worker, args=(cfg, barrier, queue)) for _ in range(copies)]
    for p in procs:
        p.start()
    results: list[dict[Key, Sample]] = []
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
    return results


def _figure(samples: Sequence[Sample], suffix: str = "") -> Figure:
    return Figure.of(
        [s.value for s in samples], sum(s.seconds for s in samples), samples[0].method + suffix
    )


def _curves(cfg: ProbeConfig, rounds: Sequence[dict[Key, Sample]], copies: int) -> list[Curve]:
    """The curves from every round's samples: each sample is the rate one copy got in one
    round, and the rounds ran one after another, so a figure's samples span the probe."""
    suffix = f"; {copies} copies at once" if copies > 1 else ""
    curves = []
    for pattern in PATTERNS:
        for kind in KINDS:
            points = []
            for size in cfg.sizes():
                got = [r[(pattern, kind, size)] for r in rounds]
                fraction = float(np.mean([g.overhead_fraction for g in got]))
                points.append(CurvePoint(size, _figure(got, suffix), fraction))
            curves.append(Curve(pattern, kind, copies, tuple(points)))
    return curves


def overhead_round(cfg: ProbeConfig) -> dict[str, Sample]:
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

    k0, m, j0, c = 1, 3, 2, 3

    def view() -> object:
        return g[k0 - 1 : k0 + 2 * m - 2 : 2, j0 : j0 + 2 * c - 1 : 2]

    t0 = time.perf_counter()
    call = _per_call(mix, cfg.min_time) / 4
    t1 = time.perf_counter()
    one_view = _per_call(view, cfg.min_time)
    t2 = time.perf_counter()
    return {
        "call": Sample(call, 0.0, t1 - t0, "ufunc call on 2-D stride-2 4x4 views (mix of 4)"),
        "view": Sample(one_view, 0.0, t2 - t1, "2-D strided slice, bounds computed"),
    }


def flops_round(cfg: ProbeConfig, overheads: dict[str, Sample]) -> dict[str, Sample]:
    """``dense`` = a matrix multiply on one BLAS thread (2 n^3 flops); ``stencil`` = a
    5-point numpy stencil (4 flops per point) in the first cache levels, this round's call
    and view costs subtracted."""
    n = cfg.dense_n
    a, b = np.ones((n, n)), np.full((n, n), 0.5)
    t0 = time.perf_counter()
    dense = 2.0 * n**3 / _per_call(lambda: a @ b, cfg.min_time)
    t1 = time.perf_counter()
    g = np.ones((96, 96))
    t = np.empty((94, 94))

    def stencil() -> None:
        np.add(g[:-2, 1:-1], g[2:, 1:-1], out=t)
        np.add(t, g[1:-1, :-2], out=t)
        np.add(t, g[1:-1, 2:], out=t)
        np.multiply(t, 0.25, out=t)

    fixed = 4 * overheads["call"].value + 4 * overheads["view"].value
    per_call = _per_call(stencil, cfg.min_time)
    rate = 4 * t.size / max(per_call - fixed, 0.05 * per_call)
    t2 = time.perf_counter()
    return {
        "dense": Sample(dense, 0.0, t1 - t0, f"matmul {n}x{n} float64, 1 thread"),
        "stencil": Sample(
            rate, 0.0, t2 - t1, "5-point numpy stencil 96x96, 4 flops/point, overhead out"
        ),
    }


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
    """Measure this machine in ``cfg.reps`` rounds; each round takes one sample of every
    figure (overheads, memory curves, flop rates, then the sharing curves for the copy
    counts of ``cfg.sharing_counts`` over the CPUs this process may use). Rounds rather than
    repetitions back to back: a shared machine's speed drifts over seconds, and a figure
    whose samples span the whole probe (its value their median) is not caught in one lull
    or one burst, and its single-copy and sharing samples see the same machine."""
    started = time.time()
    counts = cfg.sharing_counts(_usable_cpus())
    single: list[dict[Key, Sample]] = []
    shared: dict[int, list[dict[Key, Sample]]] = {k: [] for k in counts}
    fixed: list[dict[str, Sample]] = []
    # one BLAS thread throughout: leaving the limit wakes BLAS's idle threads, which then
    # spin and bill their CPU time to this process (short calls measured 3x slower)
    with _one_blas_thread():
        _warm_up(cfg)
        for r in range(cfg.reps):
            overheads = overhead_round(cfg)
            single.append(memory_round(cfg))
            fixed.append({**overheads, **flops_round(cfg, overheads)})
            for copies in counts:
                shared[copies].extend(sharing_round(cfg, copies))
            if report:
                report(f"round {r + 1} of {cfg.reps} done")
    curves = _curves(cfg, single, 1)
    for copies in counts:
        curves.extend(_curves(cfg, shared[copies], copies))
    machine = _machine()
    machine["probe_wall_seconds"] = round(time.time() - started, 3)
    return MachineProfile(
        host=host or socket.gethostname(),
        measured_at=started,
        method=METHOD,
        memory=tuple(curves),
        flops={k: _figure([f[k] for f in fixed]) for k in ("dense", "stencil")},
        overheads={k: _figure([f[k] for f in fixed]) for k in ("call", "view")},
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
