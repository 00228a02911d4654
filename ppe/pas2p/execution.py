"""Signature execution: which steps to run on the target, and the run predicted from their times.

A signature (``ppe pas2p analyze --json``) names each kept phase's weight and the *step* of a
typical occurrence (the one of median time): the anchor rank's compute burst it begins with
(-1: the set-up before the first burst). An application that can run any of its steps on its
own (ppe-sor's and ppe-cg's ``--signature``) runs the set-up once, then each kept phase's step
``repeats`` times (at most as often as the phase occurs), each time right after the step that
precedes it in the program, timing it from its burst to the next one as the phases were timed
in the trace. The runs go in rounds, every phase once per round in step order, so that a load
that comes and goes reaches every phase's sample. The full run is predicted as PAS2P does, by
the weighted sum of the phases' mean times on the target; the phases left out of the signature
are added at their traced time scaled by how much faster or slower the kept ones ran, and the
interval comes from the repetitions' spread (each phase's mean is uncertain by sd/sqrt(n), and
its ``weight`` occurrences each vary by sd): a Student-t interval with Welch–Satterthwaite
degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

__all__ = [
    "SETUP",
    "ExecutionPlan",
    "PhaseEstimate",
    "PlannedPhase",
    "Prediction",
    "SignatureFileError",
    "execution_plan",
    "predict",
]

SETUP = -1  # the step of the segment before the anchor rank's first compute burst


class SignatureFileError(ValueError):
    """A signature that cannot be executed; the message names the field."""


@dataclass(frozen=True)
class PlannedPhase:
    id: int
    step: int
    weight: int
    traced_mean_s: float
    traced_sd_s: float

    @property
    def traced_total_s(self) -> float:
        return self.weight * self.traced_mean_s


@dataclass(frozen=True)
class ExecutionPlan:
    phases: list[PlannedPhase]  # the kept phases in step order (the set-up first, if kept)
    traced_s: float
    left_out_s: float  # traced seconds of the phases not kept
    repeats: int
    warmup: int
    #: untimed rounds before the first timed one until their traced time reaches this: a
    #: process runs its first tens of milliseconds slow (ppe-sor n=1000: its first 60
    #: half-sweeps 5-17 % slower than the rest), and a short signature run would be all warm-up
    settle_s: float = 0.0
    #: >0: fewer warm-up steps than ``warmup`` (down to one) when theirs would take more than
    #: this share of the traced run (at the kept phases' mean step time)
    warmup_share: float = 0.0
    #: kept phases that are not run (they occur once): predicted from their traced time,
    #: scaled with the left-out ones (:func:`_worth_running`)
    scaled: tuple[int, ...] = ()

    def runs(self, phase: PlannedPhase) -> int:
        """Timed executions of ``phase``'s step: ``repeats``, but no more than keeps their cost,
        the ``warmup`` untimed steps before each included, within half the phase's share of
        the run (at least once), so that a rare, heavy phase (a checkpoint) or a rare light one
        behind long warm-ups costs at most half what it adds to the run; the set-up once.
        (Counting the timed steps alone, ppe-cg n=2000's residual check, 3 % of the run, cost
        2.5 % of it: three 20 ms checks behind two 11 ms warm-ups each.)"""
        if phase.step == SETUP:
            return 1
        per_run = phase.traced_mean_s + self.warmup * self.step_s
        share = phase.traced_total_s / (2 * per_run) if per_run > 0 else phase.weight / 2
        return max(1, min(self.repeats, math.floor(share)))

    @cached_property
    def steps(self) -> tuple[PlannedPhase, ...]:
        """The phases run as program steps: all but the set-up."""
        return tuple(p for p in self.phases if p.step != SETUP)

    @cached_property
    def step_s(self) -> float:
        """The traced mean time of one program step over the phases run (the set-up aside)."""
        occurrences = sum(p.weight for p in self.steps)
        total = math.fsum(p.traced_total_s for p in self.steps)
        return total / occurrences if occurrences else 0.0

    @cached_property
    def step_runs(self) -> dict[int, int]:
        """:meth:`runs` of every phase run as a step, by phase id."""
        return {p.id: self.runs(p) for p in self.steps}

    def entries(self) -> list[tuple[PlannedPhase, int, bool]]:
        """(phase, step, timed) in execution order: an untimed round, then rounds of every
        phase still to run, in step order, each timed step right after the steps that precede
        it in the program (untimed; :meth:`steps_before`), so it starts from the state its
        predecessors leave (the caches a matrix-vector product finds after an update, not
        after a checkpoint)."""
        runs = self.step_runs
        # a first, untimed round of the phases timed more than once: the first run after the
        # set-up meets cold caches and pages the program has not touched yet
        warm = [p for p in self.steps if runs[p.id] > 1]
        out: list[tuple[PlannedPhase, int, bool]] = [
            (p, p.step, False) for p in warm * self._warm_rounds(warm)
        ]
        before = self.steps_before()
        for r in range(max(runs.values(), default=0)):
            for p in self.steps:
                if r >= runs[p.id]:
                    continue
                out += [(p, k, False) for k in range(max(p.step - before, 0), p.step)]
                out.append((p, p.step, True))
        return out

    def steps_before(self) -> int:
        """Untimed program steps before each timed one: ``warmup``, or the most (at least one)
        whose traced time stays within ``warmup_share`` of the run. A long warm-up matters
        where a step's caches depend on several steps before it (ppe-cg at n = 1000) and costs
        most where steps are long (ppe-cg at n = 2000, DRAM-bound, where it does not matter)."""
        if self.warmup <= 1 or self.warmup_share <= 0 or not self.steps:
            return self.warmup
        budget = self.warmup_share * self.traced_s
        for w in range(self.warmup, 1, -1):
            steps = sum(self.step_runs[p.id] * min(w, p.step) for p in self.steps)
            if self.step_s * steps <= budget:
                return w
        return 1

    def _warm_rounds(self, warm: Sequence[PlannedPhase]) -> int:
        """Untimed rounds: one, or as many as reach ``settle_s`` of traced time, but never
        more untimed steps than the traced run had steps."""
        per_round = math.fsum(p.traced_mean_s for p in warm)
        if not warm or self.settle_s <= 0 or per_round <= 0:
            return 1
        cap = max(1, sum(p.weight for p in self.steps) // len(warm))
        return max(1, min(math.ceil(self.settle_s / per_round), cap))

    def schedule(self) -> list[tuple[int, int]]:
        """(phase id, step) in execution order, the set-up excluded (the application runs it
        anyway, before any step)."""
        return [(p.id, step) for p, step, _ in self.entries()]

    def timed(self) -> list[bool]:
        """Per ``schedule()`` entry: whether it is timed (not a warm-up)."""
        return [timed for _, _, timed in self.entries()]

    def measured(self, times: Sequence[float]) -> dict[int, list[float]]:
        """The step times (``schedule()``'s order) per phase, warm-ups dropped."""
        entries = self.entries()
        if len(times) != len(entries):
            raise ValueError(f"{len(times)} step times for a schedule of {len(entries)} steps")
        out: dict[int, list[float]] = {p.id: [] for p, _, _ in entries}
        for (p, _, timed), t in zip(entries, times, strict=True):
            if timed:
                out[p.id].append(t)
        return out


def execution_plan(
    analysis: Mapping[str, Any],
    repeats: int = 3,
    warmup: int = 1,
    settle_s: float = 0.0,
    warmup_share: float = 0.0,
) -> ExecutionPlan:
    """The plan for a signature as ``ppe pas2p analyze --json`` writes it."""
    if repeats < 1 or warmup < 0 or not settle_s >= 0 or not 0 <= warmup_share <= 1:
        raise SignatureFileError(
            "repeats must be >= 1, warmup and settle >= 0 and the warm-up share in [0, 1], not "
            f"{repeats}, {warmup}, {settle_s}, {warmup_share}"
        )
    try:
        phases = {int(p["id"]): p for p in analysis["phases"]}
        kept = [int(i) for i in analysis["signature"]]
        traced = float(analysis["traced_s"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SignatureFileError(
            f"not a signature (ppe pas2p analyze --json): missing or bad {exc}"
        ) from exc
    if not kept:
        raise SignatureFileError("signature: keeps no phase")
    planned = []
    for pid in kept:
        if pid not in phases:
            raise SignatureFileError(f"signature: phase {pid} is kept but not among the phases")
        p = phases[pid]
        step = p.get("step")  # a typical occurrence's; analyses before it: the first's
        if step is None:
            step = p.get("first", {}).get("step")
        if not isinstance(step, int) or step < SETUP:
            raise SignatureFileError(
                f"phases[{pid}].first.step: missing or bad ({step!r}); "
                "re-run ppe pas2p analyze to write it"
            )
        planned.append(
            PlannedPhase(pid, step, int(p["weight"]), float(p["mean_s"]), float(p["sd_s"]))
        )
    planned.sort(key=lambda p: p.step)
    run = _worth_running(planned)
    kept_s = math.fsum(p.traced_total_s for p in run)
    return ExecutionPlan(
        run,
        traced,
        max(traced - kept_s, 0.0),
        repeats,
        warmup,
        settle_s,
        warmup_share,
        tuple(p.id for p in planned if p not in run),
    )


def _worth_running(planned: list[PlannedPhase]) -> list[PlannedPhase]:
    """The kept phases a signature run executes: all but those that occur once (the set-up
    aside, which runs anyway). Running one occurrence of a phase seen once costs its whole
    share of the run and saves nothing (ppe-cg at n = 2000: three such checkpoints and the
    closing collectives were 40 % of the signature's cost); they are predicted like the phases
    left out, at their traced time scaled as the measured ones ran. When nothing else is
    kept, they run."""
    repeated = [p for p in planned if p.step == SETUP or p.weight > 1]
    if not any(p.step != SETUP for p in repeated):
        return planned
    return repeated


@dataclass(frozen=True)
class PhaseEstimate:
    id: int
    step: int
    weight: int
    times: list[float]
    mean_s: float
    sd_s: float  # of one occurrence on the target (from the traced spread when measured once)
    traced_mean_s: float

    @property
    def total_s(self) -> float:
        return self.weight * self.mean_s

    @property
    def variance(self) -> float:
        """Of this phase's share of the run: the mean's uncertainty, weight times over, plus
        the ``weight`` occurrences' own spread."""
        n = len(self.times)
        return self.sd_s**2 * (self.weight**2 / n + self.weight)


@dataclass(frozen=True)
class Prediction:
    mean_s: float
    low_s: float
    high_s: float
    level: float
    phases: list[PhaseEstimate]
    left_out_s: float  # the phases not kept, scaled by the kept phases' target/traced ratio
    speedup: float  # traced kept time / target kept time
    traced_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "predicted_s": self.mean_s,
            "interval_s": [self.low_s, self.high_s],
            "level": self.level,
            "left_out_s": self.left_out_s,
            "traced_s": self.traced_s,
            "speedup": self.speedup,
            "phases": [
                {
                    "id": p.id,
                    "step": p.step,
                    "weight": p.weight,
                    "mean_s": p.mean_s,
                    "sd_s": p.sd_s,
                    "runs": len(p.times),
                    "traced_mean_s": p.traced_mean_s,
                    "times_s": p.times,
                }
                for p in self.phases
            ],
        }


def predict(
    plan: ExecutionPlan, measured: Mapping[int, Sequence[float]], level: float = 0.95
) -> Prediction:
    """The run on the target: sum of weight x mean measured time over the kept phases, plus the
    left-out remainder scaled alike, with a ``level`` interval."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level}")
    estimates = []
    for p in plan.phases:
        times = [float(t) for t in measured.get(p.id, ())]
        if not times:
            raise ValueError(f"phase {p.id} (step {p.step}) has no measured time")
        if any(not math.isfinite(t) or t < 0 for t in times):
            raise ValueError(f"phase {p.id}: measured times must be finite and >= 0")
        mean = math.fsum(times) / len(times)
        if len(times) > 1:
            sd = math.sqrt(math.fsum((t - mean) ** 2 for t in times) / (len(times) - 1))
        else:  # one run: the traced spread, relative, is all there is to go on
            sd = p.traced_sd_s / p.traced_mean_s * mean if p.traced_mean_s > 0 else 0.0
        estimates.append(PhaseEstimate(p.id, p.step, p.weight, times, mean, sd, p.traced_mean_s))
    kept = math.fsum(e.total_s for e in estimates)
    traced_kept = math.fsum(p.traced_total_s for p in plan.phases)
    ratio = kept / traced_kept if traced_kept > 0 else 1.0
    left_out = plan.left_out_s * ratio
    total = kept + left_out
    var = math.fsum(e.variance for e in estimates) * (total / kept if kept > 0 else 1.0) ** 2
    half = _t(level, estimates) * math.sqrt(var)
    return Prediction(
        total,
        max(total - half, 0.0),
        total + half,
        level,
        estimates,
        left_out,
        1.0 / ratio if ratio > 0 else math.inf,
        plan.traced_s,
    )


def _t(level: float, estimates: Sequence[PhaseEstimate]) -> float:
    """Student-t quantile with Welch–Satterthwaite degrees of freedom over the phases' means."""
    # Imported here: scipy costs every rank of ppe-sor 0.25-0.7 s of CPU at start, which the
    # host's sensor reports as load just as the run asks for its schedule.
    from scipy.special import ndtri, stdtrit  # noqa: PLC0415

    terms = [
        (e.variance, len(e.times) - 1) for e in estimates if e.variance > 0 and len(e.times) > 1
    ]
    if not terms:
        return float(ndtri(0.5 + level / 2))
    num = math.fsum(v for v, _ in terms) ** 2
    den = math.fsum(v * v / df for v, df in terms)
    return float(stdtrit(num / den, 0.5 + level / 2))
