"""Stochastic inputs: the protocol the scheduler reads, their summaries, and common random numbers.

Any scipy.stats-shaped value works (``mean, std, ppf, rvs, interval``). Values that say what they
are (``kind`` "point"/"normal"/"mixture" with ``components``, as ppe.core's do, or a frozen
``scipy.stats.norm``) are sampled in one vectorised step from cached standard draws, so that a
64-host schedule is reported in about a millisecond. Anything else is sampled through its own
``rvs``. Draws are *common random numbers*: slot ``i`` of stream ``(seed, stream)`` always gets the
same draws, whichever schedule is being evaluated, so strategies compare with little MC noise.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

FloatArray = NDArray[np.float64]


@runtime_checkable
class Stochastic(Protocol):
    """The scipy.stats-shaped protocol of INTERFACES.md."""

    def mean(self) -> Any: ...

    def std(self) -> Any: ...

    def ppf(self, q: Any) -> Any: ...

    def rvs(self, size: Any = ..., random_state: Any = ...) -> Any: ...

    def interval(self, confidence: Any) -> Any: ...


StochasticLike = Stochastic | float


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
        """Quantile; for mixtures and other shapes the value's own (true) ``ppf``."""
        if self.std == 0.0:
            return self.mean
        if self.normal:
            return self.mean + self.std * float(ndtri(q))
        return float(np.asarray(self.source.ppf(q), dtype=np.float64))


def law_of(value: StochasticLike) -> Law:
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


def draw(laws: Sequence[Law], slots: Sequence[int], size: int, seed: int, stream: int,
         scale: FloatArray | None = None) -> FloatArray:
    """``scale[i] * X_i`` sampled ``size`` times for each law, from CRN slot ``slots[i]``.

    Returns an (n, size) array the caller may modify. Scaling inside the draw saves a pass
    over the array (the common case is ``rows * a``).
    """
    n = len(laws)
    mult = np.ones(n) if scale is None else np.asarray(scale, dtype=np.float64)
    slot_arr = np.asarray(slots, dtype=np.int64)
    known = np.array([not law.generic for law in laws], dtype=bool)
    if known.all():
        return _draw_components(laws, slot_arr, size, seed, stream, mult)
    out = np.empty((n, size), dtype=np.float64)
    if known.any():
        idx = np.flatnonzero(known)
        out[idx] = _draw_components([laws[int(i)] for i in idx], slot_arr[idx], size, seed, stream,
                                    mult[idx])
    for i in (int(j) for j in np.flatnonzero(~known)):
        rng = np.random.default_rng([seed, stream, int(slot_arr[i]), 2])
        x = np.asarray(laws[i].source.rvs(size=size, random_state=rng), dtype=np.float64)
        out[i] = mult[i] * x.reshape(size)
    return out


def _draw_components(laws: Sequence[Law], slots: NDArray[np.int64], size: int, seed: int,
                     stream: int, mult: FloatArray) -> FloatArray:
    """Normal laws in one fused pass; mixtures pick a component per draw from a uniform slot."""
    top = int(slots.max()) + 1
    z = _rows(_block(seed, stream, size, top, "normal"), slots)
    first_m = np.array([law.means[0] for law in laws]) * mult
    first_s = np.array([law.stds[0] for law in laws]) * mult
    out = np.multiply(z, first_s[:, None])  # in place from here: temporaries of this size
    out += first_m[:, None]  # cost more in page faults than the arithmetic itself
    mixed = [i for i, law in enumerate(laws) if len(law.weights) > 1]
    if not mixed:
        return out
    u = _block(seed, stream, size, top, "uniform")
    for i in mixed:
        law = laws[i]
        comp = np.searchsorted(np.cumsum(law.weights)[:-1], u[int(slots[i])], side="right")
        row = np.asarray(law.stds)[comp] * z[i]
        row += np.asarray(law.means)[comp]
        row *= mult[i]
        out[i] = row
    return out


def _rows(block: FloatArray, slots: NDArray[np.int64]) -> FloatArray:
    """Rows of a block; a view (no copy) when the slots are evenly spaced."""
    n = slots.size
    if n == 1:
        return block[int(slots[0]) : int(slots[0]) + 1]
    step = int(slots[1] - slots[0])
    if step > 0 and np.array_equal(slots, slots[0] + step * np.arange(n)):
        return block[int(slots[0]) : int(slots[-1]) + 1 : step]
    return block[slots]
