"""What a spec names outside itself, read once before anything is evaluated.

A spec may reference machine profiles (``profile = "host.json"``), recorded load traces
(``load = {kind = "traces", files = [...]}``), a grammar file (``model = "mine.ppg"``), a
signature (``signature = "app.toml"``) and registered hosts (``host = "h1"``, and their live
forecasts). Where those come from depends on who answers: the CLI reads files next to the
spec, the service (a later slice) reads its store. So the evaluation takes a :class:`Resolver`
and this module asks it for every reference up front, turning each failure into a spec
problem at the line that names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ppe.core import CompiledModel, GrammarError, get_model
from ppe.core.stochastic import StochasticValue
from ppe.pmac import MachineProfile, Signature, builtin_signature, parse_signature
from ppe.pmac.signature import BUILTIN as BUILTIN_SIGNATURES
from ppe.whatif.spec import Problem, Spec, SpecError, WhatIf

__all__ = ["LoadTrace", "RegisteredHost", "ResolveError", "Resolver", "Resources", "resolve"]

FloatArray = npt.NDArray[np.float64]


class ResolveError(ValueError):
    """A reference the resolver cannot answer; the message says why."""


@dataclass(frozen=True)
class LoadTrace:
    """A recorded load: CPU availability (0..1) at strictly increasing times."""

    name: str
    timestamps: FloatArray
    availability: FloatArray


@dataclass(frozen=True)
class RegisteredHost:
    """A host the service knows: its benchmark (seconds per unit of the model) or profile, and
    ``cpu(horizon_s)``, its CPU availability forecast averaged over a horizon."""

    name: str
    benchmark: float | None = None
    profile: MachineProfile | None = None
    cpu: Callable[[float | None], StochasticValue] | None = None


class Resolver(Protocol):
    """Where a spec's references are read."""

    def profile(self, ref: str) -> MachineProfile: ...

    def trace(self, ref: str) -> LoadTrace: ...

    def text(self, ref: str) -> str: ...

    def host(self, name: str) -> RegisteredHost: ...


@dataclass(frozen=True)
class Resources:
    """Every reference of a spec, read: by reference string."""

    profiles: Mapping[str, MachineProfile] = field(default_factory=dict)
    traces: Mapping[str, LoadTrace] = field(default_factory=dict)
    hosts: Mapping[str, RegisteredHost] = field(default_factory=dict)
    model: CompiledModel | None = None
    signature: Signature | None = None


def resolve(whatif: WhatIf, resolver: Resolver) -> Resources:
    """Read everything ``whatif`` names (references are not sweepable, so the first point
    names them all); :class:`SpecError` lists each one that failed, at its line."""
    spec = whatif.points[0].spec
    problems: list[Problem] = []
    profiles: dict[str, MachineProfile] = {}
    traces: dict[str, LoadTrace] = {}
    hosts: dict[str, RegisteredHost] = {}

    def attempt(path: tuple[str | int, ...], read: Callable[[], object]) -> object | None:
        try:
            return read()
        except (OSError, ValueError) as exc:  # ProfileError, TraceFormatError... are ValueErrors
            problems.append(whatif.problem(path, f"cannot read it: {_why(exc)}"))
            return None

    for ns in spec.nodesets:
        at = ("nodeset", ns.index)
        if ns.profile is not None and ns.profile not in profiles:
            got = attempt((*at, "profile"), partial(resolver.profile, ns.profile))
            if isinstance(got, MachineProfile):
                profiles[ns.profile] = got
        if ns.host is not None and ns.host not in hosts:
            host = attempt((*at, "host"), partial(resolver.host, ns.host))
            if isinstance(host, RegisteredHost):
                hosts[ns.host] = host
        for i, ref in enumerate(ns.load.files):
            if ref not in traces:
                trace = attempt((*at, "load", "files", i), partial(resolver.trace, ref))
                if isinstance(trace, LoadTrace):
                    traces[ref] = trace
    model = _model(whatif, spec, resolver, problems)
    signature = _signature(whatif, spec, resolver, problems)
    if problems:
        raise SpecError(problems, whatif.source)
    return Resources(profiles, traces, hosts, model, signature)


def _why(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"no such file {exc.filename!r}"
    return str(exc) or type(exc).__name__


def _model(
    whatif: WhatIf, spec: Spec, resolver: Resolver, problems: list[Problem]
) -> CompiledModel | None:
    ref = spec.execution.model
    if ref is None:
        return None
    path = ("execution", "model")
    try:
        model = get_model(ref) if spec.execution.builtin else get_model(resolver.text(ref))
    except GrammarError as exc:
        problems.append(whatif.problem(path, f"{ref}: {exc}"))
        return None
    except (OSError, ValueError) as exc:
        problems.append(whatif.problem(path, f"cannot read {ref!r}: {_why(exc)}"))
        return None
    if model.param("n") is None and model.param("rows") is None:
        problems.append(
            whatif.problem(
                path, f"{ref}: the model must declare param n (or rows): the rows placed"
            )
        )
        return None
    return model


def _signature(
    whatif: WhatIf, spec: Spec, resolver: Resolver, problems: list[Problem]
) -> Signature | None:
    ex = spec.execution
    uses_profile = any(ns.profile is not None or ns.host is not None for ns in spec.nodesets)
    ref = ex.signature or (ex.model if ex.builtin else None)
    if ref is None or not uses_profile:
        return None
    path = ("execution", "signature" if ex.signature else "model")
    try:
        if ref in BUILTIN_SIGNATURES:
            return builtin_signature(ref)
        return parse_signature(resolver.text(ref))
    except (OSError, ValueError) as exc:
        problems.append(whatif.problem(path, f"signature {ref!r}: {_why(exc)}"))
        return None
