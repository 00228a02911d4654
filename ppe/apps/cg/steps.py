"""ppe-cg's run as a sequence of steps, each one compute burst (on every rank) and its messages.

Iteration ``i`` (1-based) is a ``matvec`` step (``p = r + βp``, ``q = Ap``, allreduce of
``p·q``) and an ``update`` step (``x``, ``r``, halo exchange of ``r``, allreduce of ``r·r``),
then a ``check`` step (the true residual ``b - Ax``: two allreduces, its sum of squares and its
largest magnitude) when ``i`` is a multiple of ``check_every`` or the last iteration, then a
``checkpoint`` step (every rank writes its rows of ``x``) when ``i`` is a multiple of
``checkpoint_every`` (0: never). Step ``k`` (0-based) is the ``k``-th compute burst of rank 0
after the set-up: the step a PAS2P phase records as its first (``ppe.pas2p.execution``), so a
signature run can run any step alone from its index.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHECK", "CHECKPOINT", "KINDS", "MATVEC", "UPDATE", "Schedule", "Step"]

MATVEC, UPDATE, CHECK, CHECKPOINT = "matvec", "update", "check", "checkpoint"
KINDS = (MATVEC, UPDATE, CHECK, CHECKPOINT)


@dataclass(frozen=True)
class Step:
    kind: str
    iteration: int  # 1-based


@dataclass(frozen=True)
class Schedule:
    iterations: int
    check_every: int
    checkpoint_every: int = 0  # 0: no checkpoints

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.check_every < 1 or self.checkpoint_every < 0:
            raise ValueError(
                f"iterations and check_every must be >= 1 and checkpoint_every >= 0, not "
                f"{self.iterations}, {self.check_every}, {self.checkpoint_every}"
            )

    def checks(self, i: int) -> bool:
        return i % self.check_every == 0 or i == self.iterations

    def checkpoints(self, i: int) -> bool:
        return self.checkpoint_every > 0 and i % self.checkpoint_every == 0

    def kinds(self, i: int) -> list[str]:
        """Iteration ``i``'s steps in order."""
        out = [MATVEC, UPDATE]
        if self.checks(i):
            out.append(CHECK)
        if self.checkpoints(i):
            out.append(CHECKPOINT)
        return out

    def start(self, i: int) -> int:
        """The index of iteration ``i``'s first step (``i = iterations + 1``: the count)."""
        done = i - 1  # iterations before i; the last one's extra check lies after them all
        checks = done // self.check_every + (1 if i > self.iterations else 0)
        if i > self.iterations and self.iterations % self.check_every == 0:
            checks -= 1  # the last iteration's check is a regular one
        points = done // self.checkpoint_every if self.checkpoint_every else 0
        return 2 * done + checks + points

    @property
    def count(self) -> int:
        return self.start(self.iterations + 1)

    def at(self, index: int) -> Step:
        """Step ``index`` (0-based): binary search for its iteration, then its place in it."""
        if not 0 <= index < self.count:
            raise IndexError(f"step {index} is not among the run's {self.count} steps")
        lo, hi = 1, self.iterations  # the largest i with start(i) <= index
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.start(mid) <= index:
                lo = mid
            else:
                hi = mid - 1
        return Step(self.kinds(lo)[index - self.start(lo)], lo)

    def all(self) -> list[Step]:
        return [Step(kind, i) for i in range(1, self.iterations + 1) for kind in self.kinds(i)]
