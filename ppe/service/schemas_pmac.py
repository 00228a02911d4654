"""Schemas of machine profiles (``/api/v1/resources/{name}/profiles``) and application
signatures (``/api/v1/signatures``). The profile and signature formats themselves are
``ppe.pmac``'s (docs/pmac.md), validated there: a profile is posted as its JSON form, a
signature as its TOML text."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ppe.service.schemas import TEXT_PATTERN

#: A profile's JSON form: the probe writes about 30 kB; a few hundred curve points fit.
PROFILE_MAX_POINTS = 2000
SignatureText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=65_536,
        pattern=TEXT_PATTERN,
        description="a signature's TOML text (docs/pmac.md), at most 65 536 chars",
    ),
]


class ProfileMeta(BaseModel):
    """One stored version of a host's profile, without its figures."""

    host: str
    version: int
    measured_at: float
    method: str
    quick: bool
    received_at: float


class ProfileOut(ProfileMeta):
    """A stored profile with its figures (``ppe.pmac.profile_to_dict``)."""

    profile: dict[str, Any]


class SignatureIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    toml: SignatureText


class SignatureMeta(BaseModel):
    """A signature as listed: where it comes from and what it counts."""

    name: str
    version: int = Field(description="0 for a built-in signature")
    builtin: bool
    unit: str
    kernel: str
    parameters: dict[str, float | None] = Field(description="name -> default (null: required)")
    created_at: float | None


class SignatureOut(SignatureMeta):
    toml: str
