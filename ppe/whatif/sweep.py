"""Sweeps: a numeric field given as a list or a range becomes an axis of values.

Forms (docs/whatif.md, "Sweeps"):

* a list: ``number = [8, 16, 32]`` (elements may carry units: ``["1 Gb/s", "10 Gb/s"]``);
* an absolute range: ``"8..4096"`` (doubling), ``"8..4096 x4"`` (geometric, factor 4),
  ``"100..1000 +100"`` (arithmetic); the ends may carry units: ``"1 Gb/s..16 Gb/s"``;
* a relative range: ``"10 Gb/s x0.5..x4"`` (the base value times 0.5, 1, 2, 4), or
  ``"x0.5..x4"`` alone for a field with a default (the default is the base).

The spec's points are the cartesian product of its axes, at most :data:`MAX_POINTS`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MAX_POINTS", "MAX_VALUES", "SweepError", "is_range", "range_values"]

#: Points a spec may expand to (the product of its axes' lengths).
MAX_POINTS = 1000
#: Values one range may produce.
MAX_VALUES = 1000

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_STEP = re.compile(rf"^(?P<hi>.*?)\s+(?P<op>[x+])(?P<step>{_NUM})\s*$")
_FACTOR = re.compile(rf"^(?P<base>.*?)\s*x(?P<f>{_NUM})\s*$")


class SweepError(ValueError):
    """A range that cannot be expanded; the message says why."""


@dataclass(frozen=True)
class Step:
    op: str  # "x" geometric, "+" arithmetic
    value: float


def is_range(raw: object) -> bool:
    """A string that asks for a range (it holds ``..``)."""
    return isinstance(raw, str) and ".." in raw


def range_values(
    raw: str, parse: Callable[[str], float], default: float | None, field: str
) -> tuple[float, ...]:
    """Expand a range string; ``parse`` reads one end (units allowed) in the field's SI unit,
    ``default`` is the base of a relative range that gives none."""
    left, _, right = raw.partition("..")
    step = Step("x", 2.0)
    m = _STEP.match(right.strip())
    if m is not None:
        step = Step(m.group("op"), float(m.group("step")))
        right = m.group("hi")
    right = right.strip()
    if right.startswith("x"):
        return _relative(raw, left.strip(), right, step, parse, default, field)
    lo, hi = parse(left.strip()), parse(right)
    return _expand(raw, lo, hi, step)


def _relative(
    raw: str,
    left: str,
    right: str,
    step: Step,
    parse: Callable[[str], float],
    default: float | None,
    field: str,
) -> tuple[float, ...]:
    m = _FACTOR.match(left)
    if m is None:
        raise SweepError(f"{raw!r}: a relative range is written 'x0.5..x4' or '10 Gb/s x0.5..x4'")
    hi_factor = _number(right[1:], raw)
    base_text = m.group("base").strip()
    if base_text:
        base = parse(base_text)
    elif default is not None:
        base = default
    else:
        raise SweepError(
            f"{raw!r}: a relative range needs a base value and {field} has no default; "
            f"write it before the range, e.g. '10 Gb/s x0.5..x4'"
        )
    factors = _expand(raw, float(m.group("f")), hi_factor, step)
    return tuple(base * f for f in factors)


def _number(text: str, raw: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SweepError(f"{raw!r}: {text!r} is not a number") from None


def _expand(raw: str, lo: float, hi: float, step: Step) -> tuple[float, ...]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise SweepError(f"{raw!r}: the range must go from a smaller to a larger value")
    if step.op == "x":
        if not step.value > 1:
            raise SweepError(f"{raw!r}: a geometric step must be a factor above 1")
        if not lo > 0:
            raise SweepError(f"{raw!r}: a geometric range must start above 0")
        count = math.floor(math.log(hi / lo) / math.log(step.value) + 1e-9) + 1
        values = [lo * step.value**k for k in range(min(count, MAX_VALUES + 1))]
    else:
        if not step.value > 0:
            raise SweepError(f"{raw!r}: an arithmetic step must be above 0")
        count = math.floor((hi - lo) / step.value + 1e-9) + 1
        values = [lo + k * step.value for k in range(min(count, MAX_VALUES + 1))]
    if count > MAX_VALUES:
        raise SweepError(f"{raw!r} gives {count} values; at most {MAX_VALUES}")
    return tuple(values)
