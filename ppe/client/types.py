"""Typed values the client sends and receives (plain dataclasses over the service's JSON)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Measurement:
    """One sample for ``POST /api/v1/measurements``; stamped now unless a time is given."""

    resource: str
    metric: str
    value: float
    timestamp: float = field(default_factory=time.time)
    peer: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "resource": self.resource,
            "metric": self.metric,
            "timestamp": self.timestamp,
            "value": self.value,
        }
        if self.peer is not None:
            out["peer"] = self.peer
        return out


@dataclass(frozen=True)
class Strip:
    """A host's share of the grid: ``rows`` rows starting at ``first_row`` (chain order)."""

    host: str
    rows: int
    first_row: int
    raw: dict[str, Any] = field(repr=False, compare=False)


@dataclass(frozen=True)
class Schedule:
    """A served schedule. ``id`` is what a run report links to (``RunReport.schedule_id``);
    ``replan`` is the server's verdict when the request gave ``current`` (``move``: whether
    moving to these strips pays once the migration is counted)."""

    id: int
    app: str
    strategy: str
    strips: list[Strip]
    makespan: dict[str, Any]
    horizon_s: float | None
    replan: dict[str, Any] | None
    warnings: list[str]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Schedule:
        strips, first = [], 0
        for item in body["allocation"]:
            rows = int(item["rows"])
            strips.append(Strip(host=str(item["host"]), rows=rows, first_row=first, raw=item))
            first += rows
        return cls(
            id=int(body["id"]),
            app=str(body["app"]),
            strategy=str(body["strategy"]),
            strips=strips,
            makespan=dict(body["makespan"]),
            horizon_s=body.get("horizon_s"),
            replan=body.get("replan"),
            warnings=list(body.get("warnings", [])),
            raw=dict(body),
        )

    @property
    def rows(self) -> dict[str, int]:
        """Rows per host."""
        return {s.host: s.rows for s in self.strips}


@dataclass
class RunReport:
    """What a run reports to ``POST /api/v1/runs`` (the run store's RunIn)."""

    app: str
    values: Sequence[float]
    kernel: str = "total"
    params: dict[str, float] = field(default_factory=dict)
    system: str | None = None
    metric: str = "time"
    schedule_id: int | None = None
    status: str = "completed"
    report: dict[str, Any] | None = None
    key: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "kernel": self.kernel,
            "params": dict(self.params),
            "system": self.system,
            "metric": self.metric,
            "values": [float(v) for v in self.values],
            "schedule_id": self.schedule_id,
            "status": self.status,
            "report": self.report,
            "key": self.key,
        }
