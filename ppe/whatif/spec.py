"""The what-if specification: PetaSIM's objects in TOML, read and checked before anything runs.

A spec describes a machine (``[[nodeset]]`` of cpus, memories, caches or disks; ``[[linkset]]``
joining them), an application (``[[dataset]]`` grids and their ``[[distribution]]`` over
nodesets) and how it runs (``[execution]``: one of PPE's performance grammars, or a script of
PetaSIM statements). docs/whatif.md is the reference for every field; this module turns the
text into typed frozen dataclasses (:class:`Spec`), expands sweeps into points
(:class:`WhatIf`), and reports every problem at once with its line, its field and, for a
misspelt name, the nearest valid one (:class:`SpecError`).

Pure: it reads text. Files the spec names (profiles, traces, grammar files, signatures) are
read by the caller's resolver (:mod:`ppe.whatif.analytic`), so the same spec can be answered by
the CLI (files next to the spec) and, later, by the service (registered hosts, stored profiles).
"""

from __future__ import annotations

import copy
import difflib
import itertools
import math
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ppe.pipeline import DEFAULT_LINK
from ppe.whatif.blocks import adjacent, grid_text, process_grid
from ppe.whatif.locate import Locator, Path, Position
from ppe.whatif.script import MAX_RUNS, Move, Repeat, Script, ScriptError, Send, Use, parse_script
from ppe.whatif.script import phases as script_phases
from ppe.whatif.simgrid import PlatformError, read_platform
from ppe.whatif.sweep import MAX_POINTS, SweepError, is_range, range_values
from ppe.whatif.units import UnitError, parse_quantity

__all__ = [
    "BUILTIN_MODELS",
    "Axis",
    "Dataset",
    "Distribution",
    "Execution",
    "Linkset",
    "Load",
    "Nodeset",
    "Problem",
    "Spec",
    "SpecError",
    "SpecPoint",
    "WhatIf",
    "parse_spec",
]

OBJECTS = ("nodeset", "linkset", "dataset", "distribution")
TOP_LEVEL = (*OBJECTS, "execution", "title", "description", "machine", "sweep")
MACHINE_FIELDS = ("simgrid",)
SWEEP_FIELDS = ("together",)
NODESET_TYPES = ("cpu", "memory", "cache", "disk")
LOAD_KINDS = ("dedicated", "normal", "mixture", "traces", "forecasts")
#: How a traces load with ``dir`` chooses its files (docs/whatif.md, "Picking traces").
PICKS = ("quietest", "all")
TOPOLOGIES = ("chain", "ring", "full", "bus")
DUPLEX = ("full", "half")
DATASET_TYPES = {"grid1dim": 1, "grid2dim": 2, "grid3dim": 3}
DISTRIBUTION_TYPES = {"block1dim": 1, "block2dim": 2, "block3dim": 3}
BUILTIN_MODELS = ("sor", "jacobi2d")
#: Nodesets one distribution may span (the generated model has one table entry per nodeset).
MAX_NODESETS = 32

FIELDS: dict[str, tuple[str, ...]] = {
    "nodeset": (
        "name",
        "type",
        "number",
        "floatspeed",
        "grainsize",
        "bandwidth",
        "ports",
        "sharing",
        "variation",
        "profile",
        "host",
        "load",
    ),
    "linkset": (
        "name",
        "across",
        "updown",
        "topology",
        "latency",
        "bandwidth",
        "duplex",
        "number",
    ),
    "dataset": ("name", "type", "size", "bytesperunit", "floatsperunit", "operationsperunit"),
    "distribution": ("name", "type", "dataset", "nodeset"),
    "execution": ("distribution", "model", "script", "iterations", "params", "signature"),
}
LOAD_FIELDS: dict[str, tuple[str, ...]] = {
    "dedicated": ("kind",),
    "normal": ("kind", "mean", "std"),
    "mixture": ("kind", "components"),
    "traces": ("kind", "files", "dir", "pick", "count"),
    "forecasts": ("kind",),
}
COMPONENT_FIELDS = ("weight", "mean", "std")


@dataclass(frozen=True)
class Numeric:
    """How a numeric field is read: its dimension (units.DIMENSIONS), whether it is a whole
    number, the smallest value (``strict``: excluded) and its default."""

    dimension: str
    integer: bool = False
    low: float = 0.0
    strict: bool = True
    default: float | None = None
    high: float | None = None


NUMERIC: dict[tuple[str, str], Numeric] = {
    ("nodeset", "number"): Numeric("count", integer=True, low=0, strict=False),
    ("nodeset", "floatspeed"): Numeric("flops"),
    ("nodeset", "grainsize"): Numeric("bytes"),
    ("nodeset", "bandwidth"): Numeric("rate"),
    ("nodeset", "ports"): Numeric("count", integer=True, low=1, strict=False, default=1),
    ("nodeset", "sharing"): Numeric("count", integer=True, low=1, strict=False, default=1),
    ("nodeset", "variation"): Numeric("count", strict=False, default=0.0, high=1.0),
    ("load", "mean"): Numeric("count", high=1.0),
    ("load", "std"): Numeric("count", strict=False, default=0.0),
    ("linkset", "latency"): Numeric("time", strict=False, default=DEFAULT_LINK.latency),
    ("linkset", "bandwidth"): Numeric("rate", default=DEFAULT_LINK.bandwidth),
    ("linkset", "number"): Numeric("count", integer=True, low=1, strict=False),
    ("dataset", "size"): Numeric("count", integer=True, low=1, strict=False),
    ("dataset", "bytesperunit"): Numeric("bytes", default=8.0),
    ("dataset", "floatsperunit"): Numeric("count", strict=False, default=0.0),
    ("dataset", "operationsperunit"): Numeric("count", strict=False, default=0.0),
    ("execution", "iterations"): Numeric("count", integer=True, low=1, strict=False),
    ("params", "*"): Numeric("count", low=-math.inf),
}
#: Fields that take a list by nature (a list there is not a sweep).
LIST_FIELDS = {("distribution", "nodeset"), ("linkset", "updown"), ("load", "files")}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Load:
    """Background load on each node of a nodeset, as its available CPU fraction: ``dedicated``
    (1), ``normal`` (mean, std), ``mixture`` ((weight, mean, std), ...), ``traces`` (files
    assigned round-robin; or the ``count`` files a ``pick`` chooses from the folder ``dir``,
    which the resolver reads: :func:`ppe.whatif.resolve.resolve`) or ``forecasts`` (the
    registered host's)."""

    kind: str = "dedicated"
    mean: float = 1.0
    std: float = 0.0
    components: tuple[tuple[float, float, float], ...] = ()
    files: tuple[str, ...] = ()
    dir: str | None = None
    pick: str = "all"
    count: int | None = None


@dataclass(frozen=True)
class Nodeset:
    name: str
    type: str
    number: int
    floatspeed: float | None = None
    grainsize: float | None = None
    bandwidth: float | None = None
    ports: int = 1
    profile: str | None = None
    host: str | None = None
    load: Load = field(default_factory=Load)
    index: int = 0
    #: members that run on one machine at once (its cores): a profile's k-copy curves apply
    sharing: int = 1
    #: run-to-run spread of a member's dedicated speed (relative standard deviation): what a
    #: real machine does from one run to the next with nothing else on it (caches, memory
    #: placement, clocks); the simulated path draws it for every run
    variation: float = 0.0


@dataclass(frozen=True)
class Linkset:
    name: str
    across: str | None
    updown: tuple[str, str] | None
    topology: str = "chain"
    latency: float = DEFAULT_LINK.latency
    bandwidth: float = DEFAULT_LINK.bandwidth
    duplex: str = "full"
    number: int | None = None
    index: int = 0

    def joins(self, a: str, b: str) -> bool:
        """Whether this linkset carries traffic between nodesets ``a`` and ``b``."""
        if a == b:
            return self.across == a
        return self.updown is not None and set(self.updown) == {a, b}


@dataclass(frozen=True)
class Dataset:
    name: str
    type: str
    size: tuple[int, ...]
    bytesperunit: float = 8.0
    floatsperunit: float = 0.0
    operationsperunit: float = 0.0
    index: int = 0

    @property
    def rows(self) -> int:
        """Rows a block1dim distribution places (the first dimension)."""
        return self.size[0]

    @property
    def units_per_row(self) -> int:
        return math.prod(self.size[1:])

    @property
    def units(self) -> int:
        return math.prod(self.size)

    @property
    def row_bytes(self) -> float:
        return self.units_per_row * self.bytesperunit

    @property
    def total_bytes(self) -> float:
        return self.units * self.bytesperunit

    @property
    def work(self) -> float:
        """Operations per unit (floats and others: floatspeed counts both)."""
        return self.floatsperunit + self.operationsperunit


@dataclass(frozen=True)
class Distribution:
    name: str
    type: str
    dataset: str
    nodesets: tuple[str, ...]
    index: int = 0


@dataclass(frozen=True)
class Execution:
    """How the application runs: a grammar ``model`` with ``iterations`` and ``params``, or a
    parsed ``script``; ``distribution`` is the one whose rows the scheduler places."""

    distribution: str
    model: str | None = None
    script: Script | None = None
    iterations: int | None = None
    params: Mapping[str, float] = field(default_factory=dict)
    signature: str | None = None

    @property
    def builtin(self) -> bool:
        return self.model in BUILTIN_MODELS


@dataclass(frozen=True)
class Spec:
    """One concrete machine and application (a sweep's point)."""

    nodesets: tuple[Nodeset, ...]
    linksets: tuple[Linkset, ...]
    datasets: tuple[Dataset, ...]
    distributions: tuple[Distribution, ...]
    execution: Execution
    title: str = ""

    def nodeset(self, name: str) -> Nodeset:
        return next(n for n in self.nodesets if n.name == name)

    def dataset(self, name: str) -> Dataset:
        return next(d for d in self.datasets if d.name == name)

    def distribution(self, name: str) -> Distribution:
        return next(d for d in self.distributions if d.name == name)

    @property
    def primary(self) -> Distribution:
        """The distribution whose rows the scheduler places."""
        return self.distribution(self.execution.distribution)

    def link_between(self, a: str, b: str) -> Linkset | None:
        return next((ls for ls in self.linksets if ls.joins(a, b)), None)

    def counts(self) -> dict[str, float]:
        """Names a script's repeat may use: ``iterations`` and the execution's params."""
        out = dict(self.execution.params)
        if self.execution.iterations is not None:
            out["iterations"] = float(self.execution.iterations)
        return out


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class Problem:
    """One problem: the field (``nodeset[1].floatsped``), the message (with a suggestion when a
    name is misspelt), and where it is in the file."""

    field: str
    message: str
    line: int | None = None
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "line": self.line,
            "column": self.column,
            "reason": self.message,
        }

    def render(self, source: str) -> str:
        where = source
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class SpecError(ValueError):
    """Every problem found in a spec, in file order."""

    def __init__(self, problems: Sequence[Problem], source: str = "spec") -> None:
        self.problems = sorted(problems, key=lambda p: (p.line or 0, p.column or 0, p.field))
        self.source = source
        super().__init__("\n".join(p.render(source) for p in self.problems))

    def to_dict(self) -> dict[str, Any]:
        return {"detail": [p.to_dict() for p in self.problems]}


def _field_name(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _suggest(name: str, choices: Sequence[str]) -> str:
    near = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {near[0]!r}?" if near else ""


class _Problems:
    """Collects problems with their positions (from the locator)."""

    def __init__(self, locator: Locator, context: str = "") -> None:
        self.locator = locator
        self.context = context
        self.items: list[Problem] = []

    def add(self, path: Path, message: str, position: Position | None = None) -> None:
        pos = position or self.locator.find(path)
        if self.context:
            message = f"{message} (at {self.context})"
        self.items.append(
            Problem(
                _field_name(path), message, pos.line if pos else None, pos.column if pos else None
            )
        )


# ------------------------------------------------------------------------------ sweeps


@dataclass(frozen=True)
class Axis:
    """One swept field: its path in the document, a label (``linkset.net.bandwidth``) and its
    values (SI numbers; a dataset size's values are shapes)."""

    path: Path
    label: str
    values: tuple[Any, ...]
    raw: Any


@dataclass(frozen=True)
class SpecPoint:
    """One point of the sweep: the swept values (label -> value) and the concrete spec."""

    values: tuple[tuple[str, Any], ...]
    spec: Spec


@dataclass(frozen=True)
class WhatIf:
    """A parsed spec: its axes (none: one point) and every point, all checked."""

    source: str
    text: str
    axes: tuple[Axis, ...]
    points: tuple[SpecPoint, ...]
    locator: Locator = field(repr=False, compare=False)
    #: What reading a SimGrid platform approximated or ignored (docs/whatif.md).
    notes: tuple[str, ...] = ()
    #: Axes swept in step (``[sweep] together``), by label; each group's first leads.
    together: tuple[tuple[str, ...], ...] = ()

    def problem(self, path: Path, message: str) -> Problem:
        pos = self.locator.find(path)
        return Problem(
            _field_name(path), message, pos.line if pos else None, pos.column if pos else None
        )


def _label(doc: Mapping[str, Any], path: Path) -> str:
    """``nodeset.fast.number`` for ``("nodeset", 0, "number")`` (names read better than
    indices; the index is kept when the object has no usable name)."""
    parts: list[str] = []
    node: Any = doc
    for part in path:
        nxt = node[part] if isinstance(node, Mapping | list) else None  # type: ignore[index]
        if isinstance(part, int) and isinstance(nxt, Mapping) and isinstance(nxt.get("name"), str):
            parts.append(nxt["name"])
        elif isinstance(part, int):
            parts.append(str(part))
        else:
            parts.append(part)
        node = nxt
    return ".".join(parts)


def _numeric_fields(doc: Mapping[str, Any]) -> Iterator[tuple[Path, Numeric, Any]]:
    """Every numeric field present in the document (for sweeps), with its rule."""
    for kind in OBJECTS:
        items = doc.get(kind)
        if not isinstance(items, list):
            continue
        for i, table in enumerate(items):
            if not isinstance(table, Mapping):
                continue
            for name, value in table.items():
                rule = NUMERIC.get((kind, name))
                if rule is not None:
                    yield (kind, i, name), rule, value
            load = table.get("load") if kind == "nodeset" else None
            if isinstance(load, Mapping):
                for name in ("mean", "std"):
                    if name in load:
                        yield (kind, i, "load", name), NUMERIC[("load", name)], load[name]
    ex = doc.get("execution")
    if isinstance(ex, Mapping):
        if "iterations" in ex:
            yield (
                ("execution", "iterations"),
                NUMERIC[("execution", "iterations")],
                ex["iterations"],
            )
        params = ex.get("params")
        if isinstance(params, Mapping):
            for name, value in params.items():
                yield ("execution", "params", name), NUMERIC[("params", "*")], value


def _find_axes(doc: Mapping[str, Any], problems: _Problems) -> tuple[list[Axis], set[str]]:
    """The swept fields that read, and the labels of every field written as a sweep (a list
    or a range), read or not."""
    axes = []
    written: set[str] = set()
    for path, rule, value in _numeric_fields(doc):
        is_size = path[-1] == "size" and path[0] == "dataset"
        if is_size and isinstance(value, list) and not any(isinstance(v, list) for v in value):
            continue  # a shape, not a sweep
        if not (isinstance(value, list) or is_range(value)):
            continue
        label = _label(doc, path)
        written.add(label)
        try:
            values = _axis_values(value, rule, is_size)
        except (UnitError, SweepError) as exc:
            problems.add(path, f"bad sweep {value!r}: {exc}")
            continue
        if not values:
            problems.add(path, "an empty list sweeps over nothing")
            continue
        axes.append(Axis(path, label, values, value))
    return axes, written


def _axis_values(value: Any, rule: Numeric, is_size: bool) -> tuple[Any, ...]:
    def one(raw: Any) -> float:
        if rule.dimension == "count" and isinstance(raw, str):  # a range's end
            try:
                return float(raw)
            except ValueError:
                raise UnitError(f"expected a plain number, got {raw!r}") from None
        return parse_quantity(raw, rule.dimension).value

    if isinstance(value, list):
        if is_size:
            return tuple(tuple(v) if isinstance(v, list) else v for v in value)
        if any(isinstance(v, list | dict) for v in value):
            raise SweepError("a sweep is a list of values")
        return tuple(one(v) for v in value)
    return range_values(value, one, rule.default, "this field")


def _set(doc: dict[str, Any], path: Path, value: Any) -> None:
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = list(value) if isinstance(value, tuple) else value


# ------------------------------------------------------------------------------ builder


class _Builder:
    """Turns one concrete document (no sweeps left) into a :class:`Spec`, or problems."""

    def __init__(self, doc: Mapping[str, Any], problems: _Problems, script: Script | None) -> None:
        self.doc = doc
        self.p = problems
        self.script = script
        #: nodesets with ``number = 0`` at this point (:meth:`nodeset`): checked, then left
        #: out with the linksets that join them and their place in distributions
        self.absent: set[str] = set()

    # -- helpers

    def fields(
        self, table: Mapping[str, Any], path: Path, allowed: Sequence[str], what: str
    ) -> None:
        for key in table:
            if key not in allowed:
                self.p.add(
                    (*path, key),
                    f"unknown field {key!r} in {what}{_suggest(key, allowed)}",
                )

    def text(
        self, table: Mapping[str, Any], path: Path, key: str, required: bool = False
    ) -> str | None:
        value = table.get(key)
        if value is None:
            if required:
                self.p.add(path, f"missing field {key!r}")
            return None
        if isinstance(value, list) and (path[0], key) not in LIST_FIELDS:
            self.p.add(
                (*path, key),
                f"{key!r} is not numeric, so it cannot be swept (a list here is a sweep)",
            )
            return None
        if not isinstance(value, str):
            self.p.add((*path, key), f"{key!r} must be a string, got {value!r}")
            return None
        return value

    def choice(
        self,
        table: Mapping[str, Any],
        path: Path,
        key: str,
        choices: Sequence[str],
        default: str | None,
    ) -> str | None:
        value = self.text(table, path, key, required=default is None)
        if value is None:
            return default if key not in table else None
        if value not in choices:
            self.p.add(
                (*path, key),
                f"unknown {key} {value!r}; expected one of "
                f"{', '.join(choices)}{_suggest(value, choices)}",
            )
            return None
        return value

    def number(self, table: Mapping[str, Any], path: Path, key: str, rule: Numeric) -> float | None:
        if key not in table:
            return rule.default
        raw = table[key]
        where = (*path, key)
        try:
            value = parse_quantity(raw, rule.dimension).value
        except UnitError as exc:
            self.p.add(where, str(exc))
            return None
        if rule.integer and value != int(value):
            self.p.add(where, f"{key} must be a whole number, got {value:g}")
            return None
        bad_low = value < rule.low or (rule.strict and value == rule.low)
        if bad_low or (rule.high is not None and value > rule.high):
            bounds = (">" if rule.strict else ">=") + f" {rule.low:g}"
            if rule.high is not None:
                bounds += f" and <= {rule.high:g}"
            self.p.add(where, f"{key} must be {bounds}, got {value:g}")
            return None
        return value

    def name(self, table: Mapping[str, Any], path: Path, what: str) -> str | None:
        name = self.text(table, path, "name", required=True)
        if name is not None and not _NAME.match(name):
            self.p.add((*path, "name"), f"{what} name {name!r}: use letters, digits, '_', '-', '.'")
            return None
        return name

    def ref(self, value: str, path: Path, names: Sequence[str], what: str) -> bool:
        if value in names:
            return True
        known = f" (defined: {', '.join(names)})" if names else f" (no {what} is defined)"
        self.p.add(path, f"no {what} named {value!r}{_suggest(value, names)}{known}")
        return False

    def declared(self, kind: str) -> list[str]:
        """Names the document gives objects of ``kind`` (built or not: a reference to an object
        with its own problem is not a second problem)."""
        items = self.doc.get(kind)
        if not isinstance(items, list):
            return []
        return [
            t["name"] for t in items if isinstance(t, Mapping) and isinstance(t.get("name"), str)
        ]

    def tables(self, kind: str) -> list[tuple[Path, Mapping[str, Any]]]:
        items = self.doc.get(kind, [])
        if isinstance(items, Mapping):
            self.p.add((kind,), f"{kind} must be an array of tables: write [[{kind}]]")
            return []
        out: list[tuple[Path, Mapping[str, Any]]] = []
        for i, t in enumerate(items if isinstance(items, list) else []):
            if isinstance(t, Mapping):
                out.append(((kind, i), t))
            else:
                self.p.add((kind, i), f"each {kind} must be a table")
        return out

    # -- objects

    def build(self) -> Spec | None:
        for key in self.doc:
            if key not in TOP_LEVEL:
                self.p.add((key,), f"unknown object type {key!r}{_suggest(key, TOP_LEVEL)}")
        nodesets = [n for n in (self.nodeset(p, t) for p, t in self._dedupe("nodeset")) if n]
        linksets = [
            ls for ls in (self.linkset(p, t, nodesets) for p, t in self._dedupe("linkset")) if ls
        ]
        datasets = [d for d in (self.dataset(p, t) for p, t in self._dedupe("dataset")) if d]
        distributions = [
            d
            for d in (
                self.distribution(p, t, nodesets, datasets) for p, t in self._dedupe("distribution")
            )
            if d
        ]
        if not nodesets and "nodeset" not in self.doc:
            self.p.add((), "the spec has no [[nodeset]]: describe the machine")
        execution = self.execution(distributions)
        title = self.doc.get("title", "")
        if execution is None and not self.p.items:
            self.p.add(("execution",), "the execution cannot be set up")
        if self.p.items or execution is None:
            return None
        spec = Spec(
            tuple(nodesets),
            tuple(linksets),
            tuple(datasets),
            tuple(distributions),
            execution,
            str(title),
        )
        self.check(spec)
        return None if self.p.items else spec

    def _dedupe(self, kind: str) -> Iterator[tuple[Path, Mapping[str, Any]]]:
        seen: dict[str, int] = {}
        for path, table in self.tables(kind):
            name = table.get("name")
            if isinstance(name, str) and name in seen:
                self.p.add(
                    (*path, "name"), f"{kind} {name!r} is defined twice (also {kind}[{seen[name]}])"
                )
                continue
            if isinstance(name, str):
                seen[name] = int(path[1])
            yield path, table

    def nodeset(self, path: Path, t: Mapping[str, Any]) -> Nodeset | None:
        self.fields(t, path, FIELDS["nodeset"], "a nodeset")
        name = self.name(t, path, "nodeset")
        kind = self.choice(t, path, "type", NODESET_TYPES, "cpu")
        if "number" not in t:
            self.p.add(path, "missing field 'number' (how many members)")
        values = {
            k: self.number(t, path, k, NUMERIC[("nodeset", k)])
            for k in (
                "number",
                "floatspeed",
                "grainsize",
                "bandwidth",
                "ports",
                "sharing",
                "variation",
            )
        }
        profile = self.text(t, path, "profile")
        host = self.text(t, path, "host")
        given = [
            k
            for k, v in (("floatspeed", values["floatspeed"]), ("profile", profile), ("host", host))
            if v is not None
        ]
        if len(given) > 1:
            self.p.add(
                (*path, given[1]), f"give one speed source: {' and '.join(given)} are both set"
            )
        if kind is not None and kind != "cpu" and values["floatspeed"] is not None:
            self.p.add(
                (*path, "floatspeed"), f"floatspeed is for cpu nodesets; this one is a {kind}"
            )
        number, sharing = values["number"], values["sharing"]
        if number is not None and sharing is not None and number % sharing:
            self.p.add(
                (*path, "sharing"),
                f"number ({number:g}) must be a multiple of sharing ({sharing:g}): "
                "members share machines in groups of that size",
            )
        load = self.load(t.get("load"), (*path, "load"), host)
        if None in (name, kind, load, values["number"]) or any(
            values[k] is None and k in t for k in values
        ):
            return None
        assert name is not None and kind is not None and load is not None
        if values["number"] == 0:
            self.absent.add(name)
            return None
        return Nodeset(
            name,
            kind,
            int(values["number"] or 0),
            values["floatspeed"],
            values["grainsize"],
            values["bandwidth"],
            int(values["ports"] or 1),
            profile,
            host,
            load,
            int(path[1]),
            int(values["sharing"] or 1),
            float(values["variation"] or 0.0),
        )

    def load(self, raw: Any, path: Path, host: str | None) -> Load | None:
        if raw is None:
            return Load()
        if not isinstance(raw, Mapping):
            self.p.add(
                path, 'load must be a table such as {kind = "normal", mean = 0.8, std = 0.05}'
            )
            return None
        kind = self.choice(raw, path, "kind", LOAD_KINDS, None)
        if kind is None:
            return None
        self.fields(raw, path, LOAD_FIELDS[kind], f"a {kind} load")
        if kind == "dedicated":
            return Load()
        if kind == "normal":
            if "mean" not in raw:
                self.p.add(path, "a normal load needs 'mean' (the available CPU fraction, 0..1)")
                return None
            mean = self.number(raw, path, "mean", NUMERIC[("load", "mean")])
            std = self.number(raw, path, "std", NUMERIC[("load", "std")])
            if mean is None or std is None:
                return None
            return Load("normal", mean, std)
        if kind == "mixture":
            return self.mixture(raw.get("components"), (*path, "components"))
        if kind == "traces":
            return self.traces(raw, path)
        if host is None:
            self.p.add(path, "a forecasts load reads a registered host's forecasts: set 'host'")
            return None
        return Load("forecasts")

    def traces(self, raw: Mapping[str, Any], path: Path) -> Load | None:
        """``files = [...]``, or ``dir = "..."`` with ``pick = "quietest", count = k`` (or
        ``pick = "all"``, the default): the folder's files are listed and ranked by the
        resolver, since the spec reads no file."""
        if ("files" in raw) == ("dir" in raw):
            self.p.add(
                path,
                "a traces load needs 'files' (a list of trace files) or 'dir' (a folder of "
                'them, with pick = "quietest" and count = k): give one',
            )
            return None
        if "files" in raw:
            files = raw.get("files")
            if not (isinstance(files, list) and files and all(isinstance(f, str) for f in files)):
                self.p.add((*path, "files"), "a traces load needs 'files': a list of trace files")
                return None
            for key in ("pick", "count"):
                if key in raw:
                    self.p.add((*path, key), f"{key!r} picks from a 'dir'; this load lists 'files'")
            return Load("traces", files=tuple(files))
        folder = self.text(raw, path, "dir")
        if folder is not None and not folder.strip():
            self.p.add((*path, "dir"), "dir must name a folder of trace files")
            folder = None
        pick = self.choice(raw, path, "pick", PICKS, "all")
        count: float | None = None
        if "count" in raw:
            count = self.number(
                raw, path, "count", Numeric("count", integer=True, low=1, strict=False)
            )
        if pick == "quietest" and "count" not in raw:
            self.p.add(path, 'pick = "quietest" needs count: how many of the folder\'s traces')
            return None
        if pick == "all" and "count" in raw:
            self.p.add(
                (*path, "count"),
                'count goes with pick = "quietest" (pick = "all" takes every file)',
            )
            return None
        if folder is None or pick is None or ("count" in raw and count is None):
            return None
        return Load("traces", dir=folder, pick=pick, count=None if count is None else int(count))

    def mixture(self, raw: Any, path: Path) -> Load | None:
        if not (isinstance(raw, list) and raw and all(isinstance(c, Mapping) for c in raw)):
            self.p.add(path, "a mixture load needs 'components': [{weight, mean, std}, ...]")
            return None
        comps = []
        for i, c in enumerate(raw):
            where = (*path, i)
            self.fields(c, where, COMPONENT_FIELDS, "a mixture component")
            missing = [k for k in COMPONENT_FIELDS if k not in c]
            if missing:
                self.p.add(where, f"a mixture component needs {', '.join(missing)}")
                continue
            w = self.number(c, where, "weight", Numeric("count"))
            m = self.number(c, where, "mean", NUMERIC[("load", "mean")])
            s = self.number(c, where, "std", NUMERIC[("load", "std")])
            if w is not None and m is not None and s is not None:
                comps.append((w, m, s))
        if len(comps) != len(raw):
            return None
        total = sum(w for w, _, _ in comps)
        comps = [(w / total, m, s) for w, m, s in comps]
        mean = sum(w * m for w, m, _ in comps)
        var = sum(w * (s * s + m * m) for w, m, s in comps) - mean * mean
        return Load("mixture", mean, math.sqrt(max(var, 0.0)), tuple(comps))

    def linkset(
        self, path: Path, t: Mapping[str, Any], nodesets: Sequence[Nodeset]
    ) -> Linkset | None:
        self.fields(t, path, FIELDS["linkset"], "a linkset")
        name = self.name(t, path, "linkset")
        names = self.declared("nodeset")
        across = self.text(t, path, "across")
        updown_raw = t.get("updown")
        updown: tuple[str, str] | None = None
        ok = True
        if (across is None) == (updown_raw is None):
            self.p.add(
                path,
                "a linkset joins nodesets either 'across' one or 'updown' between two: give one",
            )
            ok = False
        if across is not None and not self.ref(across, (*path, "across"), names, "nodeset"):
            ok = False
        if updown_raw is not None:
            if not (
                isinstance(updown_raw, list)
                and len(updown_raw) == 2
                and all(isinstance(x, str) for x in updown_raw)
                and updown_raw[0] != updown_raw[1]
            ):
                self.p.add((*path, "updown"), 'updown names two different nodesets: ["a", "b"]')
                ok = False
            else:
                for i, n in enumerate(updown_raw):
                    ok = self.ref(n, (*path, "updown", i), names, "nodeset") and ok
                updown = (updown_raw[0], updown_raw[1])
        if "topology" in t and updown_raw is not None:
            self.p.add(
                (*path, "topology"), "topology is for 'across' linksets (members of one nodeset)"
            )
            ok = False
        topology = self.choice(t, path, "topology", TOPOLOGIES, "chain")
        duplex = self.choice(t, path, "duplex", DUPLEX, "full")
        latency = self.number(t, path, "latency", NUMERIC[("linkset", "latency")])
        bandwidth = self.number(t, path, "bandwidth", NUMERIC[("linkset", "bandwidth")])
        number = self.number(t, path, "number", NUMERIC[("linkset", "number")])
        if (
            not ok
            or None in (name, topology, duplex, latency, bandwidth)
            or ("number" in t and number is None)
        ):
            return None
        assert name and topology and duplex and latency is not None and bandwidth is not None
        if {across, *(updown or ())} & self.absent:
            return None  # it joins a nodeset absent at this point
        return Linkset(
            name,
            across,
            updown,
            topology,
            latency,
            bandwidth,
            duplex,
            None if number is None else int(number),
            int(path[1]),
        )

    def dataset(self, path: Path, t: Mapping[str, Any]) -> Dataset | None:
        self.fields(t, path, FIELDS["dataset"], "a dataset")
        name = self.name(t, path, "dataset")
        kind = self.choice(t, path, "type", tuple(DATASET_TYPES), None)
        size = self.size(t, path, DATASET_TYPES.get(kind or "", 0))
        values = {
            k: self.number(t, path, k, NUMERIC[("dataset", k)])
            for k in ("bytesperunit", "floatsperunit", "operationsperunit")
        }
        if None in (name, kind, size) or None in values.values():
            return None
        assert name and kind and size
        return Dataset(
            name,
            kind,
            size,
            values["bytesperunit"] or 0.0,
            values["floatsperunit"] or 0.0,
            values["operationsperunit"] or 0.0,
            int(path[1]),
        )

    def size(self, t: Mapping[str, Any], path: Path, dims: int) -> tuple[int, ...] | None:
        raw = t.get("size")
        if raw is None:
            self.p.add(path, "missing field 'size' (a number, or one per dimension)")
            return None
        rule = NUMERIC[("dataset", "size")]
        items = raw if isinstance(raw, list) else [raw] * max(dims, 1)
        if dims and len(items) != dims:
            self.p.add(
                (*path, "size"), f"size has {len(items)} dimensions; a grid{dims}dim has {dims}"
            )
            return None
        out = []
        for v in items:
            got = self.number({"size": v}, path, "size", rule)
            if got is None:
                return None
            out.append(int(got))
        return tuple(out)

    def distribution(
        self,
        path: Path,
        t: Mapping[str, Any],
        nodesets: Sequence[Nodeset],
        datasets: Sequence[Dataset],
    ) -> Distribution | None:
        self.fields(t, path, FIELDS["distribution"], "a distribution")
        name = self.name(t, path, "distribution")
        kind = self.choice(t, path, "type", tuple(DISTRIBUTION_TYPES), None)
        dataset = self.text(t, path, "dataset", required=True)
        ok = dataset is not None and self.ref(
            dataset, (*path, "dataset"), self.declared("dataset"), "dataset"
        )
        raw = t.get("nodeset")
        members = [raw] if isinstance(raw, str) else raw
        if not (isinstance(members, list) and members and all(isinstance(m, str) for m in members)):
            self.p.add(
                path if raw is None else (*path, "nodeset"),
                "a distribution needs 'nodeset': a name or a list of names",
            )
            return None
        names = self.declared("nodeset")
        for i, m in enumerate(members):
            where = (*path, "nodeset") if isinstance(raw, str) else (*path, "nodeset", i)
            ok = self.ref(m, where, names, "nodeset") and ok
        if len(set(members)) != len(members):
            self.p.add((*path, "nodeset"), "a nodeset is listed twice")
            ok = False
        if len(members) > MAX_NODESETS:
            self.p.add((*path, "nodeset"), f"at most {MAX_NODESETS} nodesets per distribution")
            ok = False
        if not ok or None in (name, kind):
            return None
        assert name and kind and dataset
        members = [m for m in members if m not in self.absent]
        if not members:
            self.p.add(
                (*path, "nodeset"),
                f"every nodeset of distribution {name!r} has number = 0: nothing holds it",
            )
            return None
        ds = next((d for d in datasets if d.name == dataset), None)
        built = {n.name: n for n in nodesets}
        if ds is None or any(m not in built for m in members):
            return None  # the dataset or a nodeset has its own problem
        if DISTRIBUTION_TYPES[kind] > len(ds.size):
            self.p.add(
                (*path, "type"),
                f"a {kind} distribution needs a dataset of {DISTRIBUTION_TYPES[kind]} dimensions "
                f"or more; {dataset!r} is a {ds.type}",
            )
            return None
        for m in members:
            ns = built[m]
            if ns.type != "cpu":
                self.p.add(
                    (*path, "nodeset"),
                    f"nodeset {m!r} is a {ns.type}: only cpu nodesets hold and compute a "
                    "distribution",
                )
                return None
        return Distribution(name, kind, dataset, tuple(members), int(path[1]))

    def execution(self, distributions: Sequence[Distribution]) -> Execution | None:
        path: Path = ("execution",)
        t = self.doc.get("execution")
        if not isinstance(t, Mapping):
            self.p.add(path, "the spec has no [execution]: give a model or a script")
            return None
        self.fields(t, path, FIELDS["execution"], "[execution]")
        model = self.text(t, path, "model")
        script_text = self.text(t, path, "script")
        if (model is None) == (script_text is None) and "model" not in t and "script" not in t:
            self.p.add(path, "give 'model' (sor, jacobi2d or a grammar file) or 'script'")
            return None
        if "model" in t and "script" in t:
            self.p.add((*path, "script"), "give 'model' or 'script', not both")
            return None
        if model is not None and model not in BUILTIN_MODELS and not model.endswith(".ppg"):
            self.p.add(
                (*path, "model"),
                f"unknown model {model!r}: a built-in ({', '.join(BUILTIN_MODELS)}) or a grammar "
                f"file (.ppg){_suggest(model, BUILTIN_MODELS)}",
            )
            return None
        iterations = self.number(t, path, "iterations", NUMERIC[("execution", "iterations")])
        if "iterations" in t and iterations is None:
            return None
        if model is not None and iterations is None:
            self.p.add(path, "a model execution needs 'iterations'")
            return None
        params = self.params(t.get("params"), (*path, "params"))
        signature = self.text(t, path, "signature")
        names = self.declared("distribution")
        dist = self.text(t, path, "distribution")
        if dist is not None and not self.ref(dist, (*path, "distribution"), names, "distribution"):
            return None
        if dist is None:
            dist = self._first_use() if self.script is not None else None
            if (dist is None or dist not in names) and len(names) == 1:
                dist = names[0]  # a misspelt name in the script is the script check's to report
            if dist is None:
                self.p.add(
                    path,
                    'name the distribution the application runs on: distribution = "..."'
                    if names
                    else "the spec has no [[distribution]]",
                )
                return None
            if dist not in names:
                return None  # reported by the script checks
        if dist not in [d.name for d in distributions]:
            return None  # the distribution has its own problem
        if params is None:
            return None
        return Execution(
            dist,
            model,
            self.script,
            None if iterations is None else int(iterations),
            params,
            signature,
        )

    def _first_use(self) -> str | None:
        assert self.script is not None
        for s in self.script.in_order():
            if isinstance(s, Use):
                return s.distribution
            d = getattr(s, "distribution", None)
            if isinstance(d, str):
                return d
        return None

    def params(self, raw: Any, path: Path) -> dict[str, float] | None:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.p.add(path, "params must be a table of numbers: params = {Size = 8}")
            return None
        out: dict[str, float] = {}
        for k in raw:
            got = self.number(raw, path, k, NUMERIC[("params", "*")])
            if got is None:
                return None
            out[k] = got
        return out

    # -- checks across objects

    def check(self, spec: Spec) -> None:
        dist = spec.primary
        ds = spec.dataset(dist.dataset)
        ex = spec.execution
        if dist.type != "block1dim":
            self.check_blocks(spec, dist, ds)
            return
        if ex.builtin and (ds.type != "grid2dim" or ds.size[0] != ds.size[1]):
            self.p.add(
                ("execution", "model"),
                f"the {ex.model} model needs a square grid2dim dataset; {ds.name!r} is a "
                f"{ds.type} of size {list(ds.size)}",
            )
        self.check_nodes(spec, dist, ds)
        halo = True
        if ex.script is not None:
            halo = self.check_script(spec, ex.script)
        if halo:
            self.check_links(spec, dist)
        self.check_speeds(spec, dist, ds)

    def check_blocks(self, spec: Spec, dist: Distribution, ds: Dataset) -> None:
        """A block2dim or block3dim distribution: a built-in model, a process grid that gives
        every node an element per split axis, memory for an element, links for every two
        nodesets whose blocks may touch."""
        ex = spec.execution
        if ex.script is not None:
            self.p.add(
                ("execution", "script"),
                f"distribution {dist.name!r} is {dist.type}: scripts run on block1dim strips; "
                "block distributions evaluate the built-in models (model = "
                + " or ".join(f'"{m}"' for m in BUILTIN_MODELS)
                + ")",
            )
        elif not ex.builtin:
            self.p.add(
                ("execution", "model"),
                f"distribution {dist.name!r} is {dist.type}: a grammar file places rows on a "
                f"chain; block distributions evaluate the built-in models "
                f"({', '.join(BUILTIN_MODELS)})",
            )
        chain = [name for name in dist.nodesets for _ in range(spec.nodeset(name).number)]
        dims = DISTRIBUTION_TYPES[dist.type]
        grid = process_grid(len(chain), ds.size, dims)
        if grid is None:
            self.p.add(
                ("distribution", dist.index, "nodeset"),
                f"distribution {dist.name!r} spreads dataset {ds.name!r} "
                f"({grid_text(ds.size)}) over {len(chain)} nodes: no process grid "
                f"of {dims} axes gives every node at least one element per axis; the nodeset "
                "is too large for the dataset (or the dataset too small)",
            )
        self.check_grains(spec, dist, ds, "element", ds.bytesperunit)
        self.check_capacity(spec, dist, ds)
        if grid is not None:
            self.check_links(spec, dist, _touching(chain, grid), grid_text(grid))
        self.check_speeds(spec, dist, ds)

    def check_grains(
        self, spec: Spec, dist: Distribution, ds: Dataset, unit: str, need: float
    ) -> None:
        """Every node must hold at least one ``unit`` (``need`` bytes) of the dataset."""
        for name in dist.nodesets:
            ns = spec.nodeset(name)
            if ns.grainsize is not None and ns.grainsize < need:
                self.p.add(
                    ("nodeset", ns.index, "grainsize"),
                    f"a node of {ns.name!r} holds {ns.grainsize:g} bytes, less than one {unit} "
                    f"of {ds.name!r} ({need:g} bytes)",
                )

    def check_nodes(self, spec: Spec, dist: Distribution, ds: Dataset) -> None:
        nodes = sum(spec.nodeset(n).number for n in dist.nodesets)
        path: Path = ("distribution", dist.index, "nodeset")
        if nodes > ds.rows:
            self.p.add(
                path,
                f"distribution {dist.name!r} spreads dataset {ds.name!r} ({ds.rows} rows) over "
                f"{nodes} nodes: more nodes than rows; the nodeset is too large for the dataset "
                "(or the dataset too small)",
            )
        self.check_grains(spec, dist, ds, "row", ds.row_bytes)
        self.check_capacity(spec, dist, ds)

    def check_capacity(self, spec: Spec, dist: Distribution, ds: Dataset) -> None:
        members = [spec.nodeset(n) for n in dist.nodesets]
        path: Path = ("distribution", dist.index, "nodeset")
        if all(ns.grainsize is not None for ns in members):
            capacity = sum(ns.number * (ns.grainsize or 0.0) for ns in members)
            if capacity < ds.total_bytes:
                self.p.add(
                    path,
                    f"the nodesets of {dist.name!r} hold {capacity:g} bytes, less than dataset "
                    f"{ds.name!r} ({ds.total_bytes:g} bytes): too small for the dataset",
                )

    def check_links(
        self,
        spec: Spec,
        dist: Distribution,
        pairs: Sequence[tuple[str, str]] | None = None,
        grid: str | None = None,
    ) -> None:
        """Links across each nodeset of several nodes and between the nodesets whose nodes
        exchange: ``pairs`` (default: consecutive in the chain, as strips)."""
        path: Path = ("distribution", dist.index, "nodeset")
        for name in dist.nodesets:
            ns = spec.nodeset(name)
            across = [ls for ls in spec.linksets if ls.across == name]
            if ns.number > 1 and not across:
                self.p.add(
                    ("nodeset", ns.index),
                    f"no linkset across {name!r}: its {ns.number} nodes exchange halos (add "
                    f"[[linkset]] with across = {name!r})",
                )
            if len(across) > 1:
                self.p.add(
                    ("linkset", across[1].index, "across"),
                    f"two linksets across {name!r} ({across[0].name!r}, {across[1].name!r})",
                )
            for ls in across[:1]:
                need = {
                    "chain": ns.number - 1,
                    "ring": ns.number,
                    "full": ns.number * (ns.number - 1) // 2,
                    "bus": 1,
                }[ls.topology]
                if ls.number is not None and ls.number < need:
                    self.p.add(
                        ("linkset", ls.index, "number"),
                        f"a {ls.topology} over the {ns.number} nodes of {name!r} needs {need} "
                        f"links; linkset {ls.name!r} has {ls.number}",
                    )
        for a, b in itertools.pairwise(dist.nodesets) if pairs is None else pairs:
            joining = [ls for ls in spec.linksets if ls.joins(a, b)]
            why = (
                "the strips cross from one to the other"
                if grid is None
                else f"their blocks may touch in the {grid} process grid"
            )
            if not joining:
                self.p.add(
                    path,
                    f"no linkset joins {a!r} and {b!r}: {why} "
                    f"(add [[linkset]] with updown = [{a!r}, {b!r}])",
                )
            elif len(joining) > 1:
                self.p.add(
                    ("linkset", joining[1].index, "updown"), f"two linksets join {a!r} and {b!r}"
                )

    def check_speeds(self, spec: Spec, dist: Distribution, ds: Dataset) -> None:
        ex = spec.execution
        for name in dist.nodesets:
            ns = spec.nodeset(name)
            if ns.floatspeed is None and ns.profile is None and ns.host is None:
                self.p.add(
                    ("nodeset", ns.index),
                    f"nodeset {name!r} computes: give its speed (floatspeed, profile or host)",
                )
            if ns.floatspeed is not None and ds.work <= 0:
                self.p.add(
                    ("dataset", ds.index),
                    f"dataset {ds.name!r} has no work per unit: give floatsperunit (or "
                    f"operationsperunit) for nodeset {name!r}'s floatspeed",
                )
            if ns.profile is not None and not ex.builtin and ex.signature is None:
                self.p.add(
                    ("nodeset", ns.index, "profile"),
                    f"nodeset {name!r} takes its speed from a profile: [execution] needs "
                    "'signature' (the application's, docs/pmac.md)",
                )

    def check_script(self, spec: Spec, script: Script) -> bool:
        """Names in the script exist and fit this version; returns whether it sends halos."""
        ex = spec.execution
        primary = spec.primary
        names = [d.name for d in spec.distributions]
        counts = spec.counts()
        start = self.p.locator.string_start(("execution", "script"))
        halo = False
        for s in script.walk():
            pos = _script_position(start, s.line, s.column)
            where: Path = ("execution", "script")
            if isinstance(s, Repeat) and isinstance(s.count, str) and s.count not in counts:
                self.p.add(
                    where,
                    f"repeat {s.count}: no such count; give it as [execution] iterations or "
                    f"params{_suggest(s.count, list(counts))}",
                    pos,
                )
            elif isinstance(s, Repeat) and isinstance(s.count, str):
                value = counts[s.count]
                if value != int(value) or value < 1:
                    self.p.add(
                        where,
                        f"repeat {s.count}: {s.count} = {value:g}, not a whole number >= 1",
                        pos,
                    )
            dist = s.distribution if isinstance(s, Use) else getattr(s, "distribution", None)
            if isinstance(dist, str):
                if dist not in names:
                    what = (
                        f"{dist!r} is a dataset; statements name a distribution"
                        if dist in [d.name for d in spec.datasets]
                        else f"no distribution named {dist!r}"
                    )
                    self.p.add(where, f"{what}{_suggest(dist, names)}", pos)
                    continue
                d = spec.distribution(dist)
                if d.nodesets != primary.nodesets or d.type != "block1dim":
                    self.p.add(
                        where,
                        f"distribution {dist!r} must be block1dim over the same nodesets as "
                        f"{primary.name!r} ({', '.join(primary.nodesets)}) in this version",
                        pos,
                    )
            if isinstance(s, Send):
                halo = True
            if isinstance(s, Move):
                self.check_move(spec, s, pos)
        try:
            found = script_phases(script, counts, ex.distribution)
        except KeyError:
            return halo  # reported above
        if any(
            ph.count > MAX_RUNS or any(v * ph.count > MAX_RUNS for _, v in ph.terms) for ph in found
        ):
            self.p.add(
                ("execution", "script"), f"the repeats run a statement more than {MAX_RUNS:g} times"
            )
        if not any(t[0] == "compute" for ph in found for t, _ in ph.terms):
            self.p.add(
                ("execution", "script"), "the script never computes: add 'compute' statements"
            )
        return halo

    def check_move(self, spec: Spec, s: Move, pos: Position | None) -> None:
        where: Path = ("execution", "script")
        names = [n.name for n in spec.nodesets]
        if s.nodeset in self.absent:
            self.p.add(where, f"move {s.direction} {s.nodeset!r}: it has number = 0 here", pos)
            return
        if s.nodeset not in names:
            self.p.add(
                where,
                f"move {s.direction} {s.nodeset!r}: no such nodeset{_suggest(s.nodeset, names)}",
                pos,
            )
            return
        for member in spec.primary.nodesets:
            if member == s.nodeset:
                self.p.add(
                    where, f"move {s.direction} {s.nodeset!r}: the data is already there", pos
                )
            elif spec.link_between(member, s.nodeset) is None:
                self.p.add(
                    where,
                    f"move {s.direction} {s.nodeset!r}: no linkset joins {member!r} and "
                    f"{s.nodeset!r} (updown)",
                    pos,
                )
        target = spec.nodeset(s.nodeset)
        dist = (
            spec.distribution(s.distribution)
            if s.distribution in [d.name for d in spec.distributions]
            else spec.primary
        )
        ds = spec.dataset(dist.dataset)
        if target.grainsize is not None and target.grainsize * target.number < ds.total_bytes:
            self.p.add(
                where,
                f"move {s.direction} {s.nodeset!r}: it holds {target.grainsize * target.number:g} "
                f"bytes, less than dataset {ds.name!r} ({ds.total_bytes:g} bytes)",
                pos,
            )


def _touching(chain: Sequence[str], grid: Sequence[int]) -> list[tuple[str, str]]:
    """Pairs of different nodesets (chain order, each once) with nodes whose blocks may touch
    in ``grid`` (``chain``: each node's nodeset, in chain order)."""
    first = {name: i for i, name in reversed(list(enumerate(chain)))}
    out: set[tuple[str, str]] = set()
    for adj in adjacent(grid):
        for a in {chain[i] for i in adj.a}:
            for b in {chain[j] for j in adj.b}:
                if a != b:
                    out.add((a, b) if first[a] < first[b] else (b, a))
    return sorted(out, key=lambda p: (first[p[0]], first[p[1]]))


def _script_position(start: Position | None, line: int, column: int) -> Position | None:
    """A script's (line, column) in the file."""
    if start is None:
        return None
    if line == 1:
        return Position(start.line, start.column + column - 1)
    return Position(start.line + line - 1, column)


# ------------------------------------------------------------------------------ parse


def _read_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+), column (\d+)", str(exc))
        line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        raise SpecError([Problem("", f"not valid TOML: {exc}", line, col)], source) from None


def _script(doc: Mapping[str, Any], locator: Locator, problems: _Problems) -> Script | None:
    ex = doc.get("execution")
    text = ex.get("script") if isinstance(ex, Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        return parse_script(text)
    except ScriptError as exc:
        start = locator.string_start(("execution", "script"))
        for sp in exc.problems:
            problems.add(
                ("execution", "script"), sp.message, _script_position(start, sp.line, sp.column)
            )
        return None


def parse_spec(
    text: str,
    source: str = "spec",
    read: Callable[[str], str] | None = None,
    simgrid: str | None = None,
) -> WhatIf:
    """Read, expand and check a spec; :class:`SpecError` lists every problem (line, field,
    message) when there is any, so nothing is evaluated from a spec with a mistake.

    ``[machine] simgrid = "platform.xml"`` (or ``simgrid``, which replaces it: the CLI's
    ``--simgrid``) adds the platform's nodesets and linksets, read through ``read`` (the
    resolver's ``text``), after the spec's own."""
    doc = _read_toml(text, source)
    locator = Locator(text)
    notes, counts = _machine(doc, locator, source, read, simgrid)
    try:
        whatif = _parse_doc(doc, text, source, locator)
    except SpecError as exc:
        if not counts:
            raise
        at = locator.find(("machine", "simgrid")) if simgrid is None else None
        raise SpecError([_platform_problem(p, counts, at) for p in exc.problems], source) from None
    return replace(whatif, text=text, locator=locator, notes=notes)


def _machine(
    doc: dict[str, Any],
    locator: Locator,
    source: str,
    read: Callable[[str], str] | None,
    simgrid: str | None,
) -> tuple[tuple[str, ...], dict[str, int]]:
    """Merges the SimGrid platform's tables into ``doc``; returns its notes and how many
    nodesets and linksets the spec itself has (the platform's come after them)."""
    machine = doc.pop("machine", None)
    problems = _Problems(locator)
    path: Path = ("machine", "simgrid")
    if machine is not None and not isinstance(machine, Mapping):
        problems.add(("machine",), 'machine must be a table: [machine] simgrid = "platform.xml"')
    elif machine is not None:
        for key in machine:
            if key not in MACHINE_FIELDS:
                problems.add(
                    ("machine", key),
                    f"unknown field {key!r} in [machine]{_suggest(key, MACHINE_FIELDS)}",
                )
    ref = simgrid if simgrid is not None else (machine or {}).get("simgrid")
    if ref is not None and not isinstance(ref, str):
        problems.add(path, f"simgrid must be a file name, got {ref!r}")
    elif ref is not None and read is None:
        problems.add(path, "a SimGrid platform is named but no reader was given to read it")
    elif ref is not None and read is not None:
        try:
            platform = read_platform(ref, read)
        except PlatformError as exc:
            for line, column, message in exc.problems:
                where = f"{exc.source}:{line}:{column}" if line is not None else exc.source
                problems.add(path, f"{where}: {message}")
        except (OSError, ValueError) as exc:
            why = f"no such file {ref!r}" if isinstance(exc, FileNotFoundError) else str(exc)
            problems.add(path, f"cannot read the SimGrid platform: {why}")
        else:
            counts = {}
            for kind, tables in (("nodeset", platform.nodesets), ("linkset", platform.linksets)):
                mine = doc.setdefault(kind, [])
                counts[kind] = len(mine) if isinstance(mine, list) else 0
                if isinstance(mine, list):
                    mine.extend(copy.deepcopy(list(tables)))
            if problems.items:
                raise SpecError(problems.items, source)
            return platform.notes, counts
    if problems.items:
        raise SpecError(problems.items, source)
    return (), {}


def _platform_problem(p: Problem, counts: Mapping[str, int], at: Position | None) -> Problem:
    """A problem in an object the platform made points at ``[machine]`` and says so."""
    m = re.match(r"^(nodeset|linkset)\[(\d+)\]", p.field)
    if m is None or int(m.group(2)) < counts.get(m.group(1), 0):
        return p
    return Problem(
        p.field,
        f"{p.message} (in the SimGrid platform's {m.group(1)}s)",
        at.line if at else None,
        at.column if at else None,
    )


def _parse_doc(doc: dict[str, Any], text: str, source: str, locator: Locator) -> WhatIf:
    problems = _Problems(locator)
    sweep = doc.pop("sweep", None)
    script = _script(doc, locator, problems)
    script_problems = len(problems.items)
    axes, written = _find_axes(doc, problems)
    dims = _dimensions(sweep, axes, problems, written)
    total = math.prod(len(axes[d[0]].values) for d in dims) if dims else 1
    if total > MAX_POINTS:
        sizes = " x ".join(f"{len(axes[d[0]].values)} ({axes[d[0]].label})" for d in dims)
        problems.add(
            axes[0].path, f"the sweep expands to {total} points ({sizes}); at most {MAX_POINTS}"
        )
    if len(problems.items) > script_problems:  # the sweep cannot be expanded
        raise SpecError(problems.items, source)
    points, found = _points(doc, axes, dims, locator, script)
    if found or problems.items:
        raise SpecError([*problems.items, *found], source)
    together = tuple(tuple(axes[i].label for i in d) for d in dims if len(d) > 1)
    return WhatIf(source, text, tuple(axes), tuple(points), locator, together=together)


def _dimensions(
    sweep: Any, axes: Sequence[Axis], problems: _Problems, written: set[str]
) -> list[tuple[int, ...]]:
    """The sweep's independent dimensions as indices into ``axes``: each axis alone, except
    the groups ``[sweep] together`` names, which move in step (their lengths must agree).
    Weak scaling is one: ``together = [["nodeset.node.number", "dataset.grid.size"]]``."""
    groups: list[tuple[int, ...]] = []
    if sweep is not None:
        groups = _together(sweep, axes, problems, written)
    grouped = {i for g in groups for i in g}
    dims = [*groups, *((i,) for i in range(len(axes)) if i not in grouped)]
    return sorted(dims, key=lambda d: d[0])


def _together(
    sweep: Any, axes: Sequence[Axis], problems: _Problems, written: set[str]
) -> list[tuple[int, ...]]:
    """The groups as indices into ``axes``; a group naming a sweep that could not be read
    (``written``, its own problem already said) is left out without a second message."""
    if not isinstance(sweep, Mapping):
        problems.add(("sweep",), 'sweep must be a table: [sweep] together = [["a", "b"]]')
        return []
    for key in sweep:
        if key not in SWEEP_FIELDS:
            problems.add(
                ("sweep", key), f"unknown field {key!r} in [sweep]{_suggest(key, SWEEP_FIELDS)}"
            )
    raw = sweep.get("together", [])
    path: Path = ("sweep", "together")
    if not isinstance(raw, list) or not all(isinstance(g, list) for g in raw):
        problems.add(path, 'together must be a list of lists of swept fields: [["a", "b"]]')
        return []
    labels = {a.label: i for i, a in enumerate(axes)}
    taken: set[int] = set()
    groups: list[tuple[int, ...]] = []
    for k, group in enumerate(raw):
        where: Path = (*path, k)
        if len(group) < 2 or not all(isinstance(g, str) for g in group):
            problems.add(where, f"a group names two swept fields or more, got {group!r}")
            continue
        found: list[int] = []
        for name in group:
            if name not in labels and name in written:
                continue  # a sweep with its own problem
            if name not in labels:
                near = _suggest(name, list(labels))
                swept = ", ".join(labels) or "none"
                problems.add(where, f"{name!r} is not a swept field{near} (swept: {swept})")
            elif labels[name] in taken or labels[name] in found:
                problems.add(where, f"{name!r} is in two groups, or twice in one")
            else:
                found.append(labels[name])
        if len(found) != len(group):
            continue
        sizes = {axes[i].label: len(axes[i].values) for i in found}
        if len(set(sizes.values())) > 1:
            shown = ", ".join(f"{n} has {v}" for n, v in sizes.items())
            problems.add(where, f"fields swept together need as many values each: {shown}")
            continue
        taken.update(found)
        groups.append(tuple(found))
    return groups


def _points(
    doc: dict[str, Any],
    axes: Sequence[Axis],
    dims: Sequence[tuple[int, ...]],
    locator: Locator,
    script: Script | None,
) -> tuple[list[SpecPoint], list[Problem]]:
    """Every point built and checked (the product of the dimensions, the axes of one
    dimension in step); a problem found at some points only says where."""
    points: list[SpecPoint] = []
    per_point: list[list[Problem]] = []
    combos = [
        _combo(axes, dims, ks)
        for ks in itertools.product(*(range(len(axes[d[0]].values)) for d in dims))
    ]
    for combo in combos:
        concrete = copy.deepcopy(doc)
        for axis, value in zip(axes, combo, strict=True):
            _set(concrete, axis.path, value)
        problems = _Problems(locator)
        spec = _Builder(concrete, problems, script).build()
        per_point.append(problems.items)
        if spec is not None:
            labels = tuple((a.label, v) for a, v in zip(axes, combo, strict=True))
            points.append(SpecPoint(labels, spec))
    everywhere = set.intersection(*(set(p) for p in per_point)) if per_point else set()
    out: list[Problem] = list(dict.fromkeys(p for p in per_point[0] if p in everywhere))
    seen = set(out)
    for combo, found in zip(combos, per_point, strict=True):
        for p in found:
            if p in everywhere or (p.field, p.message) in {
                (q.field, q.message.split(" (at ")[0]) for q in seen
            }:
                continue
            at = ", ".join(
                f"{a.label} = {_show_value(v)}" for a, v in zip(axes, combo, strict=True)
            )
            q = Problem(p.field, f"{p.message} (at {at})", p.line, p.column)
            out.append(q)
            seen.add(q)
    return points, out


def _combo(
    axes: Sequence[Axis], dims: Sequence[tuple[int, ...]], ks: Sequence[int]
) -> tuple[Any, ...]:
    """Each axis's value at the dimensions' indices ``ks``, in the axes' order."""
    at = {i: k for d, k in zip(dims, ks, strict=True) for i in d}
    return tuple(a.values[at[i]] for i, a in enumerate(axes))


def _show_value(v: Any) -> str:
    if isinstance(v, tuple | list):
        return "x".join(_show_value(x) for x in v)
    return f"{v:g}" if isinstance(v, float) else str(v)
