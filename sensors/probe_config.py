"""What the machine-profile probe measures (``ProbeConfig``), apart from the probe itself
(sensors/profile.py) so that the daemon can hold one without importing numpy."""

from __future__ import annotations

from dataclasses import dataclass

MIN_BYTES = 8 * 1024


@dataclass(frozen=True)
class ProbeConfig:
    """What to measure: sizes ``MIN_BYTES * 4^k`` up to ``max_bytes`` (steps of 2 from
    ``fine_from`` on, where the last cache level ends and rates change fastest), ``reps``
    repetitions of inner loops of at least ``min_time`` CPU seconds, sharing with 2, 4, 8, …
    copies up to ``copies`` and the host's usable CPUs (:meth:`sharing_counts`)."""

    max_bytes: int
    reps: int
    min_time: float
    copies: int
    dense_n: int
    fine_from: int | None = None

    @classmethod
    def quick(cls) -> ProbeConfig:
        return cls(max_bytes=128 << 20, reps=3, min_time=0.002, copies=4, dense_n=256)

    @classmethod
    def full(cls) -> ProbeConfig:
        return cls(
            max_bytes=512 << 20, reps=5, min_time=0.02, copies=16, dense_n=512, fine_from=8 << 20
        )

    def sizes(self) -> list[int]:
        out, size = [], MIN_BYTES
        while size <= self.max_bytes:
            out.append(size)
            fine = self.fine_from is not None and size >= self.fine_from
            size *= 2 if fine else 4
        return out

    def sharing_counts(self, cpus: int) -> tuple[int, ...]:
        """How many copies each sharing sweep runs: doubling from 2 (the cost grows with each
        sweep, the curves change least between large counts) up to the cap, the cap itself
        included; the cap is ``copies`` and one copy per usable CPU (more copies than cores
        would measure time slicing, not sharing). Empty on one CPU or with ``copies = 1``."""
        cap = min(self.copies, cpus)
        counts = []
        k = 2
        while k < cap:
            counts.append(k)
            k *= 2
        if cap >= 2:
            counts.append(cap)
        return tuple(counts)
