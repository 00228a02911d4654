"""Schemas of PAS2P phase signatures (``/api/v1/signatures/phases``) and their probes.

The analysis is ``ppe.pas2p.report.to_dict``'s object (docs/pas2p.md), checked field by field
here so that a stored signature can be run later without re-checking it: every number
finite, every count an integer, the kept ids a subset of the phases'. What ties fields
together (ids 0..P-1, the kept flags, the ranks) is :func:`analysis_problem`'s, so that each
failure names its own field path.
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ppe.service.schemas import (
    INT64_MAX,
    LINE_PATTERN,
    TEXT_PATTERN,
    ModelName,
    ParamName,
    PropertyValue,
    ResourceName,
)

#: Phases in one signature, ranks of one run, pattern characters and per-rank compute
#: volumes over all phases: what bounds a posted signature's size (a few MB at most).
MAX_PHASES = 10_000
MAX_RANKS = 1 << 20
MAX_PATTERN = 100_000
MAX_PATTERN_TOTAL = 4_000_000
MAX_VOLUMES_TOTAL = 1_000_000
#: A probe's free-form result: its compact JSON's size and nesting depth.
RESULT_MAX_BYTES = 65_536
RESULT_MAX_DEPTH = 16

Count = Annotated[int, Field(strict=True, ge=0, le=INT64_MAX)]
Seconds = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Real = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Ranks = Annotated[int, Field(strict=True, ge=1, le=MAX_RANKS, description="MPI ranks of the run")]
Version = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]


class PhaseFirst(BaseModel):
    """Where a phase first appears: segment #, logical tick, seconds from the run's start and
    the anchor rank's compute burst it starts at (-1: the set-up before the first one)."""

    model_config = ConfigDict(extra="forbid")
    occurrence: Count
    tick: Count
    time_s: Seconds
    step: Annotated[int, Field(strict=True, ge=-1, le=INT64_MAX)] | None = None


class PhaseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: Count
    pattern: Annotated[str, Field(max_length=MAX_PATTERN, pattern=LINE_PATTERN)]
    events: Count
    weight: Annotated[int, Field(strict=True, ge=1, le=INT64_MAX)]
    mean_s: Seconds
    sd_s: Seconds
    share: Seconds
    compute_s: Annotated[list[Seconds], Field(max_length=MAX_RANKS)]
    first: PhaseFirst
    step: Annotated[int, Field(strict=True, ge=-1, le=INT64_MAX)] | None = Field(
        default=None,
        description="the step a signature run executes for this phase: a typical occurrence's",
    )
    kept: bool


class AnalysisIn(BaseModel):
    """``ppe pas2p analyze --json``'s object. ``tolerance`` is null for an infinite one
    (``--tolerance inf``: JSON has no infinity)."""

    model_config = ConfigDict(extra="forbid")
    ranks: Ranks
    anchor_rank: Count
    keep: Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]
    tolerance: Seconds | None
    occurrences: Count
    phases: Annotated[list[PhaseIn], Field(min_length=1, max_length=MAX_PHASES)]
    signature: Annotated[list[Count], Field(min_length=1, max_length=MAX_PHASES)]
    kept_share: Seconds
    traced_s: Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
    predicted_s: Seconds
    error: Real


EXAMPLE_ANALYSIS: dict[str, Any] = {
    "ranks": 2,
    "anchor_rank": 0,
    "keep": 0.99,
    "tolerance": 0.5,
    "occurrences": 3,
    "phases": [
        {
            "id": 0,
            "pattern": "r0: collective; r1: collective",
            "events": 2,
            "weight": 1,
            "mean_s": 0.01,
            "sd_s": 0.0,
            "share": 0.1,
            "compute_s": [],
            "first": {"occurrence": 0, "tick": 1, "time_s": 0.0, "step": -1},
            "kept": True,
        },
        {
            "id": 1,
            "pattern": "r0: compute send(+1,8B); r1: recv(-1,8B) compute",
            "events": 4,
            "weight": 2,
            "mean_s": 0.045,
            "sd_s": 0.001,
            "share": 0.9,
            "compute_s": [0.04, 0.04],
            "first": {"occurrence": 1, "tick": 2, "time_s": 0.01, "step": 0},
            "kept": True,
        },
    ],
    "signature": [1, 0],
    "kept_share": 1.0,
    "traced_s": 0.1,
    "predicted_s": 0.1,
    "error": 0.0,
}


class PhaseSignatureIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "sor-n1000",
                    "app": "sor",
                    "parameters": {"n": 1000, "iterations": 500},
                    "ranks": 2,
                    "analysis": EXAMPLE_ANALYSIS,
                }
            ]
        },
    )
    name: ModelName
    app: ModelName
    parameters: Annotated[
        dict[ParamName, PropertyValue],
        Field(
            max_length=64,
            description="the traced run's parameters: at most 64, each a JSON scalar",
        ),
    ] = {}
    ranks: Ranks
    analysis: AnalysisIn


def analysis_problem(body: PhaseSignatureIn) -> tuple[str, str] | None:
    """The first (field, reason) that ties fields together wrongly, or None."""
    a = body.analysis
    count = len(a.phases)
    if body.ranks != a.ranks:
        return "ranks", f"the analysis is of {a.ranks} ranks, not {body.ranks}"
    if a.anchor_rank >= a.ranks:
        return "analysis.anchor_rank", f"rank {a.anchor_rank} of a {a.ranks}-rank run"
    if sum(len(p.pattern) for p in a.phases) > MAX_PATTERN_TOTAL:
        return "analysis.phases", f"at most {MAX_PATTERN_TOTAL:,} pattern characters in all"
    if sum(len(p.compute_s) for p in a.phases) > MAX_VOLUMES_TOTAL:
        return "analysis.phases", f"at most {MAX_VOLUMES_TOTAL:,} compute volumes in all"
    seen: dict[int, int] = {}
    for i, p in enumerate(a.phases):
        where = f"analysis.phases[{i}]"
        if p.id >= count:
            return f"{where}.id", f"phase ids run 0..{count - 1} ({count} phases), not {p.id}"
        if p.id in seen:
            return f"{where}.id", f"phase id {p.id} repeats phases[{seen[p.id]}]'s"
        seen[p.id] = i
        if len(p.compute_s) > a.ranks:
            return f"{where}.compute_s", f"{len(p.compute_s)} volumes for {a.ranks} ranks"
    kept: dict[int, int] = {}
    for j, pid in enumerate(a.signature):
        if pid not in seen:
            return f"analysis.signature[{j}]", f"no phase {pid}"
        if pid in kept:
            return f"analysis.signature[{j}]", f"phase {pid} is kept twice"
        kept[pid] = j
    for i, p in enumerate(a.phases):
        if p.kept != (p.id in kept):
            said = "kept" if p.kept else "not kept"
            return f"analysis.phases[{i}].kept", f"phase {p.id} is {said}, unlike `signature`"
    return None


class PhaseSignatureMeta(BaseModel):
    """A stored version as listed: what it was traced from and what it predicts."""

    name: str
    version: int
    app: str
    parameters: dict[str, Any]
    ranks: int
    kept: list[int] = Field(description="the signature's phase ids (the analysis' `signature`)")
    predicted_s: float
    traced_s: float
    created_at: float


class PhaseSignatureOut(PhaseSignatureMeta):
    analysis: dict[str, Any]


def _json_value(value: Any, depth: int) -> None:
    if depth > RESULT_MAX_DEPTH:
        raise ValueError(f"nested deeper than {RESULT_MAX_DEPTH} levels")
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise ValueError("integers must fit in 64 bits")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("numbers must be finite (no NaN or infinity)")
    elif isinstance(value, str):
        if not re.fullmatch(TEXT_PATTERN, value):
            raise ValueError("text must hold no control characters but tab and newline")
    elif isinstance(value, dict):
        for k, v in value.items():
            _json_value(k, depth)
            _json_value(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _json_value(v, depth + 1)
    else:
        raise ValueError(f"not a JSON value: {type(value).__name__}")


def _result(value: dict[str, Any]) -> dict[str, Any]:
    """Free-form, but only what every store keeps as given, and small."""
    _json_value(value, 1)
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > RESULT_MAX_BYTES:
        raise ValueError(f"at most {RESULT_MAX_BYTES} bytes of JSON, got {size}")
    return value


ProbeResult = Annotated[
    dict[str, Any],
    AfterValidator(_result),
    Field(
        description=f"what the probe measured (phase times...): a JSON object, at most "
        f"{RESULT_MAX_BYTES} bytes, finite numbers"
    ),
]


class ProbeIn(BaseModel):
    """A run of the signature on ``host``: ``ok`` with what it measured, or ``failed`` with
    why (``error`` is required then, and only then)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "host": "h0",
                    "status": "ok",
                    "result": {"phases": {"1": {"mean_s": 0.05, "repeats": 3}}},
                },
                {"host": "h1", "status": "failed", "error": "mpiexec: no such host"},
            ]
        },
    )
    host: ResourceName
    status: Literal["ok", "failed"]
    error: Annotated[str, Field(min_length=1, max_length=4096, pattern=TEXT_PATTERN)] | None = None
    result: ProbeResult | None = None
    version: Version | None = Field(default=None, description="the version probed (the newest)")


class ProbeOut(BaseModel):
    id: int
    name: str
    version: int
    host: str
    status: str
    error: str | None
    result: dict[str, Any] | None
    created_at: float
