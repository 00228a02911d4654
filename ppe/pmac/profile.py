"""A machine profile: the rates at which one host does basic operations, and their JSON form.

Every figure keeps its repetitions (``samples``), the wall time spent measuring it and the
method, so a reader can judge it and the convolution can turn the repetitions into a spread.
Memory figures are **bytes of elements accessed per second** (an 8-byte element read or
updated counts 8 bytes, whatever whole cache lines the hardware moves), measured at a series
of working-set sizes for each access pattern and kind; a curve with ``copies = k > 1`` is the
rate *each* of k copies got while all ran at once (the sharing curve). Flop figures are flop/s;
overhead figures are seconds per interpreter-level operation; message figures are seconds for
one message of a size. Validation refuses what the convolution could not use honestly:
missing patterns or levels, working-set sizes out of order, non-positive or non-finite values.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ppe.core.profile_figures import FLOP_KINDS as FLOP_KINDS
from ppe.core.profile_figures import KINDS as KINDS
from ppe.core.profile_figures import OVERHEAD_KINDS as OVERHEAD_KINDS
from ppe.core.profile_figures import PATTERNS as PATTERNS

FORMAT = "ppe-pmac-profile"
FORMAT_VERSION = 1
# The patterns, kinds, flop kinds and overheads a profile holds are named once, with the
# catalogue of figures grammars read (``ppe.core.profile_figures``).


class ProfileError(ValueError):
    """A profile that cannot be used: the message names the figure and what is wrong."""


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProfileError(f"{what} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ProfileError(f"{what} must be positive and finite, got {value!r}")
    return v


@dataclass(frozen=True)
class Figure:
    """One measured figure: its central value (the median of the repetitions: robust to the
    odd repetition a shared machine spoils), the repetitions,
    the wall seconds the measurement took and how it was measured."""

    value: float
    samples: tuple[float, ...]
    seconds: float = 0.0
    method: str = ""

    def check(self, what: str) -> None:
        _positive(self.value, what)
        if not self.samples:
            raise ProfileError(f"{what}: no repetitions (samples is empty)")
        for i, s in enumerate(self.samples):
            _positive(s, f"{what} repetition {i}")
        if not math.isfinite(self.seconds) or self.seconds < 0:
            raise ProfileError(f"{what}: seconds measured must be >= 0, got {self.seconds!r}")

    @cached_property
    def rel_sd(self) -> float:
        """The repetitions' sample standard deviation relative to the value (0 for one)."""
        n = len(self.samples)
        if n < 2:
            return 0.0
        mean = sum(self.samples) / n
        var = sum((s - mean) ** 2 for s in self.samples) / (n - 1)
        return math.sqrt(var) / self.value

    @classmethod
    def of(cls, samples: Sequence[float], seconds: float = 0.0, method: str = "") -> Figure:
        vals = tuple(float(s) for s in samples)
        return cls(statistics.median(vals) if vals else 0.0, vals, float(seconds), method)


@dataclass(frozen=True)
class CurvePoint:
    """A rate at one working-set size; ``overhead_fraction`` is the share of one timed call
    that was fixed per-call cost (subtracted before the rate was computed)."""

    bytes: int
    rate: Figure
    overhead_fraction: float = 0.0


@dataclass(frozen=True)
class Curve:
    """Bytes/s over working-set sizes for one pattern and kind, with ``copies`` running."""

    pattern: str
    kind: str
    copies: int
    points: tuple[CurvePoint, ...]

    @property
    def name(self) -> str:
        return f"{self.kind} {self.pattern} x{self.copies}"

    @cached_property
    def table(self) -> tuple[list[float], list[float], list[float]]:
        """log(size), seconds per byte and relative spread at each point, for interpolation."""
        return (
            [math.log(p.bytes) for p in self.points],
            [1.0 / p.rate.value for p in self.points],
            [p.rate.rel_sd for p in self.points],
        )

    def check(self) -> None:
        if self.pattern not in PATTERNS:
            raise ProfileError(f"unknown pattern {self.pattern!r} (known: {', '.join(PATTERNS)})")
        if self.kind not in KINDS:
            raise ProfileError(f"unknown kind {self.kind!r} (known: {', '.join(KINDS)})")
        if isinstance(self.copies, bool) or not isinstance(self.copies, int) or self.copies < 1:
            raise ProfileError(f"{self.name}: copies must be an integer >= 1")
        if len(self.points) < 2:
            raise ProfileError(f"{self.name}: needs at least 2 working-set sizes")
        previous = 0.0
        for p in self.points:
            size = _positive(p.bytes, f"{self.name}: working-set size")
            if size <= previous:
                raise ProfileError(
                    f"{self.name}: working-set sizes must increase (non-monotone levels): "
                    f"{int(size)} after {int(previous)}"
                )
            previous = size
            p.rate.check(f"{self.name} at {p.bytes} B")
            if not 0.0 <= p.overhead_fraction < 1.0:
                raise ProfileError(f"{self.name} at {p.bytes} B: overhead_fraction not in [0, 1)")


@dataclass(frozen=True)
class MessageCurve:
    """One-way seconds for one message of each size to ``peer`` (PingPong-like)."""

    peer: str
    points: tuple[tuple[int, Figure], ...]

    def check(self) -> None:
        if len(self.points) < 2:
            raise ProfileError(f"messages to {self.peer}: needs at least 2 message sizes")
        previous = -1
        for size, fig in self.points:
            if not isinstance(size, int) or size <= previous:
                raise ProfileError(
                    f"messages to {self.peer}: sizes must be increasing integers (non-monotone)"
                )
            previous = size
            fig.check(f"messages to {self.peer} of {size} B")


@dataclass(frozen=True)
class Estimate:
    """A rate read off a curve: the value, its relative spread, and a note when the working
    set or the number of copies lay outside what was measured (the value is then an
    extrapolation, never a silent clamp)."""

    value: float
    rel_sd: float
    note: str | None = None


@dataclass(frozen=True)
class MachineProfile:
    host: str
    measured_at: float
    method: str
    memory: tuple[Curve, ...]
    flops: Mapping[str, Figure]
    overheads: Mapping[str, Figure]
    messages: tuple[MessageCurve, ...] = ()
    quick: bool = False
    machine: Mapping[str, Any] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        if self.version != FORMAT_VERSION:
            raise ProfileError(f"profile format version {self.version!r} (this reads 1)")
        if not self.memory:
            raise ProfileError("the profile has no memory curves")
        seen: dict[int, set[tuple[str, str]]] = {}
        for curve in self.memory:
            curve.check()
            key = (curve.pattern, curve.kind)
            have = seen.setdefault(curve.copies, set())
            if key in have:
                raise ProfileError(f"two curves for {curve.name}")
            have.add(key)
        wanted = {(p, k) for p in PATTERNS for k in KINDS}
        if 1 not in seen:
            raise ProfileError("the profile has no single-copy memory curves")
        for copies, have in sorted(seen.items()):
            missing = sorted(wanted - have)
            if copies == 1 and missing:
                names = ", ".join(f"{k} {p}" for p, k in missing)
                raise ProfileError(f"missing memory curves (levels) for one copy: {names}")
            if copies > 1 and not have:
                raise ProfileError(f"no memory curves for {copies} copies")
        for kinds, figures, unit in (
            (FLOP_KINDS, self.flops, "flop rate"),
            (OVERHEAD_KINDS, self.overheads, "overhead"),
        ):
            for kind in kinds:
                if kind not in figures:
                    raise ProfileError(f"missing {unit} {kind!r}")
            for kind, fig in figures.items():
                fig.check(f"{unit} {kind!r}")
        for m in self.messages:
            m.check()

    # --------------------------------------------------------------- reading rates

    def copies_measured(self) -> tuple[int, ...]:
        return tuple(sorted({c.copies for c in self.memory}))

    def curve(self, pattern: str, kind: str, copies: int = 1) -> tuple[Curve, str | None]:
        """The curve for ``copies`` ranks sharing the host; when not measured, the nearest
        measured count at or below it (and a note saying so)."""
        if pattern not in PATTERNS:
            raise ProfileError(f"unknown pattern {pattern!r} (known: {', '.join(PATTERNS)})")
        if kind not in KINDS:
            raise ProfileError(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
        have = [c for c in self.memory if c.pattern == pattern and c.kind == kind]
        exact = [c for c in have if c.copies == copies]
        if exact:
            return exact[0], None
        below = [c for c in have if c.copies <= copies]
        chosen = max(below, key=lambda c: c.copies)
        return chosen, (
            f"{kind} {pattern}: {copies} copies not measured, used the {chosen.copies}-copy "
            "curve (extrapolated)"
        )

    def memory_rate(self, pattern: str, kind: str, working_set: float, copies: int = 1) -> Estimate:
        """Bytes/s at ``working_set`` bytes: time per byte interpolated linearly in
        log(working set) between measured sizes; beyond the measured range the end level is
        carried on (the next level of the hierarchy is assumed to be the last one measured),
        and the estimate says so."""
        curve, note = self.curve(pattern, kind, copies)
        logs, inv, cvs = curve.table
        ws = float(working_set)
        if not math.isfinite(ws) or ws <= 0:
            raise ProfileError(f"working set must be positive, got {working_set!r}")
        notes = [note] if note else []
        x = math.log(ws)
        if x < logs[0] or x > logs[-1]:
            end = 0 if x < logs[0] else -1
            first, last = curve.points[0].bytes, curve.points[-1].bytes
            notes.append(
                f"{kind} {pattern}: working set {ws:.0f} B outside the measured "
                f"{first}..{last} B; extrapolated with the "
                f"{'smallest' if end == 0 else 'largest'} size's rate"
            )
            return Estimate(1.0 / inv[end], cvs[end], "; ".join(notes) or None)
        for i in range(len(logs) - 1):
            lo, hi = logs[i], logs[i + 1]
            if x <= hi:
                t = (x - lo) / (hi - lo)
                per_byte = inv[i] + t * (inv[i + 1] - inv[i])
                cv = cvs[i] + t * (cvs[i + 1] - cvs[i])
                return Estimate(1.0 / per_byte, cv, "; ".join(notes) or None)
        raise AssertionError("unreachable: ws within range")  # pragma: no cover

    def message_seconds(self, peer: str | None, size: float) -> Estimate | None:
        """One-way seconds for a ``size``-byte message to ``peer`` (the first peer when
        None), linear in size between measured sizes; None when no messages were measured."""
        curves = [m for m in self.messages if peer is None or m.peer == peer]
        if not curves:
            return None
        pts = curves[0].points
        sizes = [float(s) for s, _ in pts]
        times = [f.value for _, f in pts]
        cvs = [f.rel_sd for _, f in pts]
        if size < sizes[0] or size > sizes[-1]:
            i = 0 if size < sizes[0] else len(sizes) - 2
            note = (
                f"messages: {size:.0f} B outside the measured {sizes[0]:.0f}..{sizes[-1]:.0f} B; "
                "extrapolated linearly in size"
            )
        else:
            i = max(j for j in range(len(sizes) - 1) if sizes[j] <= size)
            note = None
        slope = (times[i + 1] - times[i]) / (sizes[i + 1] - sizes[i])
        value = max(times[i] + slope * (size - sizes[i]), min(times))
        return Estimate(value, max(cvs[i], cvs[i + 1]), note)


# ------------------------------------------------------------------- JSON form


def _figure_to_dict(f: Figure) -> dict[str, Any]:
    return {"value": f.value, "samples": list(f.samples), "seconds": f.seconds, "method": f.method}


def _figure_from(d: Any, what: str) -> Figure:
    if not isinstance(d, Mapping):
        raise ProfileError(f"{what}: expected an object with value and samples")
    try:
        samples = tuple(float(s) for s in d["samples"])
        return Figure(
            float(d["value"]), samples, float(d.get("seconds", 0.0)), str(d.get("method", ""))
        )
    except KeyError as exc:
        raise ProfileError(f"{what}: missing {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ProfileError(f"{what}: {exc}") from None


def profile_to_dict(p: MachineProfile) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": p.version,
        "host": p.host,
        "measured_at": p.measured_at,
        "method": p.method,
        "quick": p.quick,
        "machine": dict(p.machine),
        "memory": [
            {
                "pattern": c.pattern,
                "kind": c.kind,
                "copies": c.copies,
                "points": [
                    {
                        "bytes": pt.bytes,
                        "overhead_fraction": pt.overhead_fraction,
                        **_figure_to_dict(pt.rate),
                    }
                    for pt in c.points
                ],
            }
            for c in p.memory
        ],
        "flops": {k: _figure_to_dict(f) for k, f in p.flops.items()},
        "overheads": {k: _figure_to_dict(f) for k, f in p.overheads.items()},
        "messages": [
            {"peer": m.peer, "points": [{"bytes": s, **_figure_to_dict(f)} for s, f in m.points]}
            for m in p.messages
        ],
    }


def profile_from_dict(d: Any) -> MachineProfile:
    """A validated profile from its JSON object (raises :class:`ProfileError`)."""
    if not isinstance(d, Mapping):
        raise ProfileError("a profile is a JSON object")
    if d.get("format") != FORMAT:
        raise ProfileError(f"not a machine profile (format {d.get('format')!r}, want {FORMAT!r})")
    if d.get("version") != FORMAT_VERSION:
        raise ProfileError(f"profile format version {d.get('version')!r} (this reads 1)")
    try:
        memory = tuple(
            Curve(
                str(c["pattern"]),
                str(c["kind"]),
                c.get("copies", 1),
                tuple(
                    CurvePoint(
                        pt["bytes"],
                        _figure_from(pt, f"{c['kind']} {c['pattern']} at {pt.get('bytes')} B"),
                        float(pt.get("overhead_fraction", 0.0)),
                    )
                    for pt in c["points"]
                ),
            )
            for c in d["memory"]
        )
        flops = {str(k): _figure_from(v, f"flop rate {k!r}") for k, v in d["flops"].items()}
        overheads = {str(k): _figure_from(v, f"overhead {k!r}") for k, v in d["overheads"].items()}
        messages = tuple(
            MessageCurve(
                str(m["peer"]),
                tuple(
                    (pt["bytes"], _figure_from(pt, f"message to {m['peer']}")) for pt in m["points"]
                ),
            )
            for m in d.get("messages", [])
        )
        return MachineProfile(
            host=str(d.get("host", "")),
            measured_at=float(d.get("measured_at", 0.0)),
            method=str(d.get("method", "")),
            memory=memory,
            flops=flops,
            overheads=overheads,
            messages=messages,
            quick=bool(d.get("quick", False)),
            machine=dict(d.get("machine", {})),
        )
    except KeyError as exc:
        raise ProfileError(f"the profile lacks {exc.args[0]!r}") from None
    except (TypeError, AttributeError) as exc:
        raise ProfileError(f"malformed profile: {exc}") from None


def profile_to_json(p: MachineProfile) -> str:
    return json.dumps(profile_to_dict(p), indent=1)


def profile_from_json(text: str) -> MachineProfile:
    try:
        return profile_from_dict(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ProfileError(f"not JSON: {exc}") from None
