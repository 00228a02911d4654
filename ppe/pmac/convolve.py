"""The convolution: a signature's operations at a profile's rates, seconds per unit of work.

Memory time ``M`` is the sum over the signature's memory entries of ``count * bytes / rate``,
the rate read off the profile's curve for the entry's pattern and kind at its working set (and
for ``ranks_per_host`` copies: the sharing curve). Flop time ``F`` is ``count / rate`` for each
flop entry. How they combine is a choice (``overlap``):

* ``none``: ``M + F`` (nothing overlaps; right for code whose passes do one thing at a time);
* ``full``: ``max(M, F)`` (perfect overlap: the slower side hides the other);
* ``fraction``: ``max(M, F) + (1 - f) * min(M, F)`` with ``f`` in [0, 1], fitted on measured
  kernels with :func:`fit_overlap` (``f = 0`` is ``none``, ``f = 1`` is ``full``).

Interpreter overhead (numpy calls and slices) is added on top: it runs between passes and
overlaps nothing. Messages, when the signature has them and the profile measured them, add to
the time per iteration. The spread comes from the profile's repetitions: within one
operation class the terms share their curves' errors (standard deviations add), classes are
independent (variances add). Every extrapolation (a working set or a number of copies outside
what the profile measured) is listed in ``notes``: the result is never silently clamped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ppe.core.stochastic import Normal
from ppe.pmac.profile import MachineProfile
from ppe.pmac.signature import Signature, SignatureError

OVERLAPS = ("none", "full", "fraction")


@dataclass(frozen=True)
class Term:
    """One line of the breakdown: seconds per unit (before overlap) and its spread."""

    op_class: str  # "memory", "flops", "overhead"
    name: str  # e.g. "read stride2 @ 1.2 MB", "stencil"
    count: float  # operations per unit
    seconds: float
    rel_sd: float


@dataclass(frozen=True)
class Convolution:
    signature: str
    unit: str
    params: Mapping[str, float]
    per_unit: Normal
    per_iteration: Normal
    units_per_iteration: float
    memory_seconds: float
    flop_seconds: float
    overhead_seconds: float
    message_seconds_per_iteration: float
    terms: tuple[Term, ...]
    overlap: str
    fraction: float | None
    ranks_per_host: int
    notes: tuple[str, ...]

    @property
    def extrapolated(self) -> bool:
        return bool(self.notes)

    def breakdown(self) -> dict[str, float]:
        """Seconds per unit by operation class (memory and flops before overlap)."""
        return {
            "memory": self.memory_seconds,
            "flops": self.flop_seconds,
            "overhead": self.overhead_seconds,
        }


def combine(memory: float, flops: float, overlap: str, fraction: float | None) -> float:
    """Memory and flop seconds combined by the overlap model (see the module docstring)."""
    big, small = max(memory, flops), min(memory, flops)
    if overlap == "none":
        return memory + flops
    if overlap == "full":
        return big
    if overlap == "fraction":
        if fraction is None or not 0.0 <= fraction <= 1.0:
            raise ValueError(f"overlap 'fraction' needs a fraction in [0, 1], got {fraction!r}")
        return big + (1.0 - fraction) * small
    raise ValueError(f"unknown overlap {overlap!r} (known: {', '.join(OVERLAPS)})")


def fit_overlap(cases: Sequence[tuple[float, float, float]]) -> float:
    """The overlap fraction ``f`` in [0, 1] that best fits measured times: ``cases`` are
    ``(memory, flops, measured)`` seconds with overhead already taken out; least squares on
    the relative error of ``max + (1 - f) * min``."""
    num = den = 0.0
    for m, f, t in cases:
        if t <= 0:
            raise ValueError("measured times must be positive")
        big, small = max(m, f), min(m, f)
        # relative residual (big + small - f*small - t)/t is linear in f: slope -small/t
        a, b = -small / t, (big + small - t) / t
        num += a * b
        den += a * a
    if den == 0:
        return 1.0
    return min(1.0, max(0.0, -num / den))


def _mb(x: float) -> str:
    return f"{x / 1e6:.3g} MB"


def convolve(
    signature: Signature,
    profile: MachineProfile,
    params: Mapping[str, float],
    *,
    ranks_per_host: int = 1,
    overlap: str = "full",
    fraction: float | None = None,
    neighbours: int = 0,
    peer: str | None = None,
) -> Convolution:
    """Predicted seconds per unit of work (and per iteration) of ``signature`` on the host
    ``profile`` describes, with ``ranks_per_host`` ranks sharing it and ``neighbours``
    neighbours to message each iteration."""
    if overlap not in OVERLAPS:
        raise ValueError(f"unknown overlap {overlap!r} (known: {', '.join(OVERLAPS)})")
    combine(0.0, 0.0, overlap, fraction)  # reject a bad fraction before any work
    if (
        isinstance(ranks_per_host, bool)
        or not isinstance(ranks_per_host, int)
        or ranks_per_host < 1
    ):
        raise ValueError(f"ranks_per_host must be an integer >= 1, got {ranks_per_host!r}")
    if neighbours < 0:
        raise ValueError(f"neighbours must be >= 0, got {neighbours!r}")
    values = signature.bind(params)
    memo: dict[str, float] = {}
    notes: list[str] = []
    terms: list[Term] = []
    for i, op in enumerate(signature.memory):
        where = f"memory[{i}]"
        count = op.count.value(values, f"{where}.count", memo)
        size = op.bytes.value(values, f"{where}.bytes", memo)
        ws = op.working_set.value(values, f"{where}.working_set", memo)
        if ws <= 0:
            raise SignatureError(f"{where}.working_set = {op.working_set.text} is 0 bytes")
        est = profile.memory_rate(op.pattern, op.kind, ws, ranks_per_host)
        if est.note:
            notes.append(est.note)
        seconds = count * size / est.value
        name = f"{op.kind} {op.pattern} @ {_mb(ws)}"
        terms.append(Term("memory", name, count, seconds, est.rel_sd))
    for i, flop_op in enumerate(signature.flops):
        count = flop_op.count.value(values, f"flops[{i}].count", memo)
        fig = profile.flops[flop_op.kind]
        terms.append(Term("flops", flop_op.kind, count, count / fig.value, fig.rel_sd))
    for i, extra in enumerate(signature.overheads):
        count = extra.count.value(values, f"overhead[{i}].count", memo)
        fig = profile.overheads[extra.kind]
        terms.append(Term("overhead", extra.kind, count, count * fig.value, fig.rel_sd))

    def total(cls: str) -> tuple[float, float]:
        chosen = [t for t in terms if t.op_class == cls]
        return sum(t.seconds for t in chosen), sum(t.seconds * t.rel_sd for t in chosen)

    (mem, mem_sd), (flop, flop_sd), (ovh, ovh_sd) = (
        total("memory"),
        total("flops"),
        total("overhead"),
    )
    mean = combine(mem, flop, overlap, fraction) + ovh
    # the spread follows the combination: each side weighted by how much of it counts
    w_mem, w_flop = 1.0, 1.0
    if overlap != "none":
        hidden = 1.0 if overlap == "full" else float(fraction or 0.0)
        if mem >= flop:
            w_flop = 1.0 - hidden
        else:
            w_mem = 1.0 - hidden
    sd = math.sqrt((w_mem * mem_sd) ** 2 + (w_flop * flop_sd) ** 2 + ovh_sd**2)

    units = signature.units_per_iteration.value(values, "units_per_iteration", memo)
    msg = msg_sd = 0.0
    if neighbours and signature.messages:
        for i, m in enumerate(signature.messages):
            count = m.count.value(values, f"messages[{i}].count", memo)
            size = m.bytes.value(values, f"messages[{i}].bytes", memo)
            sent = profile.message_seconds(peer, size)
            if sent is None:
                notes.append("the profile has no message figures: messages are not included")
                break
            if sent.note:
                notes.append(sent.note)
            msg += neighbours * count * sent.value
            msg_sd += neighbours * count * sent.value * sent.rel_sd
    per_iter_sd = math.sqrt((sd * units) ** 2 + msg_sd**2)
    return Convolution(
        signature=signature.name,
        unit=signature.unit,
        params=values,
        per_unit=Normal(mean, sd),
        per_iteration=Normal(mean * units + msg, per_iter_sd),
        units_per_iteration=units,
        memory_seconds=mem,
        flop_seconds=flop,
        overhead_seconds=ovh,
        message_seconds_per_iteration=msg,
        terms=tuple(terms),
        overlap=overlap,
        fraction=fraction if overlap == "fraction" else None,
        ranks_per_host=ranks_per_host,
        notes=tuple(dict.fromkeys(notes)),
    )
