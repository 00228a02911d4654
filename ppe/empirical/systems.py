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
3. **profile**: the named figures of the resource's newest machine profile
   (``ppe.pmac.profile_parameters``: ``flops_dense``, ``call_s``, ``mem_read_unit_largest``,
   ...).  A group has them when every member has a profile: the worst member's (the
   service says which is worst per name: the smallest rate, the largest overhead);
4. **properties** of the resources (``PUT /api/v1/resources/{name}``): every number (booleans
   and text are not parameters).  A group has a property when every member has it: the mean
   over the members.  A property named like a measured or profile figure is its fallback
   when there is none.

Pure: the service reads the store, the forecasts and the profiles and hands
:class:`HostFigures` over (this package does not import ``ppe.pmac``: they are siblings).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

#: Figures the sensors measure, with how a group combines its members' values.
MEASURED: dict[str, str] = {"latency": "max", "bandwidth": "min", "cpu": "min"}
DERIVED = ("hosts", "bcast_rounds")
PROFILE_HINT = (
    "measure one with `ppe profile --out {file}.json` and POST it to "
    "/api/v1/resources/{name}/profiles; the sensor measures one daily"
)
NO_RULES: Mapping[str, Literal["min", "max"]] = MappingProxyType({})


@dataclass(frozen=True)
class HostFigures:
    """What the store knows about one resource: its properties as stored, the forecast
    means of its measured series (per link for ``latency`` and ``bandwidth``), and the named
    figures of its newest machine profile (empty without one)."""

    name: str
    properties: Mapping[str, Any] = field(default_factory=dict)
    measured: Mapping[str, Sequence[float]] = field(default_factory=dict)
    profile: Mapping[str, float] = field(default_factory=dict)

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
    ``profile``, ``property``); ``profile_names`` are the names a machine profile supplies
    and ``unprofiled`` the members without one."""

    name: str
    hosts: tuple[str, ...]
    parameters: dict[str, float]
    sources: dict[str, str]
    profile_names: frozenset[str] = frozenset()
    unprofiled: tuple[str, ...] = ()

    def explain_missing(self, name: str) -> str:
        """What the operator can do about a parameter this system lacks."""
        where = ", ".join(self.hosts)
        if name in self.profile_names and self.unprofiled:
            one = self.unprofiled[0] if len(self.unprofiled) == 1 else None
            hint = PROFILE_HINT.format(file=one or "host", name=one or "{name}")
            lacking = ", ".join(self.unprofiled)
            whose = f"resource {lacking} has" if one else f"resources {lacking} have"
            also = "every one of its resources" if len(self.hosts) > 1 else f"resource {where}"
            return (
                f"system {self.name!r} has no {name!r}: {whose} no machine profile ({hint}), "
                f"and {also} lacks a numeric {name!r} property"
            )
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


def _profile_figures(
    members: Sequence[HostFigures], worst: Mapping[str, Literal["min", "max"]]
) -> dict[str, float]:
    """The group's profile figures: each the worst member's, when every member has one."""
    for m in members:
        unknown = sorted(set(m.profile) - set(worst))
        if unknown:
            raise ValueError(f"{m.name}: profile figures without a rule: {', '.join(unknown)}")
    if any(not m.profile for m in members):
        return {}
    common = set.intersection(*(set(m.profile) for m in members))
    pick = {"min": min, "max": max}
    return {key: pick[worst[key]](m.profile[key] for m in members) for key in sorted(common)}


def system_of(
    name: str,
    members: Sequence[HostFigures],
    profile_worst: Mapping[str, Literal["min", "max"]] = NO_RULES,
) -> System:
    """The system ``name`` made of ``members`` (one for a resource, several for a group).
    ``profile_worst`` names every figure a profile may supply and which member's value a
    group takes (``min`` for rates, ``max`` for seconds)."""
    if not members:
        raise ValueError(f"system {name!r} has no resources")
    params: dict[str, float] = {}
    sources: dict[str, str] = {}
    numbers = [m.numbers() for m in members]
    for key in sorted(set.intersection(*(set(n) for n in numbers))):
        params[key] = sum(n[key] for n in numbers) / len(numbers)
        sources[key] = "property"
    for key, value in _profile_figures(members, profile_worst).items():
        params[key] = value
        sources[key] = "profile"
    for metric, worst in MEASURED.items():
        means = [v for v in (m.measured_mean(metric) for m in members) if v is not None]
        if means:
            params[metric] = max(means) if worst == "max" else min(means)
            sources[metric] = "measured"
    params["hosts"] = float(len(members))
    params["bcast_rounds"] = float(bcast_rounds(len(members)))
    sources.update(dict.fromkeys(DERIVED, "derived"))
    return System(
        name,
        tuple(m.name for m in members),
        params,
        sources,
        frozenset(profile_worst),
        tuple(m.name for m in members if not m.profile),
    )
