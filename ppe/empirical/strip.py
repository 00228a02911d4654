"""A performance model for an application PPE knows only from its runs.

Issue 18's "into the pipeline": an application that is not SOR, Jacobi2D or a registered
grammar is scheduled from the empirical model of its ``row`` kernel (the dedicated time of one
row for one iteration, as a function of the application's parameters).  The strip model is
plain grammar text built around ``empirical(app, "row", ...)``, so predictions and schedules
run it through the same engines as every other model, with the CPU forecasts applied as
today: a host's time is ``I * (rows * RowTime / FracAvailCPU + halo exchanges)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ppe.core.grammar import RESERVED

from .errors import EmpiricalError

#: The kernel whose model gives an application's time per row and iteration.
ROW_KERNEL = "row"
#: Model parameters that are the strip model's own: the grid side, iterations, hosts.
_OWN = {"n": "n", "I": "I", "iterations": "I", "P": "P"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def strip_model_text(app: str, params: Sequence[str], kernel: str = ROW_KERNEL) -> str:
    """Grammar text scheduling ``app`` in horizontal strips from its ``kernel`` model, whose
    parameters are ``params``: ``n``, ``I`` (``iterations``) and ``P`` are the strip model's
    own; any other becomes a parameter of the strip model, given in a request's ``params``."""
    for text, what in ((app, "application"), (kernel, "kernel")):
        if '"' in text or "\n" in text:
            raise EmpiricalError(f"the {what} name {text!r} cannot be quoted in a model")
    extra = [p for p in params if p not in _OWN]
    for p in extra:
        if not _IDENT.match(p) or p in RESERVED or p in ("Size", "Halo", "RowTime"):
            raise EmpiricalError(
                f"the {kernel!r} model of {app!r} has a parameter {p!r} that a performance "
                "model cannot name; refit it without it",
                name=p,
            )
    point = ", ".join(f"{p} = {_OWN.get(p, p)}" for p in params)
    h, q = [v for v in ("p", "q", "h", "k", "host", "peer") if v not in extra][:2]
    declared = "".join(f"param {p}\n" for p in extra)
    return f'''# {app}: horizontal strips, each row costing what its "{kernel}" model says
# (the dedicated time of one row for one iteration), slowed by the host's CPU share;
# every iteration each host sends Halo rows of n * Size bytes to each chain neighbour.
param n                     # grid side: rows to distribute, and the row length
param I alias iterations
param Size = 8              # bytes per element
param Halo = 1              # rows sent to each neighbour per iteration
{declared}require n >= 1 : "n (grid side) must be at least 1"
require I >= 0 : "the number of iterations must not be negative"
require Halo >= 0 : "Halo (rows exchanged) must not be negative"

RowTime = empirical("{app}", "{kernel}"{", " if point else ""}{point})
Comm[{h}] = sum({q} in neighbours({h}): Halo * n * Size / BWAvail[{h}, {q}] + Latency[{h}, {q}])
HostTime[{h}] = I * (rows[{h}] * RowTime / FracAvailCPU[{h}] + Comm[{h}])
ExecTime = max({h} in hosts: HostTime[{h}])
'''
