"""Calibrated busy work: a fixed NumPy kernel standing in for a traced program's compute bursts.

One *unit* is one in-cache daxpy (``y += a x`` over 2,048 doubles, 48 KB with its temporary),
so it measures the core and its caches, not the memory. A burst of ``s`` traced seconds runs
``round(s * rate)`` units, where ``rate`` is the units per second of the traced machine (from
``--calibrate`` there) or of this one.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

__all__ = ["KERNEL", "Busy"]

KERNEL = "daxpy of 2048 doubles"
DOUBLES = 2048


class Busy:
    """The kernel's arrays, allocated once so that no unit allocates or faults pages."""

    def __init__(self) -> None:
        self.x = np.linspace(0.0, 1.0, DOUBLES)
        self.y = np.zeros(DOUBLES)
        self.t = np.empty(DOUBLES)

    def run(self, units: int) -> None:
        x, y, t = self.x, self.y, self.t
        for _ in range(units):
            np.multiply(x, 1e-3, out=t)
            np.add(y, t, out=y)

    def rate(self, seconds: float = 0.3, batches: int = 5) -> float:
        """Units per second: the median of ``batches`` batches lasting ``seconds`` in all."""
        units = 16
        while True:
            t0 = time.perf_counter()
            self.run(units)
            took = time.perf_counter() - t0
            if took >= seconds / batches:
                break
            units *= 2
        rates = []
        for _ in range(batches):
            t0 = time.perf_counter()
            self.run(units)
            rates.append(units / (time.perf_counter() - t0))
        return float(statistics.median(rates))
