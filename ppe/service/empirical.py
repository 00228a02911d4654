"""Empirical models over the run store: fit a series of stored runs, save the fit by name,
read it back, and compute kernel couplings.

The routes (``ppe/service/api/empirical.py``) and ``ppe model fit --app`` both call
:func:`fit_stored`, and both answer :meth:`ppe.empirical.report.Fit.report`: one document.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ppe.empirical.coupling_runs import (
    TOLERANCE,
    CoupledPrediction,
    CouplingReport,
    check_kernels,
    coupling_from_runs,
    predict_coupled,
    run_kernels,
)
from ppe.empirical.errors import CouplingError, EmpiricalError
from ppe.empirical.report import (
    SEARCH,
    AmbiguousSeriesError,
    Fit,
    NoRunsError,
    SeriesKey,
    fit_from_stored,
    fit_series,
    select_series,
)
from ppe.empirical.runs import DEFAULT_KERNEL, DEFAULT_METRIC, RunRecord
from ppe.service.store.models import Run, StoredCoupling, StoredEmpiricalModel

#: Runs one fit or coupling reads at most: more is a series no one measured by hand.
MAX_FIT_RUNS = 50_000
#: Saved models named at most in one message.
MAX_NAMED = 10


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
        model=fit.stored(),
        n_points=fit.model.n_points,
    )
    session.add(row)
    session.flush()
    return row


def fit_of(row: StoredEmpiricalModel) -> Fit:
    """The stored fit, ready to predict."""
    key = SeriesKey(row.app, row.kernel, row.metric, row.system)
    fixed = {str(k): float(v) for k, v in row.fixed.items()}
    return fit_from_stored(key, row.requested_type, row.model, fixed)


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


def predict_coupling(
    session: Session,
    report: CouplingReport,
    app: str,
    metric: str,
    system: str | None,
    points: Sequence[Mapping[str, float]],
) -> list[CoupledPrediction]:
    """The loop's time at each of ``points`` from the couplings and each kernel's model of its
    time alone (the search's fit of its runs on the same system and metric)."""
    if not points:
        return []
    models = {k: fit_stored(session, FitSpec(app, k, metric, system)) for k in report.kernels}
    return [predict_coupled(report, models, p) for p in points]


LOOP_SEPARATOR = " > "


def save_coupling(
    session: Session, app: str, metric: str, system: str | None, answer: dict[str, Any]
) -> StoredCoupling:
    """Keep ``answer`` (a coupling report) as the loop's couplings on this system, replacing
    the loop's earlier ones (the caller commits)."""
    kernels = [str(k) for k in answer["kernels"]]
    loop = LOOP_SEPARATOR.join(kernels)
    old = session.execute(
        select(StoredCoupling).where(
            StoredCoupling.app == app,
            StoredCoupling.metric == metric,
            StoredCoupling.system_key == (system or ""),
            StoredCoupling.loop == loop,
        )
    ).scalar_one_or_none()
    if old is not None:
        session.delete(old)
        session.flush()
    iso = answer["isocoupling"]
    row = StoredCoupling(
        app=app,
        metric=metric,
        system=system,
        system_key=system or "",
        loop=loop,
        kernels=kernels,
        coefficients=dict(answer["coefficients"]),
        stable=iso["stable"],
        report=dict(answer),
    )
    session.add(row)
    session.flush()
    return row


def stored_couplings(
    session: Session, app: str | None = None, system: str | None = None
) -> list[StoredCoupling]:
    stmt = select(StoredCoupling).order_by(StoredCoupling.app, StoredCoupling.id)
    if app is not None:
        stmt = stmt.where(StoredCoupling.app == app)
    if system is not None:
        stmt = stmt.where(StoredCoupling.system_key == system)
    return list(session.execute(stmt).scalars())


def _spread_note(fit: Fit) -> str:
    """What a note says of a run's spread: the calibrated std model's and its coverage."""
    if fit.spread is None or fit.spread.calibration is None:
        return ""
    cov = fit.spread.calibration.coverage.get(0.95)
    stated = "" if cov is None else f" (95 % intervals covered {cov:.0%} of left-out runs)"
    return f"; a run's spread from the calibrated std model {fit.spread.std.formula}{stated}"


@dataclass(frozen=True)
class BoundFit:
    """A fit a performance model reads, with what names it (memo keys) and what it is (notes)."""

    fit: Fit
    tag: str
    note: str


class FitCache:
    """The fits ``empirical(...)`` calls read, re-fitted only when their runs change.

    A stored model is read by name (or as the newest saved for an application's kernel); an
    application's kernel with no saved model is fitted from its completed runs by the search,
    keyed by how many runs there are and the newest id, so a posted run is seen at once.
    """

    def __init__(self, size: int = 64) -> None:
        self._fits: LRUCache[tuple[object, ...], BoundFit] = LRUCache(size)
        self._lock = threading.Lock()

    def _cached(self, key: tuple[object, ...], make: Callable[[], BoundFit]) -> BoundFit:
        with self._lock:
            hit = self._fits.get(key)
        if hit is None:
            hit = make()
            with self._lock:
                self._fits[key] = hit
        return hit

    def named(self, session: Session, name: str) -> BoundFit:
        """The stored model ``name``."""
        m = StoredEmpiricalModel
        found = session.execute(select(m.id, m.fitted_at).where(m.name == name)).first()
        if found is None:
            raise NoRunsError(f"no stored empirical model is named {name!r}", name=name)
        return self._stored(session, found.id, found.fitted_at)

    def latest(self, session: Session, app: str, kernel: str) -> BoundFit:
        """The newest model saved for ``app``'s ``kernel`` (time), else a fit of its runs."""
        m = StoredEmpiricalModel
        # the keys only: a model's JSON is read once, when the cache does not hold it
        rows = session.execute(
            select(m.id, m.name, m.system, m.fitted_at)
            .where(m.app == app, m.kernel == kernel, m.metric == DEFAULT_METRIC)
            .order_by(m.fitted_at.desc(), m.id.desc())
        ).all()
        systems = sorted({r.system or "-" for r in rows})
        if len(systems) > 1:
            names = ", ".join(r.name for r in rows[:MAX_NAMED])
            raise AmbiguousSeriesError(
                f"{app}/{kernel} has saved models for {len(systems)} systems "
                f'({", ".join(systems)}); name one: empirical("<model>") with one of {names}',
                name="system",
            )
        if rows:
            return self._stored(session, rows[0].id, rows[0].fitted_at)
        count, newest = session.execute(
            select(func.count(Run.id), func.max(Run.id)).where(
                Run.app == app,
                Run.kernel == kernel,
                Run.metric == DEFAULT_METRIC,
                Run.status == "completed",
            )
        ).one()

        def fit() -> BoundFit:
            done = fit_stored(session, FitSpec(app, kernel))
            return BoundFit(
                done,
                f"runs:{app}/{kernel}:{count}:{newest}",
                f"{app}/{kernel} is the search's fit of {count} runs: {done.model.formula}"
                + _spread_note(done),
            )

        return self._cached(("runs", app, kernel, count, newest), fit)

    def _stored(self, session: Session, model_id: int, fitted_at: float) -> BoundFit:
        def read() -> BoundFit:
            row = session.get_one(StoredEmpiricalModel, model_id)
            done = fit_of(row)
            return BoundFit(
                done,
                f"model:{row.name}:{row.id}:{row.fitted_at!r}",
                f"{row.app}/{row.kernel} is the saved model {row.name!r}: {done.model.formula}"
                + _spread_note(done),
            )

        return self._cached(("model", model_id, fitted_at), read)
