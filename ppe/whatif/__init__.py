"""What-if: describe machines that do not exist yet and predict how an application would run
on them, with PetaSIM's objects (nodesets, linksets, datasets, distributions, execution
scripts) on top of PPE's own models, scheduler and stochastic engines (docs/whatif.md).

Pure: a spec is text (:func:`parse_spec`); the files and hosts it names are read by the
caller's :class:`Resolver`; :func:`evaluate` answers every point of the spec's sweep, and
:func:`simulate_whatif` runs it over recorded load at many start times.
"""

from ppe.whatif.analytic import (
    Options,
    WhatIfError,
    evaluate,
    evaluate_point,
    evaluate_resolved,
    model_text,
)
from ppe.whatif.options import Spread
from ppe.whatif.report import NodesetResult, PointResult, Report, format_table
from ppe.whatif.resolve import (
    LoadTrace,
    RegisteredHost,
    ResolveError,
    Resolver,
    Resources,
    resolve,
)
from ppe.whatif.simulated import SimOptions, SimPoint, SimReport, simulate_whatif
from ppe.whatif.spec import Problem, Spec, SpecError, SpecPoint, WhatIf, parse_spec

__all__ = [
    "LoadTrace",
    "NodesetResult",
    "Options",
    "PointResult",
    "Problem",
    "RegisteredHost",
    "Report",
    "ResolveError",
    "Resolver",
    "Resources",
    "SimOptions",
    "SimPoint",
    "SimReport",
    "Spec",
    "SpecError",
    "SpecPoint",
    "Spread",
    "WhatIf",
    "WhatIfError",
    "evaluate",
    "evaluate_point",
    "evaluate_resolved",
    "format_table",
    "model_text",
    "parse_spec",
    "resolve",
    "simulate_whatif",
]
