"""Re-planning a running application: when to ask again, and whether moving rows pays.

A static schedule has to hedge against every fall a host might take during the whole run:
a host that may stall gets fewer rows even when it never does. An application that checks
its progress every few minutes and asks for a new schedule when it falls behind only needs
forecasts up to its next check, and pays for a fall with the time it takes to notice it
plus the time to move the strips (AppLeS and GrADS re-scheduled running applications the
same way). This module holds the two decisions and the cost of moving strips; the
pipeline (``ppe.pipeline.replan``) and replay (``ppe.replay.adaptive``) use them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReplanPolicy:
    """How often a running application checks its progress, and when it acts on it.

    ``every_s``: seconds between checks; a plan made for re-planning forecasts this far
    ahead only. ``lag``: the run is behind when the time since its last plan exceeds
    ``lag`` times the predicted time of the iterations done since. ``min_gain``: rows move
    only when the new schedule, migration included, is predicted this share faster than
    keeping the current one.
    """

    every_s: float = 300.0
    lag: float = 1.2
    min_gain: float = 0.05

    def __post_init__(self) -> None:
        if not (math.isfinite(self.every_s) and self.every_s > 0):
            raise ValueError(f"every_s must be a positive number of seconds, got {self.every_s!r}")
        if not (math.isfinite(self.lag) and self.lag >= 1):
            raise ValueError(f"lag must be >= 1, got {self.lag!r}")
        if not (0 <= self.min_gain < 1):
            raise ValueError(f"min_gain must be in [0, 1), got {self.min_gain!r}")

    def behind(self, elapsed_s: float, iterations_done: int, seconds_per_iteration: float) -> bool:
        """Is a run that took ``elapsed_s`` for ``iterations_done`` iterations since its
        last plan, predicted at ``seconds_per_iteration``, late enough to ask again?
        A run that has not finished one iteration counts as one done."""
        return elapsed_s > self.lag * seconds_per_iteration * max(iterations_done, 1)

    def worth_moving(self, keep_s: float, move_s: float, migration_s: float) -> bool:
        """Take the new schedule (predicted ``move_s`` for the rest of the run, plus
        ``migration_s`` to move strips) over keeping the current one (``keep_s``)?"""
        return move_s + migration_s < (1.0 - self.min_gain) * keep_s


def migration_seconds(
    old_rows: Sequence[int],
    new_rows: Sequence[int],
    row_bytes: float,
    bandwidth: float,
    latency: float,
) -> float:
    """Time to move from one strip decomposition to another along the chain.

    Strips are contiguous in chain order, so the rows that change hands cross each boundary
    between neighbours: boundary ``p`` moves by the difference of the cumulative row counts
    there. Every link carries its own boundary's rows at the same time, so the move takes
    as long as the busiest link: one latency plus its rows times ``row_bytes`` over
    ``bandwidth``. No move, no cost.
    """
    old = np.asarray(old_rows, dtype=np.int64)
    new = np.asarray(new_rows, dtype=np.int64)
    if old.shape != new.shape or old.ndim != 1:
        raise ValueError("old and new rows must list the same hosts")
    if old.sum() != new.sum():
        raise ValueError(f"a move keeps the rows: {int(old.sum())} before, {int(new.sum())} after")
    if not (bandwidth > 0 and row_bytes >= 0 and latency >= 0):
        raise ValueError("bandwidth must be > 0, row_bytes and latency >= 0")
    shift = np.abs(np.cumsum(new)[:-1] - np.cumsum(old)[:-1]).max(initial=0)
    return 0.0 if shift == 0 else float(latency + shift * row_bytes / bandwidth)
