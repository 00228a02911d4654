"""Schemas of parameterization templates (``/api/v1/templates``), bounded here."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ppe.service.schemas import Description, ModelName, ModelText, Params
from ppe.service.schemas_runs import SystemName

#: Most systems one evaluation may name (each is read and evaluated).
MAX_SYSTEMS = 256


class TemplateIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "sor-mpi",
                    "app": "sor",
                    "text": "ADDM*N^3/(P-1) + 2*N*MPISR(L)/(P-1) + N*MPIBC(L)",
                    "description": "Prophecy's example template",
                }
            ]
        },
    )
    name: ModelName
    app: ModelName
    text: ModelText
    description: Description = ""


class TemplateOut(BaseModel):
    name: str
    app: str
    text: str
    description: str
    created_at: float
    owner_token_id: int | None
    #: every name the template needs (application and system parameters), None when the
    #: stored text no longer compiles
    names: list[str] | None
    functions: list[str] | None


class TemplateEvaluate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"params": {"N": 1000, "P": 4, "L": 8000}, "systems": ["h0", "h0,h1"]}]
        },
    )
    params: Params = Field(default_factory=dict)
    systems: (
        Annotated[
            list[SystemName],
            Field(
                min_length=1,
                max_length=MAX_SYSTEMS,
                description="resources or groups ('h0,h1'); null: every registered resource",
            ),
        ]
        | None
    ) = None


class SystemResult(BaseModel):
    system: str
    hosts: list[str]
    value: float | None
    #: the system parameters the template used, and where each came from
    parameters: dict[str, float]
    sources: dict[str, str]
    #: why there is no value on this system (422-style: status, type, message, name)
    problem: dict[str, Any] | None = None


class TemplateValues(BaseModel):
    template: str
    app: str
    params: dict[str, float]
    results: list[SystemResult]
