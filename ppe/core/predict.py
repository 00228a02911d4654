"""Interval predictions from structural models: the calls the service, the
scheduler glue and the replay make.

* :func:`predict` - per-host and overall predicted time for an allocation;
* :func:`linear_host_models` - each host's ``(a, b)`` with ``time = a*rows + b``
  (whole run), which the scheduler balances;
* :func:`iterate_horizon` - the predicted run length sets the forecast horizon,
  iterated until it settles;
* :func:`builtin_models`, :func:`get_model`, :func:`compile_model`,
  :func:`validate_model` - the model registry.

Engines: ``"analytic"`` (normal approximations, see :mod:`ppe.core.analytic`),
``"mc"`` (Monte Carlo with ``samples`` draws from ``seed``), or ``"auto"``:
analytic when every input is a point or a normal and no step's approximation is
poor, otherwise the whole prediction is redone under Monte Carlo and
``Prediction.note`` says why.  One engine per prediction keeps the per-host
times and the makespan mutually consistent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from . import lanes
from .analytic import HandOver, Lin
from .errors import EvaluationError, ParameterError
from .evaluate import Evaluator, InputBanks, bind_params, check_requires
from .grammar import CompiledModel, compile_model, validate_model
from .montecarlo import DEFAULT_SAMPLES, DEFAULT_SEED, Smp, Space
from .stochastic import ENGINES, Stochastic, as_stochastic, from_lanes

FloatArray = npt.NDArray[np.float64]
T = TypeVar("T")

__all__ = [
    "HostInputs",
    "Prediction",
    "HorizonResult",
    "predict",
    "linear_host_models",
    "iterate_horizon",
    "builtin_models",
    "get_model",
    "compile_model",
    "validate_model",
]


# ----------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class HostInputs:
    """One host of the chain (chain order = list order).

    ``benchmark``: dedicated seconds per element update; ``cpu``: available CPU
    fraction (horizon-averaged forecast); ``bw_next``/``bw_prev``: bandwidth in
    bytes/s to the next/previous host in the chain (``None`` at the ends);
    ``latency``: seconds per message sent by this host.  Stochastic inputs may be
    core values, numbers or scipy frozen normals.
    """

    name: str
    benchmark: float
    cpu: Any
    bw_next: Any | None = None
    bw_prev: Any | None = None
    latency: float = 0.0


@dataclass(frozen=True)
class Prediction:
    """Predicted times: ``makespan`` and one value per host (list order)."""

    makespan: Stochastic
    per_host: list[Stochastic]
    engine: str  # "analytic" | "mc"
    samples: int | None  # Monte Carlo sample count (None for analytic)
    seed: int | None
    hosts: list[str] = field(default_factory=list)
    note: str | None = None  # why "auto" used Monte Carlo

    def to_dict(self, confidence: float = 0.95) -> dict[str, Any]:
        return {
            "makespan": self.makespan.to_dict(confidence),
            "hosts": [
                {"host": h, "time": t.to_dict(confidence)}
                for h, t in zip(self.hosts, self.per_host, strict=True)
            ],
            "engine": self.engine,
            "samples": self.samples,
            "seed": self.seed,
            "note": self.note,
        }


# --------------------------------------------------------------------- registry


@lru_cache(maxsize=1)
def builtin_models() -> dict[str, str]:
    """Built-in model texts by name (``sor``, ``jacobi2d``)."""
    folder = resources.files("ppe.core").joinpath("models")
    out = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".ppg"):
            out[entry.name[: -len(".ppg")]] = entry.read_text(encoding="utf-8")
    return out


def get_model(model: str | CompiledModel) -> CompiledModel:
    """A compiled model from a built-in name, grammar text or a compiled model."""
    if isinstance(model, CompiledModel):
        return model
    if not isinstance(model, str):
        raise ParameterError("model must be a built-in name or model text", name="model")
    texts = builtin_models()
    if model in texts:
        return compile_model(texts[model])
    if "=" not in model:
        raise ParameterError(
            f"unknown model {model!r}; built-in models: {', '.join(texts)}", name="model"
        )
    return compile_model(model)


# ------------------------------------------------------------------- validation


def _check_engine(engine: str, samples: int, seed: int) -> None:
    if engine not in ENGINES:
        raise ParameterError(f"unknown engine {engine!r}; expected one of {ENGINES}", name="engine")
    if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 100:
        raise ParameterError("samples must be an integer >= 100", name="samples")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ParameterError("seed must be a non-negative integer", name="seed")


#: Largest hosts x samples a Monte Carlo prediction may use (memory: each
#: intermediate is 8 bytes per cell).
MAX_HOST_SAMPLES = 10_000_000


def _check_size(hosts: int, samples: int) -> None:
    if hosts * int(samples) > MAX_HOST_SAMPLES:
        raise ParameterError(
            f"{hosts} hosts x {samples} samples is too large "
            f"(at most {MAX_HOST_SAMPLES:,} for Monte Carlo)",
            name="samples",
        )


def _stoch(value: Any, label: str, positive: bool) -> Stochastic:
    try:
        v = as_stochastic(value)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{label}: {exc}", name=label) from exc
    if positive and not v.mean() > 0:
        raise ParameterError(f"{label} must have a positive mean, got {v.mean():g}", name=label)
    return v


def _finite(value: Any, label: str, low: float, strict: bool) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{label} must be a number, got {value!r}", name=label) from exc
    if isinstance(value, bool) or not math.isfinite(v) or v < low or (strict and v == low):
        cmp = ">" if strict else ">="
        raise ParameterError(
            f"{label} must be a finite number {cmp} {low:g}, got {value!r}", name=label
        )
    return v


def _rows(allocation: Sequence[Any], hosts: int) -> FloatArray:
    if len(allocation) != hosts:
        raise ParameterError(
            f"allocation has {len(allocation)} entries for {hosts} hosts", name="allocation"
        )
    out = np.empty(hosts)
    for k, r in enumerate(allocation):
        v = _finite(r, f"allocation[{k}]", 0.0, False)
        if v != round(v):
            raise ParameterError(
                f"allocation[{k}] must be a whole number of rows", name=f"allocation[{k}]"
            )
        out[k] = v
    return out


def _banks(hosts: Sequence[HostInputs], mode: str, strict: bool, space: Space | None) -> InputBanks:
    if not hosts:
        raise ParameterError("at least one host is needed", name="hosts")
    names, bench, lat, cpu = [], [], [], []
    links: list[Stochastic | None] = []
    for k, h in enumerate(hosts):
        label = f"hosts[{k}]"
        if not isinstance(h, HostInputs):
            raise ParameterError(f"{label} must be a HostInputs", name=label)
        names.append(h.name)
        bench.append(_finite(h.benchmark, f"{label}.benchmark", 0.0, True))
        lat.append(_finite(h.latency, f"{label}.latency", 0.0, False))
        cpu.append(_stoch(h.cpu, f"{label}.cpu", True))
        for side, val in (("bw_next", h.bw_next), ("bw_prev", h.bw_prev)):
            links.append(None if val is None else _stoch(val, f"{label}.{side}", True))
    if len(set(names)) != len(names):
        raise ParameterError("host names must be unique", name="hosts")
    return InputBanks(names, np.array(bench), np.array(lat), cpu, links, mode, strict, space)


def _all_analytic(banks: InputBanks) -> bool:
    return all(v.analytic for v in banks.cpu) and all(
        v.analytic for v in banks.links if v is not None
    )


# -------------------------------------------------------------------- prediction


def _run(
    model: CompiledModel,
    values: Mapping[str, float],
    banks: InputBanks,
    rows_list: Sequence[FloatArray],
    what: str,
) -> list[tuple[lanes.Value, lanes.Value | None]]:
    out = []
    for rows in rows_list:
        ev = Evaluator(model, values, banks, rows)
        per_host = ev.component("HostTime", [np.arange(banks.P, dtype=np.float64)], banks.P)
        total = ev.component("ExecTime", [], 1) if what == "predict" else None
        out.append((per_host, total))
    return out


def _with_engine(
    model: CompiledModel,
    values: Mapping[str, float],
    hosts: Sequence[HostInputs],
    rows_list: Sequence[FloatArray],
    engine: str,
    samples: int,
    seed: int,
    what: str,
) -> tuple[list[tuple[lanes.Value, lanes.Value | None]], InputBanks, str | None]:
    note = None
    if engine != "mc":
        banks = _banks(hosts, "analytic", engine == "auto", None)
        if engine == "analytic" and not _all_analytic(banks):
            raise ParameterError(
                "the analytic engine needs point or normal inputs; use engine 'auto' or 'mc'",
                name="engine",
            )
        if _all_analytic(banks):
            try:
                result = _run(model, values, banks, rows_list, what)
            except HandOver as exc:
                note = f"Monte Carlo because {exc.reason}"
            else:
                _check_finite(result)
                return result, banks, None
        else:
            note = "Monte Carlo because an input is a mixture or samples"
    _check_size(len(hosts), samples)
    banks = _banks(hosts, "mc", False, Space(samples, seed))
    result = _run(model, values, banks, rows_list, what)
    _check_finite(result)
    return result, banks, note


def _check_finite(result: list[tuple[lanes.Value, lanes.Value | None]]) -> None:
    for pair in result:
        for name, v in zip(("HostTime", "ExecTime"), pair, strict=True):
            if v is None:
                continue
            if isinstance(v, Smp):
                arrays = [v.x]
            elif isinstance(v, Lin):
                arrays = [v.mu, v.A]
            else:
                arrays = [np.asarray(v)]
            if not all(np.all(np.isfinite(a)) for a in arrays):
                raise EvaluationError(
                    "the model gives non-finite times for these inputs (overflow or 0/0)",
                    name=name,
                )


def predict(
    model: str | CompiledModel,
    params: Mapping[str, Any],
    hosts: Sequence[HostInputs],
    allocation: Sequence[int],
    engine: str = "auto",
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
) -> Prediction:
    """Predicted time of each host and of the run (``ExecTime``) for ``allocation``
    (rows per host, in ``hosts`` order).

    Raises :class:`~ppe.core.errors.ParameterError` for bad parameters, hosts or
    allocation, :class:`~ppe.core.errors.GrammarError` for bad model text and
    :class:`~ppe.core.errors.EvaluationError` when the model cannot be evaluated
    with these inputs; all carry ``to_dict()`` for a 422 body.
    """
    compiled = get_model(model)
    _check_engine(engine, samples, seed)
    values = bind_params(compiled, params)
    check_requires(compiled, values, len(hosts))
    rows = _rows(allocation, len(hosts))
    result, banks, note = _with_engine(
        compiled, values, hosts, [rows], engine, int(samples), int(seed), "predict"
    )
    per_host_v, total_v = result[0]
    assert total_v is not None
    per_host = from_lanes(per_host_v)
    makespan = from_lanes(total_v)[0]
    if banks.space is not None:
        banks.space.release()
        return Prediction(
            makespan, per_host, "mc", banks.space.n, banks.space.seed, banks.names, note
        )
    return Prediction(makespan, per_host, "analytic", None, None, banks.names, None)


#: Rows used to measure the slope of HostTime (any positive count works for an
#: affine model; a large one keeps round-off small relative to b).
_PROBE_ROWS = 1000.0


def linear_host_models(
    model: str | CompiledModel,
    params: Mapping[str, Any],
    hosts: Sequence[HostInputs],
    engine: str = "auto",
    samples: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[tuple[Stochastic, Stochastic]]:
    """Each host's ``(a, b)`` with ``HostTime[p] = a * rows[p] + b`` for the whole run.

    ``b`` is HostTime with no rows (communication and latency); ``a`` is the
    exact difference quotient between ``_PROBE_ROWS`` rows and none, evaluated
    on the same inputs (so, e.g., ``a = I*n*Benchmark/FracAvailCPU`` for SOR
    keeps its own distribution).  HostTime[p] must depend on rows[p] only and be
    affine in it; the mean at twice the probe is checked.  Under Monte Carlo,
    ``a`` and ``b`` are aligned samples; a consumer drawing them separately
    treats them as independent (true for SOR/Jacobi2D: a depends on the CPU, b on
    the links).
    """
    compiled = get_model(model)
    _check_engine(engine, samples, seed)
    values = bind_params(compiled, params)
    check_requires(compiled, values, len(hosts))
    P = len(hosts)
    probes = [np.zeros(P), np.full(P, _PROBE_ROWS), np.full(P, 2 * _PROBE_ROWS)]
    result, banks, _ = _with_engine(
        compiled, values, hosts, probes, engine, int(samples), int(seed), "linear"
    )
    t0, t1, t2 = (r[0] for r in result)
    ctx = lanes.LaneCtx(strict=False, space=banks.space)
    slope = lanes.binary("/", lanes.binary("-", t1, t0, ctx), np.full(P, _PROBE_ROWS), ctx)
    out = []
    for a, b, far, name in zip(
        from_lanes(slope), from_lanes(t0), from_lanes(t2), banks.names, strict=True
    ):
        expected = b.mean() + 2 * _PROBE_ROWS * a.mean()
        got = far.mean()
        if not math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-12 * max(abs(got), 1.0)):
            raise ParameterError(
                f"HostTime of host {name!r} is not linear in its rows "
                f"({got:g} != {expected:g}); the scheduler needs time = a*rows + b",
                name="HostTime",
            )
        out.append((a, b))
    if banks.space is not None:
        banks.space.release()
    return out


# ---------------------------------------------------------------------- horizon


@dataclass(frozen=True)
class HorizonResult(Generic[T]):
    """Outcome of :func:`iterate_horizon`: the last prediction, the inputs and
    horizon it was made with (``None``: the forecaster's default), how many
    predictions were made, whether it settled, and the horizons tried."""

    prediction: Prediction
    inputs: T
    horizon_s: float | None
    iterations: int
    converged: bool
    history: tuple[float | None, ...]


def iterate_horizon(
    predict_fn: Callable[[T], Prediction],
    forecasts_for: Callable[[float | None], T],
    start_horizon: float | None = None,
    tol: float = 0.05,
    max_iter: int = 8,
) -> HorizonResult[T]:
    """Fixed point of horizon -> forecasts -> prediction -> horizon.

    The availability that matters for a run is its average over the run, so the
    forecasts should be for a horizon equal to the run length - which is what is
    being predicted.  Start from ``start_horizon`` (``None``: the forecaster's
    default, e.g. one step), predict, take the predicted *mean* makespan as the
    next horizon, and repeat until the makespan differs from the horizon it was
    predicted with by less than ``tol`` (relative), or ``max_iter`` predictions
    were made.  Longer horizons average more, so the forecast spread shrinks
    while the mean moves little, and this usually settles in 2-3 rounds.
    """
    if not tol > 0 or max_iter < 1:
        raise ValueError("tol must be > 0 and max_iter >= 1")
    horizon = start_horizon
    history: list[float | None] = []
    for k in range(1, max_iter + 1):
        inputs = forecasts_for(horizon)
        pred = predict_fn(inputs)
        history.append(horizon)
        length = float(pred.makespan.mean())
        if not (math.isfinite(length) and length > 0):
            raise ValueError(f"predicted makespan must be positive and finite, got {length!r}")
        if horizon is not None and abs(length - horizon) <= tol * horizon:
            return HorizonResult(pred, inputs, horizon, k, True, tuple(history))
        if k == max_iter:
            return HorizonResult(pred, inputs, horizon, k, False, tuple(history))
        horizon = length
    raise AssertionError("unreachable")
