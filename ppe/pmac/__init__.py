"""PMaC-style prediction (Snavely et al.): machine profiles x application signatures.

A **machine profile** (:mod:`.profile`) holds the rates at which a host does basic operations
(memory accesses by pattern and working-set size, floating point, interpreter calls, messages,
and the same memory curves with several copies sharing the host); an **application signature**
(:mod:`.signature`) counts those operations per unit of work; the **convolution**
(:mod:`.convolve`) combines them into predicted seconds per unit, a stochastic value with a
breakdown by operation class; :mod:`.parameters` names a profile's main figures as
system parameters for templates. Pure computation: the probe that measures a profile lives in
``sensors.profile``; files are read and written by the caller. See docs/pmac.md.
"""

from ppe.pmac.convolve import OVERLAPS, Convolution, convolve
from ppe.pmac.parameters import PROFILE_PARAMETERS, ProfileParameter, profile_parameters
from ppe.pmac.profile import (
    FORMAT_VERSION,
    KINDS,
    PATTERNS,
    Curve,
    CurvePoint,
    Figure,
    MachineProfile,
    ProfileError,
    profile_from_dict,
    profile_from_json,
    profile_to_dict,
    profile_to_json,
)
from ppe.pmac.signature import Signature, SignatureError, builtin_signature, parse_signature

__all__ = [
    "FORMAT_VERSION",
    "KINDS",
    "OVERLAPS",
    "PATTERNS",
    "PROFILE_PARAMETERS",
    "Convolution",
    "Curve",
    "CurvePoint",
    "Figure",
    "MachineProfile",
    "ProfileError",
    "ProfileParameter",
    "Signature",
    "SignatureError",
    "builtin_signature",
    "convolve",
    "parse_signature",
    "profile_from_dict",
    "profile_from_json",
    "profile_parameters",
    "profile_to_dict",
    "profile_to_json",
]
