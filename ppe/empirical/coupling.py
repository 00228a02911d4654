"""Prophecy's kernel coupling (Taylor et al.): how kernels of a loop affect each other.

``C_AB = P_AB / (P_A + P_B)``: the time of kernels A and B run together over the
sum of their times alone (< 1: they help each other, e.g. shared cache; > 1: they
interfere).  For a loop ``K_0 -> K_1 -> ... -> K_{n-1} -> K_0`` the time is
``T = sum_i alpha_i * P_i`` with each kernel's coefficient the average of the
couplings of the two adjacent pairs it belongs to, weighted by those pairs' times
(the seed formula for a loop A, B, C: ``psi = (C_AB P_AB + C_CA P_CA) / (P_AB + P_CA)``
and its rotations).  Couplings measured at one input are reused at others
("isocoupling") when they are stable across the inputs measured;
:func:`coupling_stability` says whether they are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import CouplingError

Pair = tuple[str, str]


def pair_coupling(p_pair: float, p_a: float, p_b: float) -> float:
    """``C_AB = P_AB / (P_A + P_B)``."""
    for name, v in (("P_AB", p_pair), ("P_A", p_a), ("P_B", p_b)):
        if not (math.isfinite(v) and v > 0):
            raise CouplingError(f"{name} must be a finite time > 0, got {v!r}")
    return p_pair / (p_a + p_b)


def loop_pairs(kernels: Sequence[str]) -> list[Pair]:
    """The adjacent pairs of a loop, in order: (K0, K1), (K1, K2), ..., (K_{n-1}, K0)."""
    n = len(kernels)
    if n < 2 or len(set(kernels)) != n:
        raise CouplingError(f"a loop needs at least two distinct kernels, got {list(kernels)}")
    if n == 2:
        return [(kernels[0], kernels[1])]
    return [(kernels[i], kernels[(i + 1) % n]) for i in range(n)]


def _pair_time(pairs: Mapping[Pair, float], a: str, b: str) -> float:
    if (a, b) in pairs:
        return pairs[(a, b)]
    if (b, a) in pairs:
        return pairs[(b, a)]
    raise CouplingError(f"kernels {a!r} and {b!r} were never run as a pair", name=f"{a}+{b}")


@dataclass(frozen=True)
class LoopCoupling:
    """Couplings of a loop's adjacent pairs and each kernel's coefficient."""

    kernels: tuple[str, ...]
    couplings: dict[Pair, float]
    pair_times: dict[Pair, float]
    coefficients: dict[str, float]

    def predict(self, times: Mapping[str, float]) -> float:
        """``T = sum_i alpha_i * P_i`` for kernel times ``P_i`` (e.g. from their models)."""
        missing = [k for k in self.kernels if k not in times]
        if missing:
            raise CouplingError(f"no time for kernel {missing[0]!r}", name=missing[0])
        return float(sum(self.coefficients[k] * float(times[k]) for k in self.kernels))

    def to_dict(self) -> dict[str, object]:
        return {
            "kernels": list(self.kernels),
            "couplings": [{"pair": list(p), "value": c} for p, c in self.couplings.items()],
            "coefficients": dict(self.coefficients),
        }


def loop_coupling(
    kernels: Sequence[str], alone: Mapping[str, float], pairs: Mapping[Pair, float]
) -> LoopCoupling:
    """Couplings and coefficients of the loop ``kernels`` from times alone and in pairs."""
    order = loop_pairs(kernels)
    for k in kernels:
        if k not in alone:
            raise CouplingError(f"kernel {k!r} was never run alone", name=k)
    times = {p: _pair_time(pairs, *p) for p in order}
    couplings = {p: pair_coupling(times[p], alone[p[0]], alone[p[1]]) for p in order}
    coefficients = {}
    for k in kernels:
        mine = [p for p in order if k in p]
        weight = sum(times[p] for p in mine)
        coefficients[k] = sum(couplings[p] * times[p] for p in mine) / weight
    return LoopCoupling(tuple(kernels), couplings, times, coefficients)


@dataclass(frozen=True)
class Stability:
    """Couplings across inputs: each pair's range and relative spread, and the mean coefficients."""

    tolerance: float
    spread: dict[Pair, float]
    ranges: dict[Pair, tuple[float, float]]
    coefficients: dict[str, float]

    @property
    def unstable(self) -> list[Pair]:
        return [p for p, s in self.spread.items() if s > self.tolerance]

    @property
    def stable(self) -> bool:
        return not self.unstable

    def message(self) -> str:
        if self.stable:
            most = max(self.spread.values())
            return f"couplings vary by at most {most:.1%} across inputs: reusable"
        worst = ", ".join(f"{a}+{b} ({self.spread[(a, b)]:.1%})" for a, b in self.unstable)
        return (
            f"couplings are not stable across inputs (tolerance {self.tolerance:.0%}): {worst}; "
            "measure the pairs at the input to predict"
        )


def coupling_stability(by_input: Mapping[str, LoopCoupling], tolerance: float = 0.1) -> Stability:
    """Isocoupling check: spread ``(max - min) / mean`` of each pair's coupling across inputs.

    ``coefficients`` are the mean coefficients over the inputs (what a reuse applies).
    """
    loops = list(by_input.values())
    if len(loops) < 2:
        raise CouplingError("stability needs couplings measured at two inputs or more")
    kernels = loops[0].kernels
    if any(lc.kernels != kernels for lc in loops):
        raise CouplingError("the inputs' loops name different kernels")
    spread, ranges = {}, {}
    for p in loops[0].couplings:
        vals = [lc.couplings[p] for lc in loops]
        lo, hi = min(vals), max(vals)
        ranges[p] = (lo, hi)
        spread[p] = (hi - lo) / (sum(vals) / len(vals))
    coefs = {k: sum(lc.coefficients[k] for lc in loops) / len(loops) for k in kernels}
    return Stability(tolerance, spread, ranges, coefs)
