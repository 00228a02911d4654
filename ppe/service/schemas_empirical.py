"""Schemas of empirical models over the run store (``/api/v1/models/empirical``) and of kernel
coupling (``/api/v1/coupling``).  The answers are :meth:`ppe.empirical.report.Fit.report` and
:meth:`ppe.empirical.coupling_runs.CouplingReport.to_dict`, typed here for the contract."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ppe.empirical.coupling_runs import TOLERANCE
from ppe.empirical.runs import DEFAULT_KERNEL, DEFAULT_METRIC
from ppe.service.schemas import ModelName, ParamName, Params
from ppe.service.schemas_runs import KernelName, MetricName, SystemName

#: ``ppe.empirical.report.FIT_TYPES``, spelt out for the schema (a test keeps them equal).
FitType = Literal[
    "search",
    "linear",
    "quadratic",
    "cubic",
    "poly4",
    "poly5",
    "poly6",
    "inverse_linear",
    "inverse_quadratic",
    "inverse_cubic",
    "inverse_poly4",
    "inverse_poly5",
    "inverse_poly6",
    "unknown",
]
#: Prediction points per fit.
MAX_PREDICT = 100
#: Kernels of one coupling loop.
MAX_LOOP = 64


#: Runs ``suggest`` may plan at once (each is a small linear-algebra search over candidates).
MAX_SUGGEST = 20


class EmpiricalFitIn(BaseModel):
    """Which stored runs to fit (one series: app, kernel, metric, system) and how."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "app": "numpy",
                    "kernel": "matmul",
                    "type": "search",
                    "predict": [{"n": 4096}],
                    "save_as": "matmul-time",
                }
            ]
        },
    )
    app: ModelName
    kernel: KernelName = DEFAULT_KERNEL
    metric: MetricName = DEFAULT_METRIC
    system: SystemName | None = Field(
        default=None, description="the runs' system; null: any, if the runs name only one"
    )
    type: FitType = Field(
        default="search",
        description="search (normal form, cross-validated), one of Prophecy's 12 graph types, "
        "or unknown (Prophecy's least residual norm)",
    )
    x: ParamName | None = Field(
        default=None,
        description="fit over this parameter alone (the others must be held fixed); "
        "default: every parameter that varies (Prophecy's types: the one that varies)",
    )
    predict: Annotated[list[Params], Field(max_length=MAX_PREDICT)] = Field(
        default_factory=list,
        description=f"points to predict at, e.g. {{'n': 1200, 'p': 8}}; at most {MAX_PREDICT}",
    )
    save_as: ModelName | None = Field(
        default=None, description="store the fitted model under this (unused) name"
    )
    suggest: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SUGGEST,
        description="the budget of runs to measure next: the points that most narrow the "
        "intervals at the `predict` points (which are then required)",
    )
    by_cost: bool = Field(
        default=False,
        description="with suggest: rank runs by narrowing per unit of predicted time, not per run",
    )


class CoefficientOut(BaseModel):
    term: str = Field(description="'1' for the constant, else e.g. 'n^2 * log2(n)'")
    value: float


class PredictionSpreadOut(BaseModel):
    interval: list[float] = Field(
        description="[low, high]: the calibrated central `confidence` interval of a new run"
    )
    std: float = Field(description="std of the normal `empirical(...)` reads at this point")


class PredictionOut(BaseModel):
    point: dict[str, float] = Field(description="every parameter, the fixed ones included")
    mean: float
    std: float | None = Field(description="std of a new run; null without degrees of freedom")
    interval: list[float] | None = Field(
        description="[low, high]: the central `confidence` interval of a new run"
    )
    confidence: float
    extrapolated: bool = Field(description="outside the measured range of some parameter")
    spread: PredictionSpreadOut | None = Field(
        default=None, description="from the calibrated spread model, when the fit has one"
    )


class SpreadOut(BaseModel):
    """The model of a run's spread that ``empirical(...)`` reads, when the runs have
    repetitions at 3 points or more (else ``used`` is false and ``reason`` says why)."""

    used: bool
    model: str | None = Field(description="the std of a run, e.g. '1e-06 + 3e-12 * n^2'")
    reason: str | None = Field(default=None, description="why there is no spread model")
    type: str | None = None
    params: list[str] | None = None
    ranges: dict[str, list[float]] | None = None
    misfit: float | None = Field(
        default=None,
        description="the mean model's relative misfit beyond the means' noise, in the scale",
    )
    coverage: dict[str, float] | None = Field(
        default=None,
        description="share of left-out runs inside the calibrated central intervals "
        "(keys: confidence), nested leave-one-point-out",
    )
    width: dict[str, float | None] | None = Field(
        default=None, description="their mean width relative to the measured mean"
    )
    scale: float | None = Field(
        default=None, description="calibrated 95 % multiplier over the normal's 1.96"
    )
    calibration: dict[str, Any] | None = Field(
        default=None, description="the sorted leave-one-point-out scores and the coverage"
    )


class EmpiricalFitOut(BaseModel):
    """A fitted model: formula, type, cross-validated error, coefficients, predictions."""

    model: str = Field(description="the formula, e.g. '0.5 + 1.2e-09 * n^3'")
    type: str = Field(description="the fitted type (unknown picks a graph type)")
    requested_type: FitType
    cv_error: float | None = Field(
        description="mean leave-one-point-out error relative to the measured mean"
    )
    app: str
    kernel: str
    metric: str
    system: str | None
    params: list[str] = Field(description="the parameters the model varies")
    fixed: dict[str, float] = Field(description="parameters every run held at one value")
    ranges: dict[str, list[float]] = Field(description="measured [min, max] per parameter")
    coefficients: list[CoefficientOut]
    residual_norm: float
    noise: Literal["relative", "absolute"]
    sigma: float = Field(description="run noise: coefficient of variation (relative) or std")
    dof: int
    n_points: int
    n_obs: int
    spread: SpreadOut
    predictions: list[PredictionOut]


class EmpiricalFitted(EmpiricalFitOut):
    saved_as: str | None = Field(default=None, description="the name it was stored under")
    suggested: list[dict[str, float]] | None = Field(
        default=None,
        description="with `suggest`: the runs to measure next, best first, every parameter named",
    )
    suggested_per: Literal["run", "time"] | None = Field(
        default=None, description="what the suggestion ranked by: narrowing per run or per second"
    )


class StoredEmpiricalSummary(BaseModel):
    name: str
    app: str
    kernel: str
    metric: str
    system: str | None
    type: str
    requested_type: str
    model: str
    cv_error: float | None
    n_points: int
    fitted_at: float = Field(description="unix seconds")


class StoredEmpiricalOut(EmpiricalFitOut):
    """A stored model; ``predictions`` holds the prediction at the query's point, if any."""

    name: str
    fitted_at: float = Field(description="unix seconds")
    definition: dict[str, Any] = Field(description="the model as stored (EmpiricalModel JSON)")


# ---------------------------------------------------------------------------- coupling


class CouplingIn(BaseModel):
    """A loop of kernels; runs of kernel 'A' are A alone, of kernel 'A+B' the pair."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"app": "sor", "kernels": ["red", "black", "halo"]}]},
    )
    app: ModelName
    kernels: Annotated[list[KernelName], Field(min_length=2, max_length=MAX_LOOP)]
    metric: MetricName = DEFAULT_METRIC
    system: SystemName | None = None
    params: Params | None = Field(
        default=None, description="only runs with these parameter values (e.g. {'p': 2})"
    )
    tolerance: float = Field(
        default=TOLERANCE,
        gt=0,
        lt=1,
        allow_inf_nan=False,
        description="relative spread across inputs under which couplings are reusable",
    )
    predict: Annotated[list[Params], Field(max_length=MAX_PREDICT)] = Field(
        default_factory=list,
        description="inputs to predict the loop's time at: sum of coefficient x each kernel's "
        "model alone (isocoupling)",
    )
    save: bool = Field(
        default=False,
        description="keep the couplings for this app, metric, system and loop (replacing "
        "the loop's earlier ones); GET /api/v1/coupling lists them",
    )


class PairCouplingOut(BaseModel):
    pair: list[str]
    kernel: str = Field(description="the pair's run kernel name, 'A+B'")
    value: float = Field(description="C_AB = P_AB / (P_A + P_B), mean over the inputs")
    range: list[float]
    spread: float | None = Field(description="(max - min) / mean across inputs; null: one input")


class IsocouplingOut(BaseModel):
    stable: bool | None = Field(description="null when measured at one input only")
    tolerance: float
    unstable: list[list[str]]
    message: str


class InputPairOut(BaseModel):
    pair: list[str]
    value: float
    time: float = Field(description="P_AB: mean time of the pair's runs")


class InputCouplingOut(BaseModel):
    point: dict[str, float]
    couplings: list[InputPairOut]
    coefficients: dict[str, float]


class SkippedInputOut(BaseModel):
    point: dict[str, float]
    reason: str


class CouplingOut(BaseModel):
    app: str
    metric: str
    system: str | None
    kernels: list[str]
    couplings: list[PairCouplingOut]
    coefficients: dict[str, float] = Field(
        description="each kernel's coefficient (psi, zeta, kappa...), mean over the inputs"
    )
    isocoupling: IsocouplingOut
    inputs: list[InputCouplingOut]
    skipped: list[SkippedInputOut] = Field(description="inputs lacking a kernel or pair run")


class CoupledPredictionOut(BaseModel):
    point: dict[str, float]
    mean: float
    std: float
    interval: list[float]
    confidence: float
    kernels: dict[str, float] = Field(description="each kernel's predicted time alone")
    coefficients: dict[str, float] = Field(description="the coefficients applied")
    measured: bool = Field(
        description="true: couplings measured at this input; false: reused from the others"
    )


class CouplingAnswer(CouplingOut):
    predictions: list[CoupledPredictionOut]
    warnings: list[str]
    saved: int | None = Field(description="the stored couplings' id when `save` was asked")


class StoredCouplingOut(BaseModel):
    id: int
    app: str
    metric: str
    system: str | None
    kernels: list[str]
    coefficients: dict[str, float]
    stable: bool | None
    computed_at: float
    report: CouplingOut
