"""The application of one spec point as a performance grammar model with its parameters: a
built-in or file grammar, or the grammar a script generates (:mod:`ppe.whatif.scriptmodel`).
Shared by the strip evaluation (:mod:`ppe.whatif.analytic`) and the block evaluation
(:mod:`ppe.whatif.blockeval`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ppe import core
from ppe.core import CompiledModel
from ppe.whatif.resolve import Resources
from ppe.whatif.script import Phase, phases
from ppe.whatif.scriptmodel import script_model_text
from ppe.whatif.spec import SpecPoint

__all__ = ["App", "app_of", "compiled", "ends_of"]


@lru_cache(maxsize=64)
def compiled(text: str) -> CompiledModel:
    """A model compiled once per text (a generated script model is rebuilt per layout)."""
    return core.compile_model(text)


@dataclass(frozen=True)
class App:
    """The model of one point, for any chain layout (a script's model depends on where each
    nodeset's nodes sit in the chain)."""

    fixed: CompiledModel | None
    phases: tuple[Phase, ...]
    params: Mapping[str, float]
    point: SpecPoint

    @property
    def script(self) -> bool:
        return self.fixed is None

    @property
    def collapsible(self) -> bool:
        """Whether the model's HostTime and ExecTime depend on the chain position only through
        its ends and neighbours (the built-in models and generated scripts: yes; a grammar
        file may use p itself)."""
        return self.script or self.point.spec.execution.builtin

    @property
    def single_phase(self) -> bool:
        """ExecTime is the max of the host times (one synchronised phase)."""
        return self.point.spec.execution.builtin or (self.script and len(self.phases) == 1)

    def model(self, ends: Sequence[int]) -> CompiledModel:
        if self.fixed is not None:
            return self.fixed
        return compiled(script_model_text(self.point.spec, self.phases, ends))

    def comm_model(self, ends: Sequence[int]) -> CompiledModel:
        return compiled(script_model_text(self.point.spec, self.phases, ends, with_compute=False))


def app_of(point: SpecPoint, resources: Resources) -> App:
    """The point's model and the parameters the spec gives it (``n``: the rows placed)."""
    spec = point.spec
    ex = spec.execution
    ds = spec.dataset(spec.primary.dataset)
    if ex.script is not None:
        found = tuple(phases(ex.script, spec.counts(), ex.distribution))
        return App(None, found, {"n": float(ds.rows)}, point)
    model = resources.model
    assert model is not None
    offered = {
        "n": float(ds.rows),
        "iterations": float(ex.iterations or 0),
        "Size": ds.bytesperunit,
    }
    params = {k: v for k, v in offered.items() if model.param(k) is not None}
    if model.param("n") is None:
        params["rows"] = float(ds.rows)
    params.update(ex.params)
    return App(model, (), params, point)


def ends_of(counts: Sequence[int]) -> list[int]:
    """Chain positions where each segment of ``counts`` nodes ends."""
    out, total = [], 0
    for c in counts:
        total += c
        out.append(total)
    return out
