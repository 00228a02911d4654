"""Quantities in a what-if specification: plain SI numbers, or strings with a unit.

The convention (docs/whatif.md, "Units"): a plain TOML number is in the field's SI unit
(seconds, bytes, bytes per second, flop per second); a string is a number followed by a unit
from the small table below (``"10 Gb/s"``, ``"50 us"``, ``"64 GiB"``, ``"2 Gflop/s"``), whose
dimension must be the field's. A string without a unit is refused: a bare ``"100"`` could be
bits or bytes, so the reader is asked to say which. Counts (``number``, ``ports``, ``size``,
``floatsperunit``, ...) take plain numbers only.

A table and a regular expression, not a units library: the fields need five dimensions, and
the table makes the accepted spellings (and the bit/byte distinction) explicit.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass

__all__ = ["DIMENSIONS", "UnitError", "parse_quantity", "unit_names"]


class UnitError(ValueError):
    """A quantity that cannot be read; the message says what was expected."""


#: What each dimension is called in messages, and its SI unit.
DIMENSIONS: dict[str, tuple[str, str]] = {
    "time": ("a time", "s"),
    "bytes": ("a size in bytes", "B"),
    "rate": ("a bandwidth in bytes or bits per second", "B/s"),
    "flops": ("a speed in floating-point operations per second", "flop/s"),
    "count": ("a plain number", ""),
}

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def _table() -> dict[str, tuple[str, float]]:
    """Unit spelling -> (dimension, factor to SI)."""
    out: dict[str, tuple[str, float]] = {
        "s": ("time", 1.0),
        "ms": ("time", 1e-3),
        "us": ("time", 1e-6),
        "µs": ("time", 1e-6),
        "ns": ("time", 1e-9),
        "min": ("time", 60.0),
        "h": ("time", 3600.0),
    }
    for prefix, f in {**_DECIMAL, **_BINARY}.items():
        out[f"{prefix}B"] = ("bytes", f)
        out[f"{prefix}B/s"] = ("rate", f)
        out[f"{prefix}b/s"] = ("rate", f / 8.0)
    for prefix, f in _DECIMAL.items():
        if prefix != "K":
            out[f"{prefix}bps"] = ("rate", f / 8.0)
        for flop in ("flop/s", "Flop/s", "FLOP/s", "flops", "Flops", "FLOPS"):
            out[f"{prefix}{flop}"] = ("flops", f)
    return out


_UNITS = _table()
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S.*?)?\s*$")


def unit_names(dimension: str) -> list[str]:
    """The spellings accepted for ``dimension`` (for messages)."""
    return [u for u, (d, _) in _UNITS.items() if d == dimension]


@dataclass(frozen=True)
class Quantity:
    """A value in SI units, and the unit it was written in (``""``: a plain number)."""

    value: float
    unit: str


def parse_quantity(raw: object, dimension: str) -> Quantity:
    """``raw`` (a number or a string with a unit) in the SI unit of ``dimension``.

    Raises :class:`UnitError` for a string without a unit, an unknown unit (with the nearest
    spelling), a unit of another dimension, or anything that is not a finite number.
    """
    what, si = DIMENSIONS[dimension]
    if isinstance(raw, bool):
        raise UnitError(f"expected {what}, got {raw!r}")
    if isinstance(raw, int | float):
        value = float(raw)
        if not math.isfinite(value):
            raise UnitError(f"expected {what}, got {raw!r}")
        return Quantity(value, "")
    if not isinstance(raw, str):
        raise UnitError(f"expected {what}, got {type(raw).__name__} {raw!r}")
    m = _QUANTITY.match(raw)
    if m is None:
        raise UnitError(f"expected {what} such as {_example(dimension)}, got {raw!r}")
    number, unit = float(m.group(1)), (m.group(2) or "")
    if dimension == "count":
        raise UnitError(f"expected a plain number (no unit, no quotes), got {raw!r}")
    if not unit:
        raise UnitError(
            f"missing unit in {raw!r}: write a plain number (in {si}) or a number with a "
            f"unit, such as {_example(dimension)}"
        )
    known = _UNITS.get(unit)
    if known is None:
        near = difflib.get_close_matches(unit, list(_UNITS), n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise UnitError(f"unknown unit {unit!r} in {raw!r}{hint}")
    dim, factor = known
    if dim != dimension:
        raise UnitError(
            f"inconsistent unit in {raw!r}: this field takes {what} (such as "
            f"{_example(dimension)}), and {unit!r} is {DIMENSIONS[dim][0]}"
        )
    return Quantity(number * factor, unit)


def _example(dimension: str) -> str:
    return {
        "time": "'50 us'",
        "bytes": "'64 GiB'",
        "rate": "'10 Gb/s' or '1.25 GB/s'",
        "flops": "'2 Gflop/s'",
        "count": "16",
    }[dimension]
