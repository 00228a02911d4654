"""A machine profile as a few named numbers: the system parameters templates and grammars see.

A template (``ppe.empirical.templates``) is a formula over named numbers; a whole profile (a
dozen curves of a dozen points, each with its repetitions) is not one. This module picks
the figures a hand-written formula is likely to want and gives each a name that is a grammar
identifier and says its unit:

* ``flops_dense``, ``flops_stencil``: flop/s (matrix multiply; a numpy 5-point stencil in the
  first cache levels);
* ``call_s``, ``view_s``: seconds per numpy ufunc call on small strided views, per 2-D view;
* ``mem_<kind>_<pattern>_smallest`` and ``mem_<kind>_<pattern>_largest`` for every kind
  (``read``, ``rmw``) and pattern (``unit``, ``stride2``, ``random``): bytes of elements
  accessed per second by one copy at the smallest and at the largest working set the
  profile measured (the first cache level, and the last level the probe reached: DRAM for
  a full or quick profile on hosts whose last-level cache is below 128 MiB).

Pure: the caller reads the profile. A group of hosts combines its members' values with
:data:`PROFILE_PARAMETERS`' ``worst`` (the slowest member: the smallest rate, the largest
overhead), since a balanced step waits for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ppe.pmac.profile import FLOP_KINDS, KINDS, OVERHEAD_KINDS, PATTERNS, MachineProfile


@dataclass(frozen=True)
class ProfileParameter:
    """One named number a profile supplies: its unit, what it is, and which of several
    hosts' values a group takes (``min`` for rates, ``max`` for seconds)."""

    name: str
    unit: str
    doc: str
    worst: Literal["min", "max"]


_FLOP_DOCS = {
    "dense": "matrix multiply (BLAS, one thread)",
    "stencil": "a numpy 5-point stencil whose data sits in the first cache levels",
}
_OVERHEAD_DOCS = {
    "call": "one numpy ufunc call on small 2-D strided views",
    "view": "one 2-D strided slice",
}
_PATTERN_DOCS = {
    "unit": "consecutive elements",
    "stride2": "every other element of every other row",
    "random": "random elements",
}
_KIND_DOCS = {"read": "reading", "rmw": "updating in place"}
_END_DOCS = {"smallest": "the smallest", "largest": "the largest"}


def memory_name(kind: str, pattern: str, end: Literal["smallest", "largest"]) -> str:
    return f"mem_{kind}_{pattern}_{end}"


def _catalogue() -> Mapping[str, ProfileParameter]:
    out = [ProfileParameter(f"flops_{k}", "flop/s", _FLOP_DOCS[k], "min") for k in FLOP_KINDS] + [
        ProfileParameter(f"{k}_s", "s", _OVERHEAD_DOCS[k], "max") for k in OVERHEAD_KINDS
    ]
    for kind in KINDS:
        for pattern in PATTERNS:
            for end in ("smallest", "largest"):
                doc = (
                    f"{_KIND_DOCS[kind]} {_PATTERN_DOCS[pattern]}, one copy, at "
                    f"{_END_DOCS[end]} measured working set"
                )
                out.append(ProfileParameter(memory_name(kind, pattern, end), "B/s", doc, "min"))
    return MappingProxyType({p.name: p for p in out})


#: Every parameter a profile supplies, by name (a valid profile supplies all of them).
PROFILE_PARAMETERS: Mapping[str, ProfileParameter] = _catalogue()


def profile_parameters(profile: MachineProfile) -> dict[str, float]:
    """The profile's figures named as in :data:`PROFILE_PARAMETERS` (each the mean of its
    repetitions)."""
    out = {f"flops_{k}": profile.flops[k].value for k in FLOP_KINDS}
    out.update({f"{k}_s": profile.overheads[k].value for k in OVERHEAD_KINDS})
    for kind in KINDS:
        for pattern in PATTERNS:
            curve, _ = profile.curve(pattern, kind, 1)
            out[memory_name(kind, pattern, "smallest")] = curve.points[0].rate.value
            out[memory_name(kind, pattern, "largest")] = curve.points[-1].rate.value
    return out
