"""What a spec names outside itself, read once before anything is evaluated.

A spec may reference machine profiles (``profile = "host.json"``), recorded load traces
(``load = {kind = "traces", files = [...]}``, or a folder of them to pick from:
``{kind = "traces", dir = "...", pick = "quietest", count = 8}``), a grammar file
(``model = "mine.ppg"``), a signature (``signature = "app.toml"``) and registered hosts
(``host = "h1"``, and their live forecasts). Where those come from depends on who answers:
the CLI reads files next to the spec, the service reads its store. So the evaluation takes a
:class:`Resolver` and this module asks it for every reference up front, turning each failure
into a spec problem at the line that names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ppe.core import CompiledModel, GrammarError, get_model
from ppe.core.stochastic import StochasticValue
from ppe.pmac import MachineProfile, Signature, builtin_signature, parse_signature
from ppe.pmac.signature import BUILTIN as BUILTIN_SIGNATURES
from ppe.whatif.spec import Load, Nodeset, Problem, Spec, SpecError, WhatIf

__all__ = [
    "LoadTrace",
    "Pick",
    "RegisteredHost",
    "ResolveError",
    "Resolver",
    "Resources",
    "pick_quietest",
    "resolve",
]

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

    def trace_dir(self, ref: str) -> list[str]:
        """The trace files directly inside folder ``ref``, as references :meth:`trace`
        reads, in a stable order."""
        ...

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
    #: The files a ``dir`` load picked, by nodeset index (:func:`pick_quietest`).
    picked: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    #: What the picks chose and from what (printed under the table).
    notes: tuple[str, ...] = ()

    def trace_files(self, load: Load, nodeset_index: int) -> tuple[str, ...]:
        """The files a traces load runs on: those it lists, or those picked from its ``dir``."""
        return load.files if load.dir is None else self.picked[nodeset_index]


@dataclass(frozen=True)
class Pick:
    """One candidate trace as ranked: its mean and standard deviation of CPU availability
    over the samples the pick may see."""

    ref: str
    mean: float
    std: float
    samples: int


def pick_quietest(
    traces: Mapping[str, LoadTrace], count: int, before: float | None = None
) -> tuple[list[Pick], list[Pick]]:
    """The ``count`` quietest traces: the highest mean CPU availability (the share of a CPU
    the host's own work leaves free, what the scheduler balances strips on), ties broken by
    the lower standard deviation, then by the order given. A low variability alone would pick
    hosts that are steadily busy (Bitbrains VM 198: std 0.007 at 50 % busy). ``before``:
    only samples strictly before that time count (a plan made then could not know the rest);
    a trace with none is not a candidate. Returns (picked, ranked candidates)."""
    ranked: list[tuple[float, float, int, Pick]] = []
    for k, (ref, t) in enumerate(traces.items()):
        a = t.availability if before is None else t.availability[t.timestamps < before]
        if a.size == 0:
            continue
        p = Pick(ref, float(a.mean()), float(a.std()), int(a.size))
        ranked.append((-p.mean, p.std, k, p))
    ranked.sort(key=lambda r: r[:3])
    order = [r[3] for r in ranked]
    return order[:count], order


def resolve(whatif: WhatIf, resolver: Resolver, pick_warmup: float | None = None) -> Resources:
    """Read everything ``whatif`` names (references are not sweepable, so every point names
    the same, except nodesets absent from some points: each nodeset is read from a point that
    has it); :class:`SpecError` lists each one that failed, at its line.

    A ``dir`` load's files are picked here. ``pick_warmup``: the simulated path's warm-up; the
    pick then sees only the samples before the first start any of its candidates allows (their
    earliest sample plus the warm-up), so no start runs on hosts chosen for how quiet they were
    after it. Without it (the analytic path, planning after the traces' end) every sample."""
    spec = whatif.points[0].spec
    problems: list[Problem] = []
    profiles: dict[str, MachineProfile] = {}
    traces: dict[str, LoadTrace] = {}
    hosts: dict[str, RegisteredHost] = {}
    picked: dict[int, tuple[str, ...]] = {}
    notes: list[str] = []

    def attempt(path: tuple[str | int, ...], read: Callable[[], object]) -> object | None:
        try:
            return read()
        except (OSError, ValueError) as exc:  # ProfileError, TraceFormatError... are ValueErrors
            problems.append(whatif.problem(path, f"cannot read it: {_why(exc)}"))
            return None

    for ns in _every_nodeset(whatif):
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
        if ns.load.dir is not None:
            got_pick = _pick(whatif, ns, resolver, pick_warmup, problems)
            if got_pick is not None:
                chosen, note = got_pick
                picked[ns.index] = tuple(chosen)
                traces.update(chosen)
                notes.append(note)
    model = _model(whatif, spec, resolver, problems)
    signature = _signature(whatif, spec, _every_nodeset(whatif), resolver, problems)
    if problems:
        raise SpecError(problems, whatif.source)
    return Resources(profiles, traces, hosts, model, signature, picked, tuple(notes))


def _pick(
    whatif: WhatIf,
    ns: Nodeset,
    resolver: Resolver,
    warmup: float | None,
    problems: list[Problem],
) -> tuple[dict[str, LoadTrace], str] | None:
    """The traces a ``dir`` load runs on, read, and a note saying what was chosen."""
    load: Load = ns.load
    at = ("nodeset", ns.index, "load")
    assert load.dir is not None
    try:
        refs = resolver.trace_dir(load.dir)
    except (OSError, ValueError) as exc:
        problems.append(whatif.problem((*at, "dir"), f"cannot list it: {_why(exc)}"))
        return None
    if not refs:
        problems.append(whatif.problem((*at, "dir"), f"{load.dir!r} holds no trace files"))
        return None
    candidates: dict[str, LoadTrace] = {}
    for ref in refs:
        try:
            candidates[ref] = resolver.trace(ref)
        except (OSError, ValueError) as exc:
            problems.append(whatif.problem((*at, "dir"), f"cannot read {ref!r}: {_why(exc)}"))
    if len(candidates) != len(refs):
        return None
    if load.pick == "all":
        return candidates, f"nodeset {ns.name!r}: the {len(refs)} traces in {load.dir!r}"
    count = load.count or 0
    before = None
    if warmup is not None:
        before = min(float(t.timestamps.min()) for t in candidates.values()) + warmup
    chosen, ranked = pick_quietest(candidates, count, before)
    if len(chosen) < count:
        seen = f" with samples in the first {warmup:g} s" if warmup is not None else ""
        problems.append(
            whatif.problem(
                (*at, "count"),
                f"count = {count}, but {load.dir!r} holds {len(ranked)} trace(s){seen}",
            )
        )
        return None
    shown = ", ".join(
        f"{candidates[p.ref].name or p.ref} ({p.mean:.3f} ± {p.std:.3f})" for p in chosen
    )
    window = "every sample" if before is None else f"the samples before {before:.0f} s"
    note = (
        f"nodeset {ns.name!r}: the {count} quietest of {len(ranked)} traces in {load.dir!r} "
        f"(highest mean CPU availability over {window}): {shown}"
    )
    return {p.ref: candidates[p.ref] for p in chosen}, note


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


def _every_nodeset(whatif: WhatIf) -> list[Nodeset]:
    """Each nodeset of the spec once, in order, from the first point that has it (a nodeset
    with ``number = 0`` is absent from that point)."""
    seen: dict[int, Nodeset] = {}
    for point in whatif.points:
        for ns in point.spec.nodesets:
            seen.setdefault(ns.index, ns)
    return [seen[i] for i in sorted(seen)]


def _signature(
    whatif: WhatIf,
    spec: Spec,
    nodesets: Sequence[Nodeset],
    resolver: Resolver,
    problems: list[Problem],
) -> Signature | None:
    ex = spec.execution
    uses_profile = any(ns.profile is not None or ns.host is not None for ns in nodesets)
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
