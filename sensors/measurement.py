"""One measurement as the service's contract spells it, validated before it is spooled.

Validating on the sensor side matters because the service rejects a batch whole: one bad
value would otherwise take its good neighbours to the dead-letter file with it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

METRICS = ("cpu", "bandwidth", "latency")
LINK_METRICS = ("bandwidth", "latency")
# The service's resource-name pattern (ppe/service/schemas.py); checked at start-up too.
NAME_RE = re.compile(r"^[A-Za-z0-9_.:@\-]{1,255}$")


class InvalidMeasurement(ValueError):
    """A measurement the service would reject; it is never spooled."""


@dataclass(frozen=True)
class Measurement:
    resource: str
    metric: str
    timestamp: float
    value: float
    peer: str | None = None

    def check(self) -> Measurement:
        """Raise InvalidMeasurement for anything the service would refuse; return self."""
        if not NAME_RE.match(self.resource):
            raise InvalidMeasurement(f"bad resource name {self.resource!r}")
        if self.metric not in METRICS:
            raise InvalidMeasurement(f"unknown metric {self.metric!r}")
        if not (math.isfinite(self.value) and math.isfinite(self.timestamp)):
            raise InvalidMeasurement(f"non-finite {self.metric} sample {self.value!r}")
        if self.timestamp < 0:
            raise InvalidMeasurement(f"negative timestamp {self.timestamp}")
        if self.metric == "cpu":
            if self.peer is not None:
                raise InvalidMeasurement("cpu is a host metric and takes no peer")
            if not 0.0 <= self.value <= 1.0:
                raise InvalidMeasurement(f"cpu availability {self.value} outside [0, 1]")
        else:
            if self.peer is None or not NAME_RE.match(self.peer) or self.peer == self.resource:
                raise InvalidMeasurement(f"{self.metric} needs a peer other than itself")
            if self.value < 0:
                raise InvalidMeasurement(f"negative {self.metric} {self.value}")
        return self

    def to_json(self) -> dict[str, Any]:
        """The wire form of POST /api/v1/measurements (peer omitted for host metrics)."""
        out: dict[str, Any] = {
            "resource": self.resource,
            "metric": self.metric,
            "timestamp": self.timestamp,
            "value": self.value,
        }
        if self.peer is not None:
            out["peer"] = self.peer
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Measurement:
        return cls(
            resource=str(d["resource"]),
            metric=str(d["metric"]),
            timestamp=float(d["timestamp"]),
            value=float(d["value"]),
            peer=d.get("peer"),
        )

    @property
    def key(self) -> tuple[str, str, str, float]:
        """What the service is idempotent on."""
        return (self.resource, self.metric, self.peer or "", self.timestamp)
