"""Domain checks on measurement batches that go beyond types: ranges, peers, clocks, size."""

from __future__ import annotations

import time

from ppe.service.schemas import METRIC_RANGES, MeasurementIn, Problem
from ppe.service.store.models import LINK_METRICS


def check_item(m: MeasurementIn, now: float, max_future_skew_s: float) -> tuple[str, str] | None:
    """Return (field, reason) for the first thing wrong with one measurement, or None."""
    bounds = METRIC_RANGES[m.metric]
    if m.value not in bounds:
        return "value", f"{m.metric} must be within {bounds}, got {m.value:g}"
    if m.metric in LINK_METRICS and not m.peer:
        return "peer", f"{m.metric} is a link metric: 'peer' is required"
    if m.metric == "cpu" and m.peer:
        return "peer", "cpu is a host metric: 'peer' must be omitted"
    if m.peer and m.peer == m.resource:
        return "peer", "a link needs two different hosts"
    if m.timestamp < 0:
        return "timestamp", f"timestamp must be unix seconds >= 0, got {m.timestamp}"
    if m.timestamp > now + max_future_skew_s:
        return "timestamp", (
            f"timestamp {m.timestamp} is {m.timestamp - now:.0f} s in the future "
            f"(limit {max_future_skew_s:.0f} s): check the sensor's clock and units"
        )
    return None


def check_batch(
    items: list[MeasurementIn], *, max_batch: int, max_future_skew_s: float
) -> list[Problem]:
    if not items:
        return [Problem(field="measurements", reason="empty batch: send at least one measurement")]
    if len(items) > max_batch:
        return [
            Problem(
                field="measurements",
                reason=f"batch of {len(items)} exceeds the limit of {max_batch}; split it",
            )
        ]
    now = time.time()
    problems = []
    for i, m in enumerate(items):
        bad = check_item(m, now, max_future_skew_s)
        if bad:
            problems.append(Problem(index=i, field=bad[0], reason=bad[1]))
            if len(problems) >= 20:
                break
    return problems
