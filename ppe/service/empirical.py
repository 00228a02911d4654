"""Empirical models over the run store: fit a series of stored runs, save the fit by name,
read it back, and compute kernel couplings.

The routes (``ppe/service/api/empirical.py``) and ``ppe model fit --app`` both call
:func:`fit_stored`, and both answer :meth:`ppe.empirical.report.Fit.report`: one document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from ppe.empirical.coupling_runs import (
    TOLERANCE,
    CouplingReport,
    check_kernels,
    coupling_from_runs,
    run_kernels,
)
from ppe.empirical.errors import CouplingError, EmpiricalError
from ppe.empirical.model import EmpiricalModel
from ppe.empirical.report import SEARCH, Fit, SeriesKey, fit_series, select_series
from ppe.empirical.runs import DEFAULT_KERNEL, DEFAULT_METRIC, RunRecord
from ppe.service.store.models import Run, StoredEmpiricalModel

#: Runs one fit or coupling reads at most: more is a series no one measured by hand.
MAX_FIT_RUNS = 50_000


@dataclass(frozen=True)
class FitSpec:
    """Which stored runs to fit, and how (the body of POST /api/v1/models/empirical)."""

    app: str
    kernel: str | None = DEFAULT_KERNEL
    metric: str | None = DEFAULT_METRIC
    system: str | None = None
    type: str = SEARCH
    x: str | None = None


def load_runs(
    session: Session,
    app: str,
    kernels: Sequence[str] | None = None,
    metric: str | None = None,
    system: str | None = None,
) -> list[RunRecord]:
    """The completed runs of ``app`` (of these kernels, metric and system when given)."""
    stmt = select(Run).where(Run.app == app, Run.status == "completed")
    if kernels is not None:
        stmt = stmt.where(Run.kernel.in_(list(kernels)))
    if metric is not None:
        stmt = stmt.where(Run.metric == metric)
    if system is not None:
        stmt = stmt.where(Run.system == system)
    rows = list(session.execute(stmt.order_by(Run.id).limit(MAX_FIT_RUNS + 1)).scalars())
    if len(rows) > MAX_FIT_RUNS:
        raise EmpiricalError(
            f"more than {MAX_FIT_RUNS} runs match: name the kernel, metric and system", name="app"
        )
    return [
        RunRecord(
            app=r.app,
            values=tuple(r.values),
            kernel=r.kernel,
            params=dict(r.params),
            system=r.system,
            metric=r.metric,
            status=r.status,
        )
        for r in rows
    ]


def fit_stored(session: Session, spec: FitSpec) -> Fit:
    """Fit the series of stored runs ``spec`` names (:func:`ppe.empirical.report.fit_series`)."""
    kernels = None if spec.kernel is None else [spec.kernel]
    records = load_runs(session, spec.app, kernels, spec.metric, spec.system)
    if not records:  # say what the application does have
        records = load_runs(session, spec.app)
    key, series = select_series(
        records, app=spec.app, kernel=spec.kernel, metric=spec.metric, system=spec.system
    )
    return fit_series(key, series, spec.type, spec.x)


def stored_model(session: Session, name: str) -> StoredEmpiricalModel | None:
    return session.execute(
        select(StoredEmpiricalModel).where(StoredEmpiricalModel.name == name)
    ).scalar_one_or_none()


def list_stored(session: Session) -> list[StoredEmpiricalModel]:
    return list(
        session.execute(select(StoredEmpiricalModel).order_by(StoredEmpiricalModel.name)).scalars()
    )


def save_fit(session: Session, name: str, fit: Fit) -> StoredEmpiricalModel:
    """Add the fit under ``name`` to the session (the caller checks the name is free and
    commits)."""
    row = StoredEmpiricalModel(
        name=name,
        app=fit.key.app,
        kernel=fit.key.kernel,
        metric=fit.key.metric,
        system=fit.key.system,
        type=fit.model.kind,
        requested_type=fit.requested,
        fixed=dict(fit.fixed),
        model=fit.model.to_dict(),
        n_points=fit.model.n_points,
    )
    session.add(row)
    session.flush()
    return row


def fit_of(row: StoredEmpiricalModel) -> Fit:
    """The stored fit, ready to predict."""
    key = SeriesKey(row.app, row.kernel, row.metric, row.system)
    fixed = {str(k): float(v) for k, v in row.fixed.items()}
    return Fit(key, row.requested_type, EmpiricalModel.from_dict(row.model), fixed)


def coupling_stored(
    session: Session,
    app: str,
    kernels: Sequence[str],
    metric: str = DEFAULT_METRIC,
    system: str | None = None,
    where: Mapping[str, float] | None = None,
    tolerance: float | None = None,
) -> CouplingReport:
    """Couplings of the loop ``kernels`` from the stored runs of ``app`` (one system)."""
    check_kernels(kernels)
    records = load_runs(session, app, sorted(run_kernels(kernels)), metric, system)
    systems = sorted({r.system or "-" for r in records})
    if len(systems) > 1:
        raise CouplingError(
            f"the runs come from {len(systems)} systems ({', '.join(systems)}): couplings "
            "belong to one; name it",
            name="system",
        )
    return coupling_from_runs(
        records, kernels, where, TOLERANCE if tolerance is None else tolerance
    )
