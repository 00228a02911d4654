"""A machine profile as a few named numbers: the system parameters templates and grammars see.

The catalogue of names (:data:`PROFILE_PARAMETERS`: each name's unit, meaning and ``worst``
rule for groups) lives in :mod:`ppe.core.profile_figures`, because the grammar checks models
against it and sits below this package; this module computes the values from a profile:
``flops_*`` and ``*_s`` are the profile's flop and overhead figures, ``mem_<kind>_<pattern>_
smallest``/``_largest`` the single-copy curve's rate at the smallest and at the largest working
set the profile measured (the first cache level, and the last level the probe reached: DRAM
for a full or quick profile on hosts whose last-level cache is below 128 MiB).

Pure: the caller reads the profile.
"""

from __future__ import annotations

from ppe.core.profile_figures import (
    PROFILE_PARAMETERS,
    ProfileParameter,
    memory_name,
)
from ppe.pmac.profile import FLOP_KINDS, KINDS, OVERHEAD_KINDS, PATTERNS, MachineProfile

__all__ = ["PROFILE_PARAMETERS", "ProfileParameter", "memory_name", "profile_parameters"]


def profile_parameters(profile: MachineProfile) -> dict[str, float]:
    """The profile's figures named as in :data:`PROFILE_PARAMETERS` (each the median of its
    repetitions)."""
    out = {f"flops_{k}": profile.flops[k].value for k in FLOP_KINDS}
    out.update({f"{k}_s": profile.overheads[k].value for k in OVERHEAD_KINDS})
    for kind in KINDS:
        for pattern in PATTERNS:
            curve, _ = profile.curve(pattern, kind, 1)
            out[memory_name(kind, pattern, "smallest")] = curve.points[0].rate.value
            out[memory_name(kind, pattern, "largest")] = curve.points[-1].rate.value
    return out
