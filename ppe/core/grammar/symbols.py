"""What a model may refer to (built-in symbols, functions, reserved and required names) and
what compiling it yields (:class:`CompiledModel`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..profile_figures import PROFILE_PARAMETERS
from ..stochastic import StochasticValue
from .nodes import EMPIRICAL, Definition, Empirical, Index, Name, Require, preorder
from .tokens import KEYWORDS


@dataclass(frozen=True)
class Builtin:
    """A system parameter the engine supplies; ``profile``: one of a host's machine-profile
    figures (``HostInputs.system``), in ``unit``."""

    name: str
    arity: int
    stochastic: bool
    doc: str
    profile: bool = False
    unit: str = ""


#: The machine-profile figures, host-indexed like ``Benchmark``: named once, in
#: ``ppe.core.profile_figures.PROFILE_PARAMETERS``.
PROFILE_BUILTINS: dict[str, Builtin] = {
    p.name: Builtin(p.name, 1, False, f"host p's {p.doc}", profile=True, unit=p.unit)
    for p in PROFILE_PARAMETERS.values()
}
BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin("P", 0, False, "number of hosts in the chain"),
        Builtin("rows", 1, False, "rows of the grid allocated to host p"),
        Builtin("Benchmark", 1, False, "dedicated seconds to update one element on host p"),
        Builtin("FracAvailCPU", 1, True, "fraction of host p's CPU available (floored at 0.01)"),
        Builtin("BWAvail", 2, True, "bandwidth available from host p to neighbour q, bytes/s"),
        Builtin("Latency", 2, False, "per-message latency from host p to neighbour q, s"),
        *PROFILE_BUILTINS.values(),
    )
}
FUNCTIONS = frozenset({"max", "min"})
RESERVED = frozenset(BUILTINS) | FUNCTIONS | {"sum", "hosts", "neighbours", EMPIRICAL} | KEYWORDS
#: Components a model must define: the per-host time and the makespan.
REQUIRED = {"HostTime": 1, "ExecTime": 0}


@dataclass(frozen=True)
class ParamSpec:
    name: str
    aliases: tuple[str, ...]
    default: float | None
    line: int


class EmpiricalSource(Protocol):
    """What ``empirical(...)`` reads: a fitted model's run time at a point, as a stochastic
    value (``ppe.empirical.EmpiricalModel`` is one)."""

    def to_stochastic(self, point: Mapping[str, float]) -> StochasticValue: ...


@dataclass(frozen=True)
class CompiledModel:
    """A validated model, ready for :func:`ppe.core.predict`."""

    text: str
    digest: str
    params: tuple[ParamSpec, ...]
    requires: tuple[Require, ...]
    definitions: dict[str, Definition]
    stochastic: dict[str, bool]
    #: canonical body text per component (index variables renamed), for sharing
    canonical: dict[str, str]
    #: free index variables of every expression node, by ``id(node)``
    free_vars: dict[int, frozenset[str]] = field(repr=False)
    #: the ``empirical(...)`` calls, in text order
    empirical_calls: tuple[Empirical, ...] = ()
    #: the fitted models they read, by reference (``("app", "kernel")`` or ``("model",)``):
    #: bound by :func:`ppe.core.bind_empirical`, never by the text
    empirical_models: Mapping[tuple[str, ...], EmpiricalSource] = field(
        default_factory=dict, repr=False, compare=False
    )
    #: names what is bound, for memo keys: the text's digest is not enough once models are
    binding: str = ""

    def uses(self, name: str) -> bool:
        """Whether a component reads ``name`` (``Benchmark``: the hosts need a dedicated speed)."""
        return any(
            isinstance(node, Name | Index) and node.name == name
            for d in self.definitions.values()
            for node in preorder(d.body)
        )

    def profile_names(self) -> tuple[str, ...]:
        """The machine-profile figures the components read (``flops_dense[p]``, ...), in
        catalogue order: each host must supply them (``HostInputs.system``)."""
        used = {
            node.name
            for d in self.definitions.values()
            for node in preorder(d.body)
            if isinstance(node, Index) and node.name in PROFILE_BUILTINS
        }
        return tuple(n for n in PROFILE_BUILTINS if n in used)

    def empirical_refs(self) -> tuple[tuple[str, ...], ...]:
        """The distinct models the text reads, in order of first use."""
        return tuple(dict.fromkeys(c.ref for c in self.empirical_calls))

    def param(self, name: str) -> ParamSpec | None:
        for spec in self.params:
            if name == spec.name or name in spec.aliases:
                return spec
        return None

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary (for ``GET /models``)."""
        return {
            "digest": self.digest,
            "params": [
                {"name": p.name, "aliases": list(p.aliases), "default": p.default}
                for p in self.params
            ],
            "components": [
                {"name": d.name, "indices": list(d.indices), "stochastic": self.stochastic[d.name]}
                for d in self.definitions.values()
            ],
            "empirical": [list(ref) for ref in self.empirical_refs()],
            "profile": list(self.profile_names()),
        }
