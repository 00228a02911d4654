"""Application signatures: what one unit of an application's work costs in basic operations.

A signature is a small TOML document (format described in docs/pmac.md): the parameters its
formulas may use, then per unit of work the floating-point operations, the memory operations
by pattern, kind, element size and working set, the interpreter-level operations (numpy calls
and slices, which a compiled kernel would not have), and the messages per iteration to each
neighbour. Counts, sizes and working sets are numbers or formulas in the PPE expression
language (``3 * n * 8``), checked when the signature is read: an unknown parameter, an unknown
pattern or kind, or a negative number is refused before anything is convolved.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ppe.core.errors import ModelError
from ppe.core.evaluate import evaluate_expression
from ppe.core.grammar import CompiledExpression, compile_expression
from ppe.pmac.profile import FLOP_KINDS, KINDS, OVERHEAD_KINDS, PATTERNS

FORMAT = "ppe-pmac-signature"
FORMAT_VERSION = 1
BUILTIN = ("sor", "jacobi2d")


class SignatureError(ValueError):
    """A signature that cannot be used; the message names the entry and the problem."""


@dataclass(frozen=True)
class Formula:
    """A number or an expression over the signature's parameters."""

    text: str
    expr: CompiledExpression = field(repr=False, compare=False)
    constant: float | None = field(default=None, repr=False, compare=False)

    def value(
        self, params: Mapping[str, float], what: str, memo: dict[str, float] | None = None
    ) -> float:
        """The value at ``params``; ``memo`` (text -> value, for one set of params) spares
        evaluating the same formula twice, as signatures repeat their working sets."""
        if self.constant is not None:
            return self.constant
        if memo is not None and self.text in memo:
            return memo[self.text]
        try:
            v = evaluate_expression(self.expr, params)
        except ModelError as exc:
            raise SignatureError(f"{what} = {self.text}: {exc}") from None
        if not math.isfinite(v) or v < 0:
            raise SignatureError(f"{what} = {self.text} is {v!r}: counts and sizes must be >= 0")
        if memo is not None:
            memo[self.text] = v
        return v


@dataclass(frozen=True)
class MemoryOp:
    pattern: str
    kind: str
    count: Formula
    bytes: Formula
    working_set: Formula
    why: str = ""


@dataclass(frozen=True)
class CountedOp:
    """A flop or overhead entry: ``count`` operations of ``kind`` per unit."""

    kind: str
    count: Formula
    why: str = ""


@dataclass(frozen=True)
class MessageOp:
    """``count`` messages of ``bytes`` each, per iteration, to every neighbour."""

    count: Formula
    bytes: Formula
    why: str = ""


@dataclass(frozen=True)
class Signature:
    name: str
    unit: str
    kernel: str
    parameters: Mapping[str, float | None]  # name -> default (None: must be given)
    units_per_iteration: Formula
    memory: tuple[MemoryOp, ...]
    flops: tuple[CountedOp, ...]
    overheads: tuple[CountedOp, ...]
    messages: tuple[MessageOp, ...]

    def bind(self, values: Mapping[str, float]) -> dict[str, float]:
        """The parameter values: the given ones over the defaults; unknown or missing names
        are errors."""
        unknown = sorted(set(values) - set(self.parameters))
        if unknown:
            raise SignatureError(
                f"signature {self.name!r} has no parameter {unknown[0]!r} "
                f"(it has: {', '.join(sorted(self.parameters))})"
            )
        out: dict[str, float] = {}
        for name, default in self.parameters.items():
            v = values.get(name, default)
            if v is None:
                raise SignatureError(f"signature {self.name!r} needs a value for {name!r}")
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise SignatureError(f"parameter {name!r} must be a finite number, got {v!r}")
            out[name] = float(v)
        return out


def _text(d: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    v = d.get(key, default)
    if not isinstance(v, str):
        raise SignatureError(f"{where}: {key!r} must be a string")
    return v


def _formula(raw: Any, where: str, params: Mapping[str, Any]) -> Formula:
    if raw is None:
        raise SignatureError(f"{where} is missing")
    if isinstance(raw, bool):
        raise SignatureError(f"{where}: expected a number or a formula, got {raw!r}")
    if isinstance(raw, int | float):
        if not math.isfinite(raw) or raw < 0:
            raise SignatureError(f"{where}: negative or non-finite count {raw!r}")
        text = repr(raw)
    elif isinstance(raw, str):
        text = raw
    else:
        raise SignatureError(f"{where}: expected a number or a formula, got {raw!r}")
    try:
        expr = compile_expression(text)
    except ModelError as exc:
        raise SignatureError(f"{where}: {text!r}: {exc}") from None
    for name in expr.names:
        if name not in params:
            raise SignatureError(
                f"{where}: {text!r} uses unknown parameter {name!r} "
                f"(declared: {', '.join(sorted(params)) or 'none'})"
            )
    if not expr.names:  # a constant: refuse a negative one now, and evaluate it once
        return Formula(text, expr, Formula(text, expr).value({}, where))
    return Formula(text, expr)


TOP_KEYS = frozenset(
    {"format", "version", "name", "kernel", "unit", "description", "units_per_iteration"}
    | {"parameters", "memory", "flops", "overhead", "messages"}
)
ENTRY_KEYS = {
    "memory": frozenset({"pattern", "kind", "count", "bytes", "working_set", "why"}),
    "flops": frozenset({"kind", "count", "why"}),
    "overhead": frozenset({"kind", "count", "why"}),
    "messages": frozenset({"count", "bytes", "why"}),
}


def _unknown_keys(table: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    """A misspelt key (``cout``, ``working-set``) is an error, not a silent default."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SignatureError(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )


def _entries(doc: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    raw = doc.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(e, Mapping) for e in raw):
        raise SignatureError(f"{key!r} must be an array of tables ([[{key}]])")
    for i, entry in enumerate(raw):
        _unknown_keys(entry, ENTRY_KEYS[key], f"{key}[{i}]")
    return raw


def _choice(e: Mapping[str, Any], key: str, allowed: tuple[str, ...], where: str) -> str:
    v = e.get(key)
    if v not in allowed:
        raise SignatureError(f"{where}: unknown {key} {v!r} (known: {', '.join(allowed)})")
    return str(v)


def signature_from_dict(doc: Mapping[str, Any]) -> Signature:
    if doc.get("format") != FORMAT:
        raise SignatureError(f"not a signature (format = {doc.get('format')!r}, want {FORMAT!r})")
    if doc.get("version") != FORMAT_VERSION:
        raise SignatureError(f"signature version {doc.get('version')!r} (this reads 1)")
    _unknown_keys(doc, TOP_KEYS, "signature")
    name = _text(doc, "name", "signature")
    raw_params = doc.get("parameters", {})
    if not isinstance(raw_params, Mapping):
        raise SignatureError("[parameters] must be a table")
    params: dict[str, float | None] = {}
    for pname, spec in raw_params.items():
        # `n = { doc = "...", default = 8 }`, or `Size = 8` for a default alone
        if isinstance(spec, Mapping):
            _unknown_keys(spec, frozenset({"doc", "default"}), f"parameter {pname!r}")
            default = spec.get("default")
        else:
            default = spec
        if default is not None and (
            isinstance(default, bool) or not isinstance(default, int | float)
        ):
            raise SignatureError(f"parameter {pname!r}: default must be a number, got {default!r}")
        params[pname] = None if default is None else float(default)
    memory = []
    for i, e in enumerate(_entries(doc, "memory")):
        where = f"memory[{i}]"
        memory.append(
            MemoryOp(
                _choice(e, "pattern", PATTERNS, where),
                _choice(e, "kind", KINDS, where),
                _formula(e.get("count"), f"{where}.count", params),
                _formula(e.get("bytes", 8), f"{where}.bytes", params),
                _formula(e.get("working_set"), f"{where}.working_set", params),
                _text(e, "why", where, ""),
            )
        )
    counted: dict[str, list[CountedOp]] = {}
    for key, kinds in (("flops", FLOP_KINDS), ("overhead", OVERHEAD_KINDS)):
        counted[key] = [
            CountedOp(
                _choice(e, "kind", kinds, f"{key}[{i}]"),
                _formula(e.get("count"), f"{key}[{i}].count", params),
                _text(e, "why", f"{key}[{i}]", ""),
            )
            for i, e in enumerate(_entries(doc, key))
        ]
    messages = [
        MessageOp(
            _formula(e.get("count"), f"messages[{i}].count", params),
            _formula(e.get("bytes"), f"messages[{i}].bytes", params),
            _text(e, "why", f"messages[{i}]", ""),
        )
        for i, e in enumerate(_entries(doc, "messages"))
    ]
    if not memory and not counted["flops"]:
        raise SignatureError(f"signature {name!r} counts no memory operations and no flops")
    return Signature(
        name=name,
        unit=_text(doc, "unit", "signature", "unit of work"),
        kernel=_text(doc, "kernel", "signature", ""),
        parameters=params,
        units_per_iteration=_formula(
            doc.get("units_per_iteration", 1), "units_per_iteration", params
        ),
        memory=tuple(memory),
        flops=tuple(counted["flops"]),
        overheads=tuple(counted["overhead"]),
        messages=tuple(messages),
    )


def parse_signature(text: str) -> Signature:
    """A validated signature from TOML text (raises :class:`SignatureError`)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SignatureError(f"not TOML: {exc}") from None
    return signature_from_dict(doc)


def builtin_signature_text(name: str) -> str:
    if name not in BUILTIN:
        raise SignatureError(f"no built-in signature {name!r} (built in: {', '.join(BUILTIN)})")
    return (resources.files("ppe.pmac") / "signatures" / f"{name}.toml").read_text()


def builtin_signature(name: str) -> Signature:
    """A shipped signature (package data, read like the built-in .ppg models)."""
    return parse_signature(builtin_signature_text(name))
