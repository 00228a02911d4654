"""The systems database of Prophecy's parameterization templates: the figures of a system.

A system is one registered resource or a group of them (``"h0,h1"``).  Its parameters, by
name, come from three places, the first that has a name winning:

1. **derived** from the system's make-up: ``hosts`` (number of resources) and
   ``bcast_rounds = max(1, ceil(log2(hosts)))`` (rounds of a binomial-tree broadcast; at
   least one message even on one resource);
2. **measured** by the sensors (the means of the series' forecasts): ``latency`` (s per
   message), ``bandwidth`` (bytes/s) and ``cpu`` (available fraction).  One resource: the
   mean over its links (as planning takes latency).  A group: the worst of the members with
   measurements, since a message or a balanced step waits for it: the largest ``latency``,
   the smallest ``bandwidth`` and ``cpu``;
3. **properties** of the resources (``PUT /api/v1/resources/{name}``): every number (booleans
   and text are not parameters).  A group has a property when every member has it: the mean
   over the members.  A property named like a measured figure is its fallback when nothing is
   measured.

Pure: the service reads the store and the forecasts and hands :class:`HostFigures` over.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Figures the sensors measure, with how a group combines its members' values.
MEASURED: dict[str, str] = {"latency": "max", "bandwidth": "min", "cpu": "min"}
DERIVED = ("hosts", "bcast_rounds")


@dataclass(frozen=True)
class HostFigures:
    """What the store knows about one resource: its properties as stored, and the forecast
    means of its measured series (per link for ``latency`` and ``bandwidth``)."""

    name: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    measured: Mapping[str, Sequence[float]] = field(default_factory=dict)

    def numbers(self) -> dict[str, float]:
        """The properties that are numbers (finite, not booleans)."""
        out: dict[str, float] = {}
        for key, raw in self.properties.items():
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                continue
            if math.isfinite(float(raw)):
                out[str(key)] = float(raw)
        return out

    def measured_mean(self, metric: str) -> float | None:
        values = [float(v) for v in self.measured.get(metric, ()) if math.isfinite(float(v))]
        return sum(values) / len(values) if values else None


@dataclass(frozen=True)
class System:
    """A system's parameters and where each came from (``derived``, ``measured``,
    ``property``)."""

    name: str
    hosts: tuple[str, ...]
    parameters: dict[str, float]
    sources: dict[str, str]

    def explain_missing(self, name: str) -> str:
        """What the operator can do about a parameter this system lacks."""
        where = ", ".join(self.hosts)
        if name in MEASURED:
            return (
                f"system {self.name!r} has no {name!r}: no {name} measurements of {where} "
                f"(sensors post them) and no {name!r} resource property"
            )
        lacking = "every one of its resources" if len(self.hosts) > 1 else f"resource {where}"
        return (
            f"system {self.name!r} has no parameter {name!r}: set it as a numeric property of "
            f"{lacking} (PUT /api/v1/resources/{{name}}), or give it in params"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "hosts": list(self.hosts),
            "parameters": dict(self.parameters),
            "sources": dict(self.sources),
        }


def bcast_rounds(hosts: int) -> int:
    """Rounds of a binomial-tree broadcast over ``hosts`` resources (at least one)."""
    return max(1, math.ceil(math.log2(max(hosts, 1))))


def system_of(name: str, members: Sequence[HostFigures]) -> System:
    """The system ``name`` made of ``members`` (one for a resource, several for a group)."""
    if not members:
        raise ValueError(f"system {name!r} has no resources")
    params: dict[str, float] = {}
    sources: dict[str, str] = {}
    numbers = [m.numbers() for m in members]
    for key in sorted(set.intersection(*(set(n) for n in numbers))):
        params[key] = sum(n[key] for n in numbers) / len(numbers)
        sources[key] = "property"
    for metric, worst in MEASURED.items():
        means = [v for v in (m.measured_mean(metric) for m in members) if v is not None]
        if means:
            params[metric] = max(means) if worst == "max" else min(means)
            sources[metric] = "measured"
    params["hosts"] = float(len(members))
    params["bcast_rounds"] = float(bcast_rounds(len(members)))
    sources.update(dict.fromkeys(DERIVED, "derived"))
    return System(name, tuple(m.name for m in members), params, sources)
