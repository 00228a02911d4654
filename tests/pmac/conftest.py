"""Hand-made figures and profiles for the PMaC tests (numbers chosen so results are exact)."""

from __future__ import annotations

from typing import Any

from ppe.pmac import KINDS, PATTERNS, Curve, CurvePoint, Figure, MachineProfile


def fig(value: float, spread: float = 0.0) -> Figure:
    return Figure.of([value * (1 - spread), value, value * (1 + spread)], 0.01, "hand")


def curve(pattern: str, kind: str, rates: dict[int, float], copies: int = 1) -> Curve:
    return Curve(
        pattern, kind, copies, tuple(CurvePoint(b, fig(r)) for b, r in sorted(rates.items()))
    )


def hand_profile(**changes: Any) -> MachineProfile:
    """Every curve 1 GB/s at 1 KiB and 0.25 GB/s at 1 MiB (stride2 read: 2 and 0.5)."""
    memory = []
    for p in PATTERNS:
        for k in KINDS:
            scale = 2.0 if (p, k) == ("stride2", "read") else 1.0
            memory.append(curve(p, k, {1024: 1e9 * scale, 1 << 20: 0.25e9 * scale}))
    args: dict[str, Any] = {
        "host": "h0",
        "measured_at": 1.7e9,
        "method": "hand",
        "memory": tuple(memory),
        "flops": {"dense": fig(1e10), "stencil": fig(1e9)},
        "overheads": {"call": fig(1e-6), "view": fig(2e-7)},
    }
    args.update(changes)
    return MachineProfile(**args)
