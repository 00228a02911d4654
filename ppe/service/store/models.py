"""Typed SQLAlchemy 2 declarative models for everything PPE keeps."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

METRICS = ("cpu", "bandwidth", "latency")
LINK_METRICS = ("bandwidth", "latency")
ROLES = ("sensor", "app", "operator", "admin")
LABEL_MAX = 255  # api_tokens.label column width
# BigInteger ids on PostgreSQL, plain INTEGER (rowid alias) on SQLite.
IdType = BigInteger().with_variant(Integer(), "sqlite")


def _now() -> float:
    return time.time()


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON}


class Resource(Base):
    """A grid host. `properties` carries benchmark (s/element), memory_bytes, and the like."""

    __tablename__ = "resources"
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    properties: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    series: Mapped[list[Series]] = relationship(back_populates="resource")


class Series(Base):
    """One measured quantity: (resource, metric, peer). `peer` is '' for host metrics."""

    __tablename__ = "series"
    __table_args__ = (UniqueConstraint("resource_id", "metric", "peer", name="uq_series_key"),)
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    resource_id: Mapped[int] = mapped_column(ForeignKey("resources.id", ondelete="CASCADE"))
    metric: Mapped[str] = mapped_column(String(32))
    peer: Mapped[str] = mapped_column(String(255), default="")
    # Kept by ingestion (store.measurements.insert_batch) so listings never count measurements.
    samples: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    latest_timestamp: Mapped[float | None] = mapped_column(Float, nullable=True)
    latest_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    resource: Mapped[Resource] = relationship(back_populates="series")


class Measurement(Base):
    """Primary key (series, timestamp) is what makes re-posted batches idempotent."""

    __tablename__ = "measurements"
    series_id: Mapped[int] = mapped_column(
        ForeignKey("series.id", ondelete="CASCADE"), primary_key=True
    )
    timestamp: Mapped[float] = mapped_column(Float, primary_key=True)
    value: Mapped[float] = mapped_column(Float)


class ApiToken(Base):
    """Bearer tokens, stored as SHA-256 digests: they are random, so no slow hash is needed.

    Rows are never deleted: a revoked token stays listed (who had access, until when).
    """

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    label: Mapped[str] = mapped_column(String(LABEL_MAX), default="")
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    # Unix seconds; None: never expires.
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)
    # Updated at most once a minute per token (store.tokens.LAST_USED_RESOLUTION_S).
    last_used_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)


class ServedLog(Base):
    """Every schedule and prediction served, request and answer as sent."""

    __tablename__ = "served_log"
    __table_args__ = (Index("ix_served_kind_id", "kind", "id"),)
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    request: Mapped[dict[str, Any]] = mapped_column(default=dict)
    response: Mapped[dict[str, Any]] = mapped_column(default=dict)


class UserModel(Base):
    """Performance-grammar models users registered (Prophecy's template database)."""

    __tablename__ = "user_models"
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    text: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    # The token that stored it: only that token or an admin may replace or delete the model.
    # None for rows older than ownership and for models an admin stored without a token.
    owner_token_id: Mapped[int | None] = mapped_column(
        IdType,
        ForeignKey("api_tokens.id", ondelete="SET NULL", name="fk_user_models_owner_token"),
        nullable=True,
        default=None,
    )


class Template(Base):
    """Parameterization templates (Prophecy's second method): a grammar expression over an
    application's parameters and the systems' (ppe.empirical.templates). Owned like models."""

    __tablename__ = "templates"
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    app: Mapped[str] = mapped_column(String(128))
    text: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    owner_token_id: Mapped[int | None] = mapped_column(
        IdType,
        ForeignKey("api_tokens.id", ondelete="SET NULL", name="fk_templates_owner_token"),
        nullable=True,
        default=None,
    )


class ResourceGroup(Base):
    """A named group of resources: one system made of several hosts (``members``, in order)."""

    __tablename__ = "resource_groups"
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    members: Mapped[list[str]] = mapped_column(JSON)
    description: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[float] = mapped_column(Float, default=_now)


class StoredCoupling(Base):
    """A loop's kernel couplings for one application, metric and system (Prophecy's third
    method), kept with ``save``: ``report`` is the answer of POST /api/v1/coupling. One per
    loop: ``system_key`` is the system or "" (a unique key cannot hold NULL), ``loop`` the
    kernels joined by " > "."""

    __tablename__ = "couplings"
    __table_args__ = (
        UniqueConstraint(
            "app", "metric", "system_key", "loop", name="uq_couplings_app_metric_system_loop"
        ),
        Index("ix_couplings_app", "app"),
    )
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    app: Mapped[str] = mapped_column(String(128))
    metric: Mapped[str] = mapped_column(String(64))
    system: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    system_key: Mapped[str] = mapped_column(String(1024))
    loop: Mapped[str] = mapped_column(String(2048))
    kernels: Mapped[list[str]] = mapped_column(JSON)
    coefficients: Mapped[dict[str, Any]] = mapped_column()
    stable: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    report: Mapped[dict[str, Any]] = mapped_column()
    computed_at: Mapped[float] = mapped_column(Float, default=_now)


class ReplayJob(Base):
    __tablename__ = "replay_jobs"
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer, default=0)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, default=None)
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)


class WhatIfJob(Base):
    """A what-if spec evaluated in the background (POST /api/v1/whatif): its text, options,
    progress over the sweep's points and report."""

    __tablename__ = "whatif_jobs"
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer, default=0)
    spec: Mapped[str] = mapped_column(Text)
    options: Mapped[dict[str, Any]] = mapped_column(default=dict)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, default=None)
    error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float, default=_now)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True, default=None)


class Run(Base):
    """A measured run of an application (the performance database of runs, run reports).

    ``key`` (the client's idempotency key, else a hash of the content) is unique per
    application, which is what makes a re-posted batch store nothing new. The schedule a run
    followed stays linked while the served log keeps it; retention's trim sets the link null.
    """

    __tablename__ = "runs"
    __table_args__ = (
        UniqueConstraint("app", "key", name="uq_runs_app_key"),
        Index("ix_runs_app_id", "app", "id"),  # GET ?app=, newest first
        Index("ix_runs_app_kernel_id", "app", "kernel", "id"),
        Index("ix_runs_system_id", "system", "id"),
        Index("ix_runs_status_id", "status", "id"),
        Index("ix_runs_schedule_id", "schedule_id"),
    )
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    app: Mapped[str] = mapped_column(String(128))
    kernel: Mapped[str] = mapped_column(String(255))
    system: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    metric: Mapped[str] = mapped_column(String(64))
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)
    values: Mapped[list[float]] = mapped_column(JSON)
    schedule_id: Mapped[int | None] = mapped_column(
        IdType,
        ForeignKey("served_log.id", ondelete="SET NULL", name="fk_runs_schedule"),
        nullable=True,
    )
    status: Mapped[str] = mapped_column(String(16))
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, default=None)
    key: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float, default=_now)


class StoredEmpiricalModel(Base):
    """An empirical model fitted to stored runs and saved under a name (``save_as``).

    ``model`` is :meth:`ppe.empirical.model.EmpiricalModel.to_dict`; ``fixed`` the parameters
    every run held at one value (a prediction keeps them there); ``type`` the fitted type
    (``search``, ``cubic``...) and ``requested_type`` what was asked (``unknown`` picks one).
    """

    __tablename__ = "empirical_models"
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    app: Mapped[str] = mapped_column(String(128))
    kernel: Mapped[str] = mapped_column(String(255))
    metric: Mapped[str] = mapped_column(String(64))
    system: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    type: Mapped[str] = mapped_column(String(32))
    requested_type: Mapped[str] = mapped_column(String(32))
    fixed: Mapped[dict[str, Any]] = mapped_column(default=dict)
    model: Mapped[dict[str, Any]] = mapped_column()
    n_points: Mapped[int] = mapped_column(Integer)
    fitted_at: Mapped[float] = mapped_column(Float, default=_now)


class HostProfile(Base):
    """One measured machine profile of a host (PMaC; ``ppe.pmac.profile``), versioned: each
    new measurement is the next ``version``, the older ones stay for comparison. ``profile``
    is the profile's JSON form (``profile_to_dict``), as validated when it was posted."""

    __tablename__ = "host_profiles"
    __table_args__ = (
        UniqueConstraint("resource_id", "version", name="uq_host_profiles_resource_version"),
    )
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    resource_id: Mapped[int] = mapped_column(ForeignKey("resources.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    measured_at: Mapped[float] = mapped_column(Float)
    method: Mapped[str] = mapped_column(String(255))
    quick: Mapped[bool] = mapped_column(Boolean)
    profile: Mapped[dict[str, Any]] = mapped_column()
    received_at: Mapped[float] = mapped_column(Float, default=_now)


class StoredSignature(Base):
    """An application signature (PMaC; ``ppe.pmac.signature``) as posted: the TOML text,
    versioned by name like profiles. Built-in signatures are shipped files, never rows."""

    __tablename__ = "signatures"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_signatures_name_version"),)
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    version: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float, default=_now)


class PhaseSignature(Base):
    """A PAS2P signature of a traced MPI run (``ppe pas2p analyze``; docs/pas2p.md): the
    analysis as ``ppe.pas2p.report.to_dict`` gives it, with the application and the run's
    parameters it was traced at; versioned by name like PMaC signatures."""

    __tablename__ = "phase_signatures"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_phase_signatures_name_version"),)
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    version: Mapped[int] = mapped_column(Integer)
    app: Mapped[str] = mapped_column(String(128))
    parameters: Mapped[dict[str, Any]] = mapped_column()
    ranks: Mapped[int] = mapped_column(Integer)
    analysis: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[float] = mapped_column(Float, default=_now)


class PhaseProbe(Base):
    """One run of a stored PAS2P signature on a host: ``ok`` with what it measured
    (``result``, free-form), or ``failed`` with why (``error``)."""

    __tablename__ = "phase_probes"
    __table_args__ = (Index("ix_phase_probes_signature_id", "signature_id", "id"),)
    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    signature_id: Mapped[int] = mapped_column(ForeignKey("phase_signatures.id", ondelete="CASCADE"))
    resource_id: Mapped[int] = mapped_column(ForeignKey("resources.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str] = mapped_column(Text, default="")
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, default=None)
    created_at: Mapped[float] = mapped_column(Float, default=_now)
