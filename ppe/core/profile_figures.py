"""The named figures of a machine profile: per-host system parameters grammars and templates read.

A whole profile (a dozen curves of a dozen points, each with its repetitions) is not one
number a formula can use; this catalogue picks the figures a hand-written formula is likely
to want and gives each a name that is a grammar identifier, a unit and a rule for groups:

* ``flops_dense``, ``flops_stencil``: flop/s (matrix multiply; a numpy 5-point stencil in the
  first cache levels);
* ``call_s``, ``view_s``: seconds per numpy ufunc call on small strided views, per 2-D view;
* ``mem_<kind>_<pattern>_smallest`` and ``mem_<kind>_<pattern>_largest`` for every kind
  (``read``, ``rmw``) and pattern (``unit``, ``stride2``, ``random``): bytes of elements
  accessed per second by one copy at the smallest and at the largest working set the
  profile measured.

It lives in the core, not in ``ppe.pmac``, because the grammar (the lowest layer) must know
these names to check a model; ``ppe.pmac.profile`` takes its patterns and kinds from here and
``ppe.pmac.profile_parameters`` computes the values from a stored profile. A group of hosts
combines its members' values with ``worst`` (the slowest member: the smallest rate, the
largest overhead), since a balanced step waits for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

#: Access patterns: consecutive elements, every other element (numpy's strided views, the
#: red-black colours), and uniformly random elements of the working set.
PATTERNS = ("unit", "stride2", "random")
#: ``read``: load each element once; ``rmw``: load, update and store it in place.
KINDS = ("read", "rmw")
#: ``dense``: matrix multiply (BLAS, one thread); ``stencil``: a 5-point numpy stencil whose
#: data sits in the first-level cache, so the figure is its arithmetic rate.
FLOP_KINDS = ("dense", "stencil")
#: ``call``: one numpy ufunc call on small 2-D strided views (as stencil code makes them);
#: ``view``: one 2-D strided slice.
OVERHEAD_KINDS = ("call", "view")


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
