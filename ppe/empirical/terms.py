"""Terms of the performance-model normal form: ``prod_params x^i * log2(x)^j``.

A model is ``c0 + sum_k c_k * term_k``.  Exponents are exact fractions (so a
stored model names ``n^(2/3)``, not ``n^0.6666``); Prophecy's polynomial and
inverse types are terms too (``n^5``, ``n^-2``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Polynomial exponents i of the normal form (the issue's set).
POLY_EXPONENTS: tuple[Fraction, ...] = tuple(
    Fraction(s)
    for s in (
        "0",
        "1/4",
        "1/3",
        "1/2",
        "2/3",
        "3/4",
        "1",
        "5/4",
        "4/3",
        "3/2",
        "2",
        "9/4",
        "5/2",
        "3",
    )
)
#: Logarithm exponents j of the normal form.
LOG_EXPONENTS: tuple[int, ...] = (0, 1, 2)


@dataclass(frozen=True, order=True)
class Factor:
    """``x^i * log2(x)^j`` of one parameter."""

    param: str
    i: Fraction
    j: int = 0

    def evaluate(self, x: FloatArray) -> FloatArray:
        out = np.ones_like(x) if self.i == 0 else np.power(x, float(self.i))
        if self.j:
            out = out * np.log2(x) ** self.j
        return out

    @property
    def needs_positive(self) -> bool:
        """Logs and non-integer or negative powers are only defined for x > 0."""
        return self.j != 0 or self.i.denominator != 1 or self.i < 0

    def __str__(self) -> str:
        parts = []
        if self.i != 0:
            exp = str(self.i) if self.i.denominator == 1 and self.i > 0 else f"({self.i})"
            parts.append(self.param if self.i == 1 else f"{self.param}^{exp}")
        if self.j:
            parts.append(f"log2({self.param})" + (f"^{self.j}" if self.j > 1 else ""))
        return " * ".join(parts)


@dataclass(frozen=True, order=True)
class Term:
    """A product of factors of distinct parameters (sorted by name)."""

    factors: tuple[Factor, ...]

    @classmethod
    def of(cls, *factors: Factor) -> Term:
        names = [f.param for f in factors]
        if len(set(names)) != len(names):
            raise ValueError(f"a term has one factor per parameter, got {names}")
        return cls(tuple(sorted(factors)))

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(f.param for f in self.factors)

    @property
    def needs_positive(self) -> bool:
        return any(f.needs_positive for f in self.factors)

    def evaluate(self, columns: Mapping[str, FloatArray]) -> FloatArray:
        """The term at each point; ``columns`` maps a parameter name to its values."""
        out: FloatArray | None = None
        for f in self.factors:
            v = f.evaluate(columns[f.param])
            out = v if out is None else out * v
        if out is None:
            raise ValueError("a term needs at least one factor")
        return out

    def times(self, other: Term) -> Term:
        return Term.of(*self.factors, *other.factors)

    def __str__(self) -> str:
        return " * ".join(str(f) for f in self.factors)

    def to_list(self) -> list[dict[str, str | int]]:
        return [{"param": f.param, "i": str(f.i), "j": f.j} for f in self.factors]

    @classmethod
    def from_list(cls, data: Sequence[Mapping[str, str | int]]) -> Term:
        return cls.of(*(Factor(str(d["param"]), Fraction(str(d["i"])), int(d["j"])) for d in data))


def single_factors(
    param: str,
    poly: Sequence[Fraction] = POLY_EXPONENTS,
    logs: Sequence[int] = LOG_EXPONENTS,
) -> list[Factor]:
    """Every non-constant ``x^i log2(x)^j`` of one parameter."""
    return [Factor(param, i, j) for i in poly for j in logs if (i, j) != (0, 0)]


def design(terms: Sequence[Term], columns: Mapping[str, FloatArray], n: int) -> FloatArray:
    """The design matrix ``[1, term_1, ..., term_k]`` at ``n`` points."""
    out = np.ones((n, len(terms) + 1))
    for k, t in enumerate(terms):
        out[:, k + 1] = t.evaluate(columns)
    return out


def formula(coefficients: Sequence[float], terms: Sequence[Term]) -> str:
    """Plain form, e.g. ``0.5 + 1.25e-09 * n^3 - 2e-05 * n * log2(n)``."""
    text = f"{coefficients[0]:.6g}"
    for c, t in zip(coefficients[1:], terms, strict=True):
        sign = "-" if c < 0 else "+"
        text += f" {sign} {abs(c):.6g} * {t}"
    return text
