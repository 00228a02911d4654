"""Prophecy's parameterization templates: a formula over application and system parameters.

A template such as ``ADDM*N^3/(P-1) + 2*N*MPISR(L)/(P-1) + N*MPIBC(L)`` is one expression of
the performance grammar (:func:`ppe.core.grammar.compile_expression`: ``+ - * / ^``,
``max``/``min``, ``if``), evaluated by the grammar's evaluator.  Its names are the
application's parameters (given per evaluation) and the system's (:mod:`.systems`: resource
properties, measured latency/bandwidth/cpu, ``hosts``, ``bcast_rounds``), so one template
evaluates on every registered system.  A name given in the parameters wins over the
system's.

System functions (:data:`SYSTEM_FUNCTIONS`), message costs from the system's link figures:

* ``MPISR(L) = latency + L / bandwidth``: one point-to-point message of ``L`` bytes;
* ``MPIBC(L) = bcast_rounds * MPISR(L)``: a broadcast of ``L`` bytes along a binomial tree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ppe.core.errors import ModelError, ParameterError
from ppe.core.evaluate import evaluate_expression, expression_names
from ppe.core.grammar import CompiledExpression, Function, compile_expression, define_function

from .errors import EmpiricalError
from .systems import System

#: name -> (formal parameters, body): the message-cost functions a template may call.
SYSTEM_FUNCTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "MPISR": (("L",), "latency + L / bandwidth"),
    "MPIBC": (("L",), "bcast_rounds * MPISR(L)"),
}


class TemplateError(EmpiricalError):
    """A template cannot be evaluated with these parameters."""

    kind = "template"


class MissingSystemParameter(TemplateError):
    """The system lacks a parameter the template (or a function it calls) uses; ``name``."""

    kind = "missing_system_parameter"


@lru_cache(maxsize=1)
def system_functions() -> dict[str, Function]:
    arities = {name: len(formals) for name, (formals, _) in SYSTEM_FUNCTIONS.items()}
    return {
        name: define_function(name, formals, body, arities)
        for name, (formals, body) in SYSTEM_FUNCTIONS.items()
    }


@dataclass(frozen=True, eq=False)
class Template:
    """A checked template: its expression and every name it needs (its functions' included)."""

    text: str
    expression: CompiledExpression
    names: tuple[str, ...]

    def describe(self) -> dict[str, Any]:
        return {"names": list(self.names), "functions": list(self.expression.calls)}


def compile_template(text: str) -> Template:
    """Parse and check a template; raises :class:`~ppe.core.errors.GrammarError` (every
    problem in ``.errors``)."""
    functions = system_functions()
    expr = compile_expression(text, {name: len(f.formals) for name, f in functions.items()})
    return Template(text, expr, expression_names(expr, functions))


def check_params(template: Template, params: Mapping[str, float]) -> None:
    """Parameters must be names the template uses, with finite values."""
    for key, value in params.items():
        if key not in template.names:
            raise ParameterError(
                f"the template does not use {key!r}; it uses: {', '.join(template.names)}",
                name=key,
            )
        if isinstance(value, bool) or not math.isfinite(float(value)):
            raise ParameterError(f"parameter {key!r} must be a finite number", name=key)


def evaluate_template(template: Template, params: Mapping[str, float], system: System) -> float:
    """The template's value on ``system``; a name neither given nor the system's raises
    :class:`MissingSystemParameter` naming it."""
    values = {**system.parameters, **{k: float(v) for k, v in params.items()}}
    for name in template.names:
        if name not in values:
            raise MissingSystemParameter(system.explain_missing(name), name=name)
    return evaluate_expression(template.expression, values, system_functions())


@dataclass(frozen=True)
class SystemValue:
    """A template on one system: its value (or the problem that prevented it) and the
    system parameters it used, with where each came from."""

    system: System
    value: float | None
    problem: ModelError | None
    used: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "system": self.system.name,
            "hosts": list(self.system.hosts),
            "value": self.value,
            "parameters": dict(self.used),
            "sources": {k: self.system.sources[k] for k in self.used},
        }
        if self.problem is not None:
            out["problem"] = {"status": 422, **self.problem.to_dict()}
        return out


def evaluate_on_systems(
    template: Template, params: Mapping[str, float], systems: Sequence[System]
) -> list[SystemValue]:
    """The template on each system; a system's own problem (a missing parameter, a division
    by zero with its figures) is reported for it alone, bad ``params`` for the whole call."""
    check_params(template, params)
    out = []
    for system in systems:
        used = {
            n: system.parameters[n]
            for n in template.names
            if n in system.parameters and n not in params
        }
        try:
            value: float | None = evaluate_template(template, params, system)
            problem: ModelError | None = None
        except ModelError as exc:
            value, problem = None, exc
        out.append(SystemValue(system, value, problem, used))
    return out
