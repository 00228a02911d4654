"""Stochastic inputs: the protocol the scheduler reads, their summaries, and common random numbers.

Any scipy.stats-shaped value works (``mean, std, ppf, rvs, interval``). Values that say what they
are (``kind`` "point"/"normal"/"mixture" with ``components``, as ppe.core's do, or a frozen
``scipy.stats.norm``) are sampled in one vectorised step from cached standard draws, and their
quantiles are found for all hosts at once, so that a 64-host schedule takes a millisecond or two.
Anything else is sampled through its own ``rvs`` and read through its own ``ppf``.
Draws are *common random numbers*: slot ``i`` of stream ``(seed, stream)`` always gets the same
draws, whichever schedule is being evaluated, so strategies compare with little MC noise.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr, ndtri

FloatArray = NDArray[np.float64]


@runtime_checkable
class Stochastic(Protocol):
    """A scipy.stats-shaped distribution: the same protocol as ``ppe.core``'s ``Stochastic``."""

    def mean(self) -> Any: ...

    def std(self) -> Any: ...

    def ppf(self, q: Any) -> Any: ...

    def rvs(self, size: Any = ..., random_state: Any = ...) -> Any: ...

    def interval(self, confidence: Any) -> Any: ...


@dataclass(frozen=True, eq=False)
class Law:
    """Moments of a stochastic value, plus its normal components when it has known ones.

    ``weights`` is empty for values only reachable through ``rvs``/``ppf`` ("generic"). A point
    value has one component with std 0. Plain tuples: building arrays per value costs more
    than the whole balance for a 64-host schedule.
    """

    mean: float
    std: float
    weights: tuple[float, ...]
    means: tuple[float, ...]
    stds: tuple[float, ...]
    source: Any

    @property
    def generic(self) -> bool:
        return not self.weights

    @property
    def normal(self) -> bool:
        """True when the value is exactly normal (or a point), so sums stay normal."""
        return len(self.weights) == 1

    def ppf(self, q: float) -> float:
        """The true quantile (of the whole mixture, for a mixture)."""
        return float(quantiles([self], q)[0])


def law_of(value: Stochastic | float) -> Law:
    """Summarise a value once, so strategies never call slow generic methods twice."""
    if isinstance(value, int | float | np.floating | np.integer):
        return _components_law(value, [(1.0, float(value), 0.0)])
    kind = getattr(value, "kind", None)
    if kind == "point":
        return _components_law(value, [(1.0, float(value.mean()), 0.0)])
    if kind == "normal" or _is_scipy_norm(value):
        return _components_law(value, [(1.0, float(value.mean()), float(value.std()))])
    if kind == "mixture":
        comps = _parse_components(getattr(value, "components", None))
        if comps:
            return _components_law(value, comps)
    mean, std = float(value.mean()), float(value.std())
    _check_moments(mean, std)
    if std == 0.0:
        return _components_law(value, [(1.0, mean, 0.0)])
    return Law(mean, std, (), (), (), value)


def _is_scipy_norm(value: object) -> bool:
    dist = getattr(value, "dist", None)
    return getattr(dist, "name", None) == "norm" and hasattr(value, "args")


def _parse_components(raw: object) -> list[tuple[float, float, float]]:
    """(weight, mean, std) triples from tuples, dicts or objects; [] if unreadable."""
    if not isinstance(raw, Sequence | np.ndarray):
        return []
    out: list[tuple[float, float, float]] = []
    try:
        for c in raw:
            if isinstance(c, dict):
                out.append((float(c["weight"]), float(c["mean"]), float(c["std"])))
            elif hasattr(c, "weight"):
                out.append((float(c.weight), float(c.mean), float(c.std)))
            else:
                w, m, s = c
                out.append((float(w), float(m), float(s)))
    except (KeyError, TypeError, ValueError):
        return []
    return out


def _components_law(source: object, comps: list[tuple[float, float, float]]) -> Law:
    if len(comps) == 1:  # the common case, kept cheap: a 64-host schedule reads 128 values
        _, mean, std = comps[0]
        _check_moments(mean, std)
        return Law(mean, std, (1.0,), (mean,), (std,), source)
    total = math.fsum(c[0] for c in comps)
    if not all(math.isfinite(w) and w >= 0 for w, _, _ in comps) or not total > 0:
        raise ValueError(f"stochastic value {source!r}: component weights must be >= 0, sum > 0")
    if not all(math.isfinite(m) and math.isfinite(sd) and sd >= 0 for _, m, sd in comps):
        raise ValueError(f"stochastic value {source!r}: component means/stds must be finite")
    w = tuple(c[0] / total for c in comps)
    m = tuple(c[1] for c in comps)
    sd = tuple(c[2] for c in comps)
    mean = math.fsum(wi * mi for wi, mi in zip(w, m, strict=True))
    var = math.fsum(wi * (si * si + (mi - mean) ** 2) for wi, mi, si in zip(w, m, sd, strict=True))
    return Law(mean, math.sqrt(max(var, 0.0)), w, m, sd, source)


def _check_moments(mean: float, std: float) -> None:
    if not (math.isfinite(mean) and math.isfinite(std) and std >= 0):
        raise ValueError(f"stochastic value has mean {mean}, std {std}; both must be finite")


# --- common random numbers -------------------------------------------------------------------

_CACHE_SIZE = 6
_cache: OrderedDict[tuple[int, int, int, str], FloatArray] = OrderedDict()
_lock = threading.Lock()


def _block(seed: int, stream: int, size: int, rows: int, what: str) -> FloatArray:
    """Read-only (>= rows, size) block; row i depends only on (seed, stream, i, what)."""
    key = (seed, stream, size, what)
    with _lock:
        block = _cache.get(key)
        if block is not None and block.shape[0] >= rows:
            _cache.move_to_end(key)
            return block
        have = 0 if block is None else block.shape[0]
        grown = np.empty((max(rows, 2 * have, 16), size), dtype=np.float64)
        if block is not None:
            grown[:have] = block
        code = 0 if what == "normal" else 1
        for i in range(have, grown.shape[0]):
            rng = np.random.default_rng([seed, stream, i, code])
            grown[i] = rng.standard_normal(size) if code == 0 else rng.random(size)
        grown.setflags(write=False)
        _cache[key] = grown
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        return grown


@dataclass(frozen=True)
class Components:
    """Normal-mixture components of n values, padded to (n, K): weights, means, stds."""

    w: FloatArray
    m: FloatArray
    s: FloatArray


def components(laws: Sequence[Law]) -> Components:
    """Padded components of laws that have known ones (padding has weight 0)."""
    n, k = len(laws), max(len(law.weights) for law in laws)
    if k == 1:
        m = np.array([law.means[0] for law in laws]).reshape(n, 1)
        s = np.array([law.stds[0] for law in laws]).reshape(n, 1)
        return Components(np.ones((n, 1)), m, s)
    w, m, s = np.zeros((n, k)), np.zeros((n, k)), np.zeros((n, k))
    for i, law in enumerate(laws):
        j = len(law.weights)
        w[i, :j], m[i, :j], s[i, :j] = law.weights, law.means, law.stds
    return Components(w, m, s)


def affine(a: Components, rows: FloatArray, b: Components) -> Components:
    """Exact components of ``rows * a + b`` for independent a, b: every pair of components."""
    n = a.w.shape[0]
    r = rows.reshape(n, 1, 1)
    w = (a.w[:, :, None] * b.w[:, None, :]).reshape(n, -1)
    m = (r * a.m[:, :, None] + b.m[:, None, :]).reshape(n, -1)
    s = np.hypot(r * a.s[:, :, None], b.s[:, None, :]).reshape(n, -1)
    return Components(w, m, s)


def quantiles(laws: Sequence[Law], q: float) -> FloatArray:
    """Each law's q-quantile: closed form for normals, the exact mixture quantile (all mixtures
    in one vectorised root search) for mixtures, the value's own ``ppf`` otherwise."""
    out = np.empty(len(laws))
    mixed = []
    for i, law in enumerate(laws):
        if law.std == 0.0:
            out[i] = law.mean
        elif law.normal:
            out[i] = law.mean + law.std * float(ndtri(q))
        elif law.generic:
            out[i] = float(np.asarray(law.source.ppf(q), dtype=np.float64))
        else:
            mixed.append(i)
    if mixed:
        out[mixed] = mixture_quantiles(components([laws[i] for i in mixed]), [q])[:, 0]
    return out


def mixture_quantiles(c: Components, probs: Sequence[float]) -> FloatArray:
    """(n, len(probs)) exact quantiles of each row's normal mixture, all rows at once.

    Bisection narrows a bracket 9 sigma beyond the outer components 4096-fold, then Newton
    steps (kept inside the bracket) finish to machine precision: one vectorised pass instead
    of a root search per host.
    """
    live = c.w > 0
    sd = np.where(c.s > 0, c.s, 1e-300)[:, None, :]
    w, m = c.w[:, None, :], c.m[:, None, :]
    p = np.asarray(probs, dtype=np.float64)[None, :]
    lo = np.broadcast_to(
        np.where(live, c.m - 9 * c.s, np.inf).min(axis=1)[:, None], (c.w.shape[0], p.size)
    ).copy()
    hi = np.broadcast_to(
        np.where(live, c.m + 9 * c.s, -np.inf).max(axis=1)[:, None], lo.shape
    ).copy()
    for _ in range(12):
        mid = (lo + hi) / 2
        below = (w * ndtr((mid[..., None] - m) / sd)).sum(axis=2) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    x = (lo + hi) / 2
    for _ in range(4):
        zs = (x[..., None] - m) / sd
        f = (w * ndtr(zs)).sum(axis=2) - p
        dens = (w * np.exp(-0.5 * zs * zs) / (sd * math.sqrt(2 * math.pi))).sum(axis=2)
        step = np.divide(f, dens, out=np.zeros_like(f), where=dens > 0)
        x = np.clip(x - step, lo, hi)
    return x


def draw_components(
    c: Components,
    slots: NDArray[np.int64],
    size: int,
    seed: int,
    stream: int,
    out: FloatArray | None = None,
) -> FloatArray:
    """(n, size) draws: the normal slot gives the value, the uniform slot picks the component.

    Work is in place and mixtures go row by row: large temporaries cost more in page faults
    than the arithmetic itself.
    """
    top = int(slots.max()) + 1
    z = _rows(_block(seed, stream, size, top, "normal"), slots)
    out = np.multiply(z, c.s[:, :1], out=out)  # rows with one component (padding follows it)
    out += c.m[:, :1]
    mixed = np.flatnonzero((c.w > 0).sum(axis=1) > 1)
    if mixed.size == 0:
        return out
    u = _block(seed, stream, size, top, "uniform")
    cum = np.cumsum(c.w[mixed], axis=1)
    total = cum[:, -1:]
    cuts = np.where(cum[:, :-1] >= total * (1 - 1e-12), np.inf, cum[:, :-1] / total)
    for row, i in enumerate(int(j) for j in mixed):
        ui = u[int(slots[i])]
        comp = np.zeros(size, dtype=np.intp)
        for cut in cuts[row]:
            if cut < np.inf:
                comp += ui >= cut
        vals = c.s[i][comp]
        vals *= z[i]
        vals += c.m[i][comp]
        out[i] = vals
    return out


def draw(
    laws: Sequence[Law],
    slots: Sequence[int],
    size: int,
    seed: int,
    stream: int,
    scale: FloatArray | None = None,
) -> FloatArray:
    """``scale[i] * X_i`` sampled ``size`` times for each law, from CRN slot ``slots[i]``.

    Returns an (n, size) array the caller may modify.
    """
    n = len(laws)
    mult = np.ones(n) if scale is None else np.asarray(scale, dtype=np.float64)
    slot_arr = np.asarray(slots, dtype=np.int64)
    known = np.array([not law.generic for law in laws], dtype=bool)
    if known.all():
        return draw_components(_scaled(components(laws), mult), slot_arr, size, seed, stream)
    out = np.empty((n, size), dtype=np.float64)
    if known.any():
        idx = np.flatnonzero(known)
        c = _scaled(components([laws[int(i)] for i in idx]), mult[idx])
        out[idx] = draw_components(c, slot_arr[idx], size, seed, stream)
    for i in (int(j) for j in np.flatnonzero(~known)):
        rng = np.random.default_rng([seed, stream, int(slot_arr[i]), 2])
        x = np.asarray(laws[i].source.rvs(size=size, random_state=rng), dtype=np.float64)
        out[i] = mult[i] * x.reshape(size)
    return out


def _scaled(c: Components, mult: FloatArray) -> Components:
    return Components(c.w, c.m * mult[:, None], c.s * np.abs(mult)[:, None])


_POOL_SIZE = 8
_pool: list[FloatArray] = []
_pool_lock = threading.Lock()


@contextmanager
def scratch(rows: int, cols: int) -> Iterator[FloatArray]:
    """A reusable (rows, cols) work array, for results that never leave the caller.

    Freshly allocated arrays of a few MB are page-faulted in on every call (the allocator hands
    them back to the OS); reusing a few from a small pool keeps a 64-host report near 1 ms.
    """
    need = rows * cols
    with _pool_lock:
        found = next((i for i, a in enumerate(_pool) if a.size >= need), None)
        buf = _pool.pop(found) if found is not None else None
    if buf is None:
        buf = np.empty(need, dtype=np.float64)
    try:
        yield buf[:need].reshape(rows, cols)
    finally:
        with _pool_lock:
            if len(_pool) < _POOL_SIZE:
                _pool.append(buf)


def _rows(block: FloatArray, slots: NDArray[np.int64]) -> FloatArray:
    """Rows of a block; a view (no copy) when the slots are evenly spaced."""
    n = slots.size
    if n == 1:
        return block[int(slots[0]) : int(slots[0]) + 1]
    step = int(slots[1] - slots[0])
    if step > 0 and np.array_equal(slots, slots[0] + step * np.arange(n)):
        return block[int(slots[0]) : int(slots[-1]) + 1 : step]
    return block[slots]
