"""Measured runs of an application: the record, its idempotency key, and what makes it valid.

A run is one measurement point: an application's kernel (a region, or ``total``) at given
parameter values (``n``, ``p``, ...) on a system, with one value per repetition. The HTTP API
and the file importers build the same :class:`RunRecord` and check it with the same
:func:`check_record`, so a run refused by one path is refused by the other, for the same reason.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: What a run's outcome may be: a failed run (a rank died, the run was stopped) is kept and
#: labelled, never mistaken for a normal one.
STATUSES = ("completed", "failed")
DEFAULT_KERNEL = "total"
DEFAULT_METRIC = "time"
#: Repetitions per run, and runs per batch (the API's whole-batch limit).
MAX_VALUES = 1000
MAX_BATCH = 5000
#: Parameters per run, and the magnitude of their values.
MAX_PARAMS = 64
MAX_PARAM_VALUE = 1e15
#: A run report (per-rank times, rows, re-plans...) serialised as compact UTF-8 JSON.
MAX_REPORT_BYTES = 256 * 1024
#: Nesting depth of a report: deeper documents are refused before they are walked or stored.
MAX_REPORT_DEPTH = 32
_INT64 = 2**63


@dataclass(frozen=True)
class RunRecord:
    """One run as stored: what was measured, where, and its repetitions' values."""

    app: str
    values: tuple[float, ...]
    kernel: str = DEFAULT_KERNEL
    params: Mapping[str, float] = field(default_factory=dict)
    system: str | None = None
    metric: str = DEFAULT_METRIC
    schedule_id: int | None = None
    status: str = "completed"
    report: Mapping[str, Any] | None = None
    key: str | None = None

    def content_key(self) -> str:
        """SHA-256 of everything but the key: the same run posted twice gets the same key.

        Numbers are compared as floats (``1000`` and ``1000.0`` are one parameter value), and
        mapping order does not matter.
        """
        content = {
            "app": self.app,
            "kernel": self.kernel,
            "params": {k: float(v) for k, v in self.params.items()},
            "system": self.system,
            "metric": self.metric,
            "values": [float(v) for v in self.values],
            "schedule_id": self.schedule_id,
            "status": self.status,
            "report": self.report,
        }
        text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def idempotency_key(self) -> str:
        """The client's key when it gave one, else :meth:`content_key`."""
        return self.key if self.key is not None else self.content_key()


@dataclass(frozen=True)
class RunProblem:
    """Something wrong with one run of a batch: which run (None: the batch), which field, why."""

    index: int | None
    field: str
    reason: str


def check_values(values: Sequence[float]) -> str | None:
    """Why these repetitions cannot be stored, or None."""
    if not values:
        return "no values: a run has at least one repetition"
    if len(values) > MAX_VALUES:
        return f"{len(values)} values: at most {MAX_VALUES} repetitions per run"
    for i, v in enumerate(values):
        why = check_value(v)
        if why:
            return f"values[{i}] {why}"
    return None


def check_value(value: float) -> str | None:
    """Why one repetition's value cannot be stored, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "is not a number"
    if not math.isfinite(value):
        return f"is {value}: values must be finite"
    if value < 0:
        return f"is {value:g}: values are >= 0 (seconds for time)"
    return None


def check_params(params: Mapping[str, float]) -> str | None:
    """Why these parameter values cannot be stored, or None."""
    if len(params) > MAX_PARAMS:
        return f"{len(params)} parameters: at most {MAX_PARAMS}"
    for name, v in params.items():
        if not name:
            return "a parameter has an empty name"
        if isinstance(v, bool) or not isinstance(v, int | float):
            return f"parameter {name!r} is not a number"
        if not math.isfinite(v) or abs(v) > MAX_PARAM_VALUE:
            return f"parameter {name!r} is {v}: finite and at most {MAX_PARAM_VALUE:g} in size"
    return None


def check_report(report: Mapping[str, Any] | None) -> str | None:
    """Why this report cannot be stored as JSON on every store, or None.

    Free JSON, but finite numbers, 64-bit integers, no NUL characters (PostgreSQL refuses
    them) and at most :data:`MAX_REPORT_BYTES` once serialised.
    """
    if report is None:
        return None
    if not isinstance(report, Mapping):
        return "a report is a JSON object"
    stack: list[tuple[Any, int, str]] = [(report, 1, "report")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_REPORT_DEPTH:
            return f"{where}: nested deeper than {MAX_REPORT_DEPTH} levels"
        if isinstance(value, Mapping):
            for k, v in value.items():
                if not isinstance(k, str) or _bad_text(k):
                    return f"{where}: keys are valid Unicode text without NUL characters"
                stack.append((v, depth + 1, f"{where}.{k}"))
        elif isinstance(value, list | tuple):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if not -_INT64 <= value < _INT64:
                return f"{where}: integers must fit in 64 bits"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"{where}: numbers must be finite"
        elif isinstance(value, str):
            if _bad_text(value):
                return f"{where}: text must be valid Unicode without NUL characters"
        else:
            return f"{where}: not a JSON value"
    size = len(json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_REPORT_BYTES:
        return f"report is {size} bytes serialised: at most {MAX_REPORT_BYTES}"
    return None


def _bad_text(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON "\ud800" escape
        return True
    return False


def check_record(record: RunRecord) -> list[tuple[str, str]]:
    """Every (field, reason) wrong with one run; empty when it may be stored."""
    problems: list[tuple[str, str]] = []
    for name in ("app", "kernel", "metric"):
        if not getattr(record, name):
            problems.append((name, f"{name} must not be empty"))
    if record.system is not None and not record.system:
        problems.append(("system", "system must not be empty (omit it, or name the system)"))
    if record.key is not None and not record.key:
        problems.append(("key", "key must not be empty (omit it for the content hash)"))
    checks = (
        ("values", check_values(record.values)),
        ("params", check_params(record.params)),
        ("report", check_report(record.report)),
    )
    problems.extend((name, why) for name, why in checks if why)
    if record.status not in STATUSES:
        problems.append(("status", f"status is one of {', '.join(STATUSES)}"))
    if record.schedule_id is not None and record.schedule_id < 1:
        problems.append(("schedule_id", "a schedule id is a positive integer"))
    return problems


def check_batch(records: Sequence[RunRecord]) -> list[RunProblem]:
    """Problems of a whole batch (a batch is stored whole or not at all)."""
    if not records:
        return [RunProblem(None, "runs", "empty batch: send at least one run")]
    if len(records) > MAX_BATCH:
        return [RunProblem(None, "runs", f"{len(records)} runs: at most {MAX_BATCH} per batch")]
    return [
        RunProblem(i, name, why)
        for i, record in enumerate(records)
        for name, why in check_record(record)
    ]
