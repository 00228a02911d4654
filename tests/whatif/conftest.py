"""Spec texts and an in-memory resolver for the what-if tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import numpy as np

from ppe.pmac import MachineProfile
from ppe.whatif import LoadTrace, RegisteredHost, ResolveError, WhatIf, parse_spec

T = TypeVar("T")

SOR_SCRIPT = '''"""
use distribution strips
repeat iterations {
  compute fraction 0.5   # red half-sweep
  send halo
  compute fraction 0.5   # black half-sweep
  send halo
  synchronize
}
"""'''


def cluster(
    *,
    number: object = 8,
    floatspeed: object = 1e9,
    load: str = '{kind = "dedicated"}',
    bandwidth: object = 1.25e7,
    latency: object = 5e-4,
    n: object = 1000,
    iterations: int = 10,
    execution: str = 'model = "sor"',
    extra_nodeset: str = "",
) -> str:
    """A homogeneous machine (one nodeset 'node', one chain linkset 'net') running a grid."""
    return f"""
title = "test cluster"

[[nodeset]]
name = "node"
type = "cpu"
number = {_toml(number)}
floatspeed = {_toml(floatspeed)}
load = {load}
{extra_nodeset}
[[linkset]]
name = "net"
across = "node"
topology = "chain"
latency = {_toml(latency)}
bandwidth = {_toml(bandwidth)}

[[dataset]]
name = "grid"
type = "grid2dim"
size = {_toml(n)}
bytesperunit = 8
floatsperunit = 8

[[distribution]]
name = "strips"
type = "block1dim"
dataset = "grid"
nodeset = "node"

[execution]
{execution}
iterations = {iterations}
"""


def two_nodesets(
    *,
    fast: int = 4,
    slow: int = 4,
    fast_speed: float = 2e9,
    slow_speed: float = 1e9,
    fast_load: str = '{kind = "dedicated"}',
    slow_load: str = '{kind = "dedicated"}',
    bandwidth: object = 1e9,
    latency: object = 0.0,
    n: int = 2000,
    iterations: int = 10,
    execution: str = 'model = "sor"',
    extra: str = "",
) -> str:
    """Two cpu nodesets on one chain: 'fast' then 'slow', joined by an updown linkset."""
    return f"""
[[nodeset]]
name = "fast"
number = {fast}
floatspeed = {fast_speed!r}
load = {fast_load}

[[nodeset]]
name = "slow"
number = {slow}
floatspeed = {slow_speed!r}
load = {slow_load}

[[linkset]]
name = "lan-fast"
across = "fast"
bandwidth = {_toml(bandwidth)}
latency = {_toml(latency)}

[[linkset]]
name = "lan-slow"
across = "slow"
bandwidth = {_toml(bandwidth)}
latency = {_toml(latency)}

[[linkset]]
name = "bridge"
updown = ["fast", "slow"]
bandwidth = {_toml(bandwidth)}
latency = {_toml(latency)}
{extra}
[[dataset]]
name = "grid"
type = "grid2dim"
size = {n}
floatsperunit = 8

[[distribution]]
name = "strips"
type = "block1dim"
dataset = "grid"
nodeset = ["fast", "slow"]

[execution]
{execution}
iterations = {iterations}
"""


def _toml(v: object) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return repr(v)


class MemoryResolver:
    """References answered from dictionaries (unknown ones are refused like missing files)."""

    def __init__(
        self,
        *,
        profiles: Mapping[str, MachineProfile] | None = None,
        traces: Mapping[str, LoadTrace] | None = None,
        texts: Mapping[str, str] | None = None,
        hosts: Mapping[str, RegisteredHost] | None = None,
    ) -> None:
        self.profiles = dict(profiles or {})
        self.traces = dict(traces or {})
        self.texts = dict(texts or {})
        self.hosts = dict(hosts or {})

    def profile(self, ref: str) -> MachineProfile:
        return self._get(self.profiles, ref)

    def trace(self, ref: str) -> LoadTrace:
        return self._get(self.traces, ref)

    def trace_dir(self, ref: str) -> list[str]:
        """The traces named ``ref/NAME``, in the order given (a folder with none is missing)."""
        inside = [r for r in self.traces if r.rsplit("/", 1)[0] == ref.rstrip("/")]
        if not inside:
            raise FileNotFoundError(2, "No such folder", ref)
        return inside

    def text(self, ref: str) -> str:
        return self._get(self.texts, ref)

    def host(self, name: str) -> RegisteredHost:
        if name not in self.hosts:
            raise ResolveError(f"no registered host {name!r}")
        return self.hosts[name]

    @staticmethod
    def _get(table: Mapping[str, T], ref: str) -> T:
        if ref not in table:
            raise FileNotFoundError(2, "No such file", ref)
        return table[ref]


def parse(text: str) -> WhatIf:
    return parse_spec(text, "test.toml")


#: Two recorded loads (two weeks at 5 min, around 0.7) and the spec's load naming them.
TWO_TRACES_LOAD = '{kind = "traces", files = ["t0.csv", "t1.csv"]}'


def two_traces() -> dict[str, LoadTrace]:
    """The traces TWO_TRACES_LOAD names, the same each call (seeded)."""
    rng = np.random.default_rng(3)
    ts = np.arange(0.0, 14 * 86400.0, 300.0)
    return {
        f"t{i}.csv": LoadTrace(
            f"t{i}", ts, np.clip(0.7 + 0.1 * rng.standard_normal(ts.size), 0.05, 1.0)
        )
        for i in range(2)
    }
