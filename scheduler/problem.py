"""Stochastic hosts and the scheduling problem the strategies share."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scheduler.balance import balance_rows, bounds_arrays, check_linear
from scheduler.copula import check_dependence, couple
from scheduler.errors import check_bounds, check_names
from scheduler.laws import (
    Law,
    Stochastic,
    affine,
    components,
    draw,
    draw_components,
    law_of,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

REPORT_STREAM = 0  # draws every schedule is reported on (common to all strategies)
SEARCH_STREAM = 1  # independent draws the Monte Carlo strategies optimise on
VALIDATION_STREAM = 2  # held-out draws that check an optimum did not just fit SEARCH_STREAM


@dataclass(frozen=True)
class StochasticHost:
    """A host whose time for ``rows`` rows is ``a * rows + b`` with stochastic a and b.

    ``a``: time per row over the whole run; ``b``: fixed time (communication, latency);
    both follow the stochastic protocol (or are plain numbers) and are taken as independent.
    ``a_dedicated``: time per row on the unloaded host (for the ``static`` baseline).
    """

    name: str
    a: Stochastic | float
    b: Stochastic | float = 0.0
    min_rows: int = 0
    max_rows: int | None = None
    a_dedicated: float | None = None

    def __post_init__(self) -> None:
        check_bounds(self.name, self.min_rows, self.max_rows)
        ded = self.a_dedicated
        if ded is not None and not (math.isfinite(ded) and ded > 0):
            raise ValueError(f"host {self.name!r}: a_dedicated must be > 0, got {ded}")


@dataclass(frozen=True, eq=False)
class Problem:
    """Hosts with summarised laws, bounds and the strategy parameters.

    ``dependence``: correlation of the hosts' slowdowns (a Gaussian copula over their laws,
    ``scheduler.copula``); None treats them as independent.
    """

    hosts: tuple[StochasticHost, ...]
    total_rows: int
    k: float = 2.0
    quantile: float = 0.95
    samples: int = 4000
    seed: int = 0
    dependence: FloatArray | None = None
    a: tuple[Law, ...] = field(init=False)
    b: tuple[Law, ...] = field(init=False)
    lo: FloatArray = field(init=False)
    hi: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        check_names(self.names)
        check_params(self.k, self.quantile, self.samples, self.seed)
        object.__setattr__(self, "dependence", check_dependence(self.dependence, len(self.hosts)))
        object.__setattr__(self, "a", tuple(_law(h, "a") for h in self.hosts))
        object.__setattr__(self, "b", tuple(_law(h, "b") for h in self.hosts))
        lo, hi = bounds_arrays([(h.min_rows, h.max_rows) for h in self.hosts])
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def balanced(self, a: FloatArray, b: FloatArray, what: str) -> IntArray:
        """Integer balance of the linear models ``a * rows + b`` chosen by a strategy."""
        check_linear(a, b, self.names, what)
        return balance_rows(a, b, self.lo, self.hi, self.total_rows)

    def shifted(self, k: float) -> tuple[FloatArray, FloatArray]:
        """Per-host (mean + k std) of time per row and of fixed time."""
        a = np.array([law.mean + k * law.std for law in self.a])
        b = np.array([law.mean + k * law.std for law in self.b])
        return a, b

    def sample_ab(self, stream: int) -> tuple[FloatArray, FloatArray]:
        """(n, samples) draws of every host's a, and of b (an (n, 1) column if all b are fixed);
        the a's coupled by ``dependence``."""
        a_s, b_s = sample_ab(self.a, self.b, self.samples, self.seed, stream)
        return couple(a_s, self.dependence, self.seed, stream), b_s


def check_params(k: float, quantile: float, samples: int, seed: int) -> None:
    if not (math.isfinite(k) and k >= 0):
        raise ValueError(f"k must be >= 0, got {k}")
    if not (0.0 < quantile < 1.0):
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 2:
        raise ValueError(f"samples must be an integer >= 2, got {samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")


def _law(host: StochasticHost, which: str) -> Law:
    try:
        return law_of(getattr(host, which))
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"host {host.name!r}: bad {which}: {exc}") from exc


def a_slots(n: int) -> list[int]:
    """CRN slot of host p's a is 2p, of its b 2p+1: a host keeps its draws as others are added."""
    return list(range(0, 2 * n, 2))


def b_slots(n: int) -> list[int]:
    return list(range(1, 2 * n, 2))


def sample_ab(
    a: Sequence[Law], b: Sequence[Law], size: int, seed: int, stream: int
) -> tuple[FloatArray, FloatArray]:
    n = len(a)
    a_s = draw(a, a_slots(n), size, seed, stream)
    if all(law.std == 0.0 for law in b):
        return a_s, np.array([[law.mean] for law in b], dtype=np.float64).reshape(n, 1)
    return a_s, draw(b, b_slots(n), size, seed, stream)


def sample_times(
    a: Sequence[Law],
    b: Sequence[Law],
    rows: IntArray,
    size: int,
    seed: int,
    stream: int,
    out: FloatArray | None = None,
    dependence: FloatArray | None = None,
) -> FloatArray:
    """(n, size) draws of each host's time ``a * rows + b`` (0 for hosts given no rows),
    coupled by ``dependence`` (see :class:`Problem`).

    With known components the time's own law (a mixture over pairs of a's and b's components)
    is sampled directly: half the draws of sampling a and b apart.
    """
    n = len(a)
    r = rows.astype(np.float64)
    slots = np.asarray(a_slots(n), dtype=np.int64)
    known = np.array([not (la.generic or lb.generic) for la, lb in zip(a, b, strict=True)])
    if known.all():
        c = affine(components(a), r, components(b))
        t = draw_components(c, slots, size, seed, stream, out=out)
    else:
        t = draw(a, a_slots(n), size, seed, stream, scale=r)
        t += draw(b, b_slots(n), size, seed, stream)
        if out is not None:
            out[...] = t
            t = out
        if known.any():
            idx = np.flatnonzero(known)
            c = affine(
                components([a[int(i)] for i in idx]), r[idx], components([b[int(i)] for i in idx])
            )
            t[idx] = draw_components(c, slots[idx], size, seed, stream)
    if dependence is not None:
        t[...] = couple(t, dependence, seed, stream)
    t[rows == 0] = 0.0
    return t
