"""Kernel coupling from recorded runs: which runs are a kernel alone and which a pair.

Naming (docs/runs.md): a run of kernel ``A`` alone has kernel ``"A"``; a run of ``A`` and
``B`` together (the pair's loop body, ``A`` then ``B``) has kernel ``"A+B"`` (either order
counts).  Runs are grouped by *input*, their parameter values: at each input that has every
kernel alone and every adjacent pair of the loop, :func:`~.coupling.loop_coupling` gives the
couplings and coefficients (from the mean of the runs' repetitions); across two inputs or
more, :func:`~.coupling.coupling_stability` says whether they may be reused elsewhere
(isocoupling).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats

from ppe.core import EmpiricalSource

from .coupling import LoopCoupling, Stability, coupling_stability, loop_coupling, loop_pairs
from .errors import CouplingError
from .runs import RunRecord

PAIR_SEPARATOR = "+"
#: Default relative spread of a coupling across inputs under which it is reused.
TOLERANCE = 0.1

Point = tuple[tuple[str, float], ...]


def pair_kernel(a: str, b: str) -> str:
    """The kernel name of a run of ``a`` and ``b`` together."""
    return f"{a}{PAIR_SEPARATOR}{b}"


@dataclass(frozen=True)
class InputCoupling:
    """The loop's couplings at one input."""

    point: dict[str, float]
    loop: LoopCoupling


@dataclass(frozen=True)
class CouplingReport:
    """Couplings per input, the inputs that lacked runs (and why), and their stability."""

    kernels: tuple[str, ...]
    inputs: tuple[InputCoupling, ...]
    skipped: tuple[tuple[dict[str, float], str], ...]
    stability: Stability | None
    tolerance: float

    def to_dict(self) -> dict[str, Any]:
        pairs = list(self.inputs[0].loop.couplings)
        per_pair = {p: [i.loop.couplings[p] for i in self.inputs] for p in pairs}
        mean_coef = {
            k: statistics.fmean(i.loop.coefficients[k] for i in self.inputs) for k in self.kernels
        }
        stab = self.stability
        return {
            "kernels": list(self.kernels),
            "couplings": [
                {
                    "pair": list(p),
                    "kernel": pair_kernel(*p),
                    "value": statistics.fmean(v),
                    "range": [min(v), max(v)],
                    "spread": None if stab is None else stab.spread[p],
                }
                for p, v in per_pair.items()
            ],
            "coefficients": mean_coef,
            "isocoupling": {
                "stable": None if stab is None else stab.stable,
                "tolerance": self.tolerance,
                "unstable": [] if stab is None else [list(p) for p in stab.unstable],
                "message": (
                    "couplings measured at one input only: measure the kernels and pairs at a "
                    "second input to know whether they may be reused at others"
                    if stab is None
                    else stab.message()
                ),
            },
            "inputs": [
                {
                    "point": i.point,
                    "couplings": [
                        {"pair": list(p), "value": c, "time": i.loop.pair_times[p]}
                        for p, c in i.loop.couplings.items()
                    ],
                    "coefficients": dict(i.loop.coefficients),
                }
                for i in self.inputs
            ],
            "skipped": [{"point": point, "reason": why} for point, why in self.skipped],
        }


@dataclass(frozen=True)
class CoupledPrediction:
    """``T = sum_k alpha_k P_k`` at one input: the loop's time from its kernels' models."""

    point: dict[str, float]
    mean: float
    std: float
    interval: tuple[float, float]
    confidence: float
    #: each kernel's predicted time alone, and its coefficient
    kernels: dict[str, float]
    coefficients: dict[str, float]
    #: the couplings were measured at this input (its own coefficients), else reused
    measured: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point,
            "mean": self.mean,
            "std": self.std,
            "interval": list(self.interval),
            "confidence": self.confidence,
            "kernels": self.kernels,
            "coefficients": self.coefficients,
            "measured": self.measured,
        }


def predict_coupled(
    report: CouplingReport,
    models: Mapping[str, EmpiricalSource],
    point: Mapping[str, float],
    confidence: float = 0.95,
) -> CoupledPrediction:
    """The loop's time at ``point`` from each kernel's model of its time alone (isocoupling).

    At an input the couplings were measured at, that input's coefficients apply; elsewhere
    their mean over the inputs, and their spread across the inputs widens the interval (the
    couplings' uncertainty beside the kernel models'). The kernel models' predictions are
    independent (separate fits): variances add."""
    wanted = {k: float(v) for k, v in point.items()}
    own = next((i for i in report.inputs if i.point == wanted), None)
    alphas = (
        own.loop.coefficients
        if own is not None
        else {
            k: statistics.fmean(i.loop.coefficients[k] for i in report.inputs)
            for k in report.kernels
        }
    )
    mean, var, alone = 0.0, 0.0, {}
    for k in report.kernels:
        if k not in models:
            raise CouplingError(f"no model of kernel {k!r} alone", name=k)
        value = models[k].to_stochastic(wanted)
        mu, sd = float(value.mean()), float(value.std())
        alone[k] = mu
        mean += alphas[k] * mu
        var += (alphas[k] * sd) ** 2
        if own is None and len(report.inputs) > 1:
            spread = statistics.stdev(i.loop.coefficients[k] for i in report.inputs)
            var += (spread * mu) ** 2
    std = var**0.5
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    return CoupledPrediction(
        wanted,
        mean,
        std,
        (mean - z * std, mean + z * std),
        confidence,
        alone,
        dict(alphas),
        own is not None,
    )


def check_kernels(kernels: Sequence[str]) -> None:
    """A loop of at least two distinct kernels whose names do not contain the separator."""
    for k in kernels:
        if not k or PAIR_SEPARATOR in k:
            raise CouplingError(
                f"kernel {k!r}: a kernel of a loop is named without {PAIR_SEPARATOR!r} "
                f"(runs of a pair are named {pair_kernel('A', 'B')!r})",
                name="kernels",
            )
    loop_pairs(kernels)


def coupling_from_runs(
    records: Sequence[RunRecord],
    kernels: Sequence[str],
    where: Mapping[str, float] | None = None,
    tolerance: float = TOLERANCE,
) -> CouplingReport:
    """Couplings of the loop ``kernels`` from completed runs (of one application, metric and
    system), at every input whose parameters include ``where``."""
    check_kernels(kernels)
    if not 0.0 < tolerance < 1.0:
        raise CouplingError(f"tolerance must be in (0, 1), got {tolerance!r}", name="tolerance")
    names = run_kernels(kernels)
    grouped: dict[Point, dict[str, list[float]]] = {}
    for r in records:
        if r.status != "completed" or r.kernel not in names:
            continue
        if where and any(r.params.get(k) != float(v) for k, v in where.items()):
            continue
        point = tuple(sorted((k, float(v)) for k, v in r.params.items()))
        grouped.setdefault(point, {}).setdefault(r.kernel, []).extend(r.values)
    _require_runs(kernels, grouped)
    inputs, skipped = [], []
    for point, runs in sorted(grouped.items()):
        alone = {k: statistics.fmean(runs[k]) for k in kernels if k in runs}
        pairs = {
            (a, b): statistics.fmean(runs[pair_kernel(a, b)])
            for a in kernels
            for b in kernels
            if pair_kernel(a, b) in runs
        }
        try:
            inputs.append(InputCoupling(dict(point), loop_coupling(kernels, alone, pairs)))
        except CouplingError as exc:
            skipped.append((dict(point), exc.message))
    if not inputs:
        reasons = "; ".join(f"at {_text(p)}: {why}" for p, why in skipped[:5])
        raise CouplingError(
            f"no input has every kernel alone and every pair of the loop ({reasons})",
            name="kernels",
        )
    stability = (
        coupling_stability({_text(i.point): i.loop for i in inputs}, tolerance)
        if len(inputs) > 1
        else None
    )
    return CouplingReport(tuple(kernels), tuple(inputs), tuple(skipped), stability, tolerance)


def run_kernels(kernels: Sequence[str]) -> set[str]:
    """The kernel names of the runs a loop's coupling reads: each kernel, each ordered pair."""
    return {*kernels, *(pair_kernel(a, b) for a in kernels for b in kernels if a != b)}


def _require_runs(kernels: Sequence[str], grouped: Mapping[Point, Mapping[str, Any]]) -> None:
    """Name the first kernel never run alone, or the first pair never run, at any input."""
    seen = {k for runs in grouped.values() for k in runs}
    for k in kernels:
        if k not in seen:
            raise CouplingError(f"kernel {k!r} was never run alone (kernel {k!r})", name=k)
    for a, b in loop_pairs(kernels):
        if pair_kernel(a, b) not in seen and pair_kernel(b, a) not in seen:
            raise CouplingError(
                f"kernels {a!r} and {b!r} were never run as a pair "
                f"(runs of kernel {pair_kernel(a, b)!r})",
                name=pair_kernel(a, b),
            )


def _text(point: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in point.items()) or "no parameters"
