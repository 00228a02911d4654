"""Interval predictions from structural models: the calls the service, the
scheduler glue and the replay make.

* :func:`predict` - per-host and overall predicted time for an allocation;
* :func:`linear_host_models` - each host's ``(a, b)`` with ``time = a*rows + b``
  (whole run), which the scheduler balances;
* :func:`builtin_models`, :func:`get_model`, :func:`compile_model`,
  :func:`validate_model` - the model registry.

Engines: ``"numeric"`` (exact distributions of separable models with
independent hosts, any input shape, see :mod:`ppe.core.numeric`),
``"analytic"`` (normal approximations that keep dependence between inputs, see
:mod:`ppe.core.analytic`), ``"mc"`` (Monte Carlo with ``samples`` draws from
``seed``), or ``"auto"``: numeric when the model's structure allows it, else
analytic when every input is a point or a normal and no step's approximation
is poor, else Monte Carlo; ``Prediction.note`` says why a later engine was
used.  One engine per prediction keeps the per-host times and the makespan
mutually consistent.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from . import lanes
from .analytic import HandOver, Lin
from .errors import EvaluationError, ParameterError
from .evaluate import Evaluator, InputBanks, bind_params, check_requires, empirical_values
from .grammar import CompiledModel, compile_model, validate_model
from .montecarlo import DEFAULT_SAMPLES, DEFAULT_SEED, Smp, Space
from .numeric import NumericLanes
from .profile_figures import PROFILE_PARAMETERS
from .stochastic import StochasticValue, as_stochastic, from_lanes

FloatArray = npt.NDArray[np.float64]
T = TypeVar("T")

__all__ = [
    "HostInputs",
    "Prediction",
    "predict",
    "linear_host_models",
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
    ``latency``: seconds per message sent by this host; ``system``: the host's
    machine-profile figures by name (``ppe.core.profile_figures.PROFILE_PARAMETERS``, e.g.
    ``flops_dense`` in flop/s), plain positive numbers a model reads as ``flops_dense[p]``;
    only those the model reads are needed.  Stochastic inputs may be core values, numbers
    or scipy frozen normals.
    """

    name: str
    benchmark: float
    cpu: Any
    bw_next: Any | None = None
    bw_prev: Any | None = None
    latency: float = 0.0
    system: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Prediction:
    """Predicted times: ``makespan`` and one value per host (list order)."""

    makespan: StochasticValue
    per_host: list[StochasticValue]
    engine: str  # "numeric" | "analytic" | "mc"
    samples: int | None  # Monte Carlo sample count (None for analytic)
    seed: int | None
    hosts: list[str] = field(default_factory=list)
    note: str | None = None  # why "auto" did not use the numeric engine

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


#: Engines a prediction can use ("auto": numeric, else analytic, else Monte Carlo).
ENGINES = ("auto", "numeric", "analytic", "mc")


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


def _stoch(value: Any, label: str | Callable[[], str], positive: bool) -> StochasticValue:
    if isinstance(value, StochasticValue):  # the common case: no conversion, cheap check
        v = value
    else:
        try:
            v = as_stochastic(value)
        except (TypeError, ValueError) as exc:
            name = label() if callable(label) else label
            raise ParameterError(f"{name}: {exc}", name=name) from exc
    if positive and not v.mean() > 0:
        name = label() if callable(label) else label
        raise ParameterError(f"{name} must have a positive mean, got {v.mean():g}", name=name)
    return v


def _finite(value: Any, label: str | Callable[[], str], low: float, strict: bool) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        name = label() if callable(label) else label
        raise ParameterError(f"{name} must be a number, got {value!r}", name=name) from exc
    if isinstance(value, bool) or not math.isfinite(v) or v < low or (strict and v == low):
        name = label() if callable(label) else label
        cmp = ">" if strict else ">="
        raise ParameterError(
            f"{name} must be a finite number {cmp} {low:g}, got {value!r}", name=name
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


@dataclass(frozen=True)
class _Checked:
    """Validated host inputs, ready to be laid out for any engine."""

    names: list[str]
    benchmark: FloatArray
    latency: FloatArray
    cpu: list[StochasticValue]
    links: list[StochasticValue | None]
    empirical: list[StochasticValue] = field(default_factory=list)
    sites: dict[int, int] = field(default_factory=dict)
    system: dict[str, FloatArray] = field(default_factory=dict)

    def banks(self, mode: str, strict: bool = False, space: Space | None = None) -> InputBanks:
        return InputBanks(
            self.names,
            self.benchmark,
            self.latency,
            self.cpu,
            self.links,
            mode,
            strict,
            space,
            self.empirical,
            self.sites,
            self.system,
        )

    def all_analytic(self) -> bool:
        inputs = [*self.cpu, *self.empirical, *(v for v in self.links if v is not None)]
        return all(v.analytic for v in inputs)


def _label(k: int, what: str) -> Callable[[], str]:
    """The field's name, built only when an error needs it."""
    return lambda: f"hosts[{k}].{what}"


def _check_hosts(hosts: Sequence[HostInputs]) -> _Checked:
    if not hosts:
        raise ParameterError("at least one host is needed", name="hosts")
    P = len(hosts)
    names: list[str] = []
    bench, lat = np.empty(P), np.empty(P)
    cpu: list[StochasticValue] = []
    links: list[StochasticValue | None] = []
    for k, h in enumerate(hosts):
        if not isinstance(h, HostInputs):
            raise ParameterError(f"hosts[{k}] must be a HostInputs", name=f"hosts[{k}]")
        names.append(h.name)
        bench[k] = _finite(h.benchmark, _label(k, "benchmark"), 0.0, True)
        lat[k] = _finite(h.latency, _label(k, "latency"), 0.0, False)
        cpu.append(_stoch(h.cpu, _label(k, "cpu"), True))
        nxt, prv = h.bw_next, h.bw_prev
        links.append(None if nxt is None else _stoch(nxt, _label(k, "bw_next"), True))
        links.append(None if prv is None else _stoch(prv, _label(k, "bw_prev"), True))
    if len(set(names)) != P:
        raise ParameterError("host names must be unique", name="hosts")
    return _Checked(names, bench, lat, cpu, links, system=_check_system(hosts))


def _check_system(hosts: Sequence[HostInputs]) -> dict[str, FloatArray]:
    """The hosts' machine-profile figures by name, one column per figure any host gives (NaN
    where a host gives none: an error only if the model reads it there); an unknown name, a
    number that is not finite and positive, is refused."""
    out: dict[str, FloatArray] = {}
    for k, h in enumerate(hosts):
        system = h.system
        if not isinstance(system, Mapping):
            raise ParameterError(
                f"hosts[{k}].system must map figure names to numbers", name=f"hosts[{k}].system"
            )
        for name, raw in system.items():
            if name not in PROFILE_PARAMETERS:
                close = difflib.get_close_matches(str(name), list(PROFILE_PARAMETERS), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ParameterError(
                    f"hosts[{k}].system: unknown machine-profile figure {name!r}{hint}",
                    name=f"hosts[{k}].system",
                )
            value = _finite(raw, _label(k, f"system.{name}"), 0.0, True)
            out.setdefault(name, np.full(len(hosts), np.nan))[k] = value
    return out


# -------------------------------------------------------------------- prediction

Results = list[tuple[lanes.Value, lanes.Value | None]]


@dataclass(frozen=True)
class _Outcome(Generic[T]):
    value: T
    engine: str
    space: Space | None
    note: str | None


def _run(
    model: CompiledModel,
    values: Mapping[str, float],
    banks: InputBanks,
    rows_list: Sequence[FloatArray],
    what: str,
) -> Results:
    out = []
    shared: dict[tuple[str, int, bytes], lanes.Value] = {}
    for rows in rows_list:
        ev = Evaluator(model, values, banks, rows, shared)
        per_host = ev.component("HostTime", [np.arange(banks.P, dtype=np.float64)], banks.P)
        total = ev.component("ExecTime", [], 1) if what == "predict" else None
        out.append((per_host, total))
    _check_finite(out)
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
    finish: Callable[[Results, InputBanks], T],
    empirical: tuple[list[StochasticValue], dict[int, int]] = ([], {}),
) -> _Outcome[T]:
    """Evaluate with the requested engine; ``"auto"`` tries numeric, then analytic
    (point/normal inputs only), then Monte Carlo, each taking over when the one
    before hands over.  ``finish`` turns lane results into public values and runs
    inside the attempt, so a hand-over while finishing also falls through."""
    checked = replace(_check_hosts(hosts), empirical=empirical[0], sites=empirical[1])
    reasons: list[str] = []
    if engine in ("auto", "numeric"):
        try:
            banks = checked.banks("numeric")
            return _Outcome(
                finish(_run(model, values, banks, rows_list, what), banks), "numeric", None, None
            )
        except HandOver as exc:
            if engine == "numeric":
                raise ParameterError(
                    f"the numeric engine cannot evaluate this: {exc.reason}; "
                    "use engine 'auto', 'analytic' or 'mc'",
                    name="engine",
                ) from exc
            reasons.append(f"numeric: {exc.reason}")
    if engine in ("auto", "analytic"):
        if not checked.all_analytic():
            if engine == "analytic":
                raise ParameterError(
                    "the analytic engine needs point or normal inputs; use engine 'auto' or 'mc'",
                    name="engine",
                )
            reasons.append("analytic: an input is a mixture or samples")
        else:
            try:
                banks = checked.banks("analytic", strict=engine == "auto")
                value = finish(_run(model, values, banks, rows_list, what), banks)
                note = f"analytic because {reasons[0]}" if reasons else None
                return _Outcome(value, "analytic", None, note)
            except HandOver as exc:
                reasons.append(f"analytic: {exc.reason}")
    _check_size(len(hosts), samples)
    space = Space(samples, seed)
    banks = checked.banks("mc", space=space)
    try:
        value = finish(_run(model, values, banks, rows_list, what), banks)
    finally:
        space.release()
    note = f"Monte Carlo because {'; '.join(reasons)}" if reasons else None
    return _Outcome(value, "mc", space, note)


def _check_finite(result: Results) -> None:
    for pair in result:
        for name, v in zip(("HostTime", "ExecTime"), pair, strict=True):
            if v is None:
                continue
            if isinstance(v, Smp):
                arrays = [v.x]
            elif isinstance(v, Lin):
                arrays = [v.mu, v.A]
            elif isinstance(v, NumericLanes):
                arrays = [v.c, v.L, v.R]
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
    emp = empirical_values(compiled, values, len(hosts))

    def finish(result: Results, banks: InputBanks) -> tuple[list[StochasticValue], StochasticValue]:
        per_host_v, total_v = result[0]
        assert total_v is not None
        return from_lanes(per_host_v), from_lanes(total_v)[0]

    out = _with_engine(
        compiled, values, hosts, [rows], engine, int(samples), int(seed), "predict", finish, emp
    )
    per_host, makespan = out.value
    names = [h.name for h in hosts]
    if out.space is not None:
        return Prediction(makespan, per_host, "mc", out.space.n, out.space.seed, names, out.note)
    return Prediction(makespan, per_host, out.engine, None, None, names, out.note)


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
) -> list[tuple[StochasticValue, StochasticValue]]:
    """Each host's ``(a, b)`` with ``HostTime[p] = a * rows[p] + b`` for the whole run.

    ``b`` is HostTime with no rows (communication and latency); ``a`` is the
    exact difference quotient between ``_PROBE_ROWS`` rows and none, evaluated
    on the same inputs (so, e.g., ``a = I*n*Benchmark/FracAvailCPU`` for SOR
    keeps its own distribution: exact, kind "numeric", under the numeric engine).
    HostTime[p] must depend on rows[p] only and be affine in it; the mean at
    twice the probe is checked.  ``a`` and ``b`` share the evaluation's inputs
    (aligned samples under Monte Carlo); a consumer drawing them separately
    treats them as independent (true for SOR/Jacobi2D: a depends on the CPU, b
    on the links).
    """
    compiled = get_model(model)
    _check_engine(engine, samples, seed)
    values = bind_params(compiled, params)
    check_requires(compiled, values, len(hosts))
    P = len(hosts)
    probes = [np.zeros(P), np.full(P, _PROBE_ROWS), np.full(P, 2 * _PROBE_ROWS)]
    emp = empirical_values(compiled, values, P)

    def finish(result: Results, banks: InputBanks) -> list[tuple[StochasticValue, StochasticValue]]:
        t0, t1, t2 = (r[0] for r in result)
        ctx = lanes.LaneCtx(strict=False, space=banks.space)
        slope = lanes.binary("/", lanes.binary("-", t1, t0, ctx), np.full(P, _PROBE_ROWS), ctx)
        _check_linear(lanes.means(slope), lanes.means(t0), lanes.means(t2), banks.names)
        return list(zip(from_lanes(slope), from_lanes(t0), strict=True))

    return _with_engine(
        compiled, values, hosts, probes, engine, int(samples), int(seed), "linear", finish, emp
    ).value


def _check_linear(a: FloatArray, b: FloatArray, far: FloatArray, names: Sequence[str]) -> None:
    """HostTime at twice the probe must be where the line through 0 and the probe says."""
    expected = b + 2 * _PROBE_ROWS * a
    tol = np.maximum(
        1e-6 * np.maximum(np.abs(far), np.abs(expected)), 1e-12 * np.maximum(np.abs(far), 1.0)
    )
    bad = np.flatnonzero(~(np.abs(far - expected) <= tol))
    if bad.size:
        k = int(bad[0])
        raise ParameterError(
            f"HostTime of host {names[k]!r} is not linear in its rows "
            f"({far[k]:g} != {expected[k]:g}); the scheduler needs time = a*rows + b",
            name="HostTime",
        )
