"""How a what-if is planned and predicted at every point, and where its points run (the CLI's
flags, the API's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import scheduler
from ppe.core import CompiledModel, HostInputs
from ppe.executors import Executor, check_executor, one_thread, worker_count
from ppe.pipeline import PlanOptions, dedicated_row_times

__all__ = ["Options", "Spread"]


@dataclass(frozen=True)
class Options:
    """How to plan and predict every point: the scheduler's strategy and PlanOptions' knobs;
    ``collapse=False`` sends every point through the full pipeline (for comparisons)."""

    strategy: str = "mean"
    confidence: float = 0.95
    k: float = 2.0
    quantile: float = 0.95
    engine: str = "auto"
    samples: int = 20_000
    seed: int = 0
    collapse: bool = True

    def plan_options(self, static: bool) -> PlanOptions:
        """One round when the loads do not depend on the horizon (no traces, no forecasts):
        every round would see the same inputs."""
        return PlanOptions(
            confidence=self.confidence,
            k=self.k,
            quantile=self.quantile,
            predict_samples=self.samples,
            engine=self.engine,
            seed=self.seed,
            max_rounds=1 if static else PlanOptions().max_rounds,
        )

    def dedicated(
        self, model: CompiledModel, params: Mapping[str, float], inputs: list[HostInputs]
    ) -> list[float] | None:
        """Each host's time per row when idle, which only ``static`` reads (else None)."""
        if self.strategy != "static":
            return None
        return dedicated_row_times(model, params, inputs)

    def schedule(self, hosts: Sequence[scheduler.StochasticHost], total: int) -> dict[str, int]:
        """The point's strategy over ``hosts`` (the pipeline's scheduling sample count)."""
        return scheduler.schedule_rows(
            list(hosts),
            total,
            self.strategy,
            k=self.k,
            quantile=self.quantile,
            samples=PlanOptions().schedule_samples,
            seed=self.seed,
        )


@dataclass(frozen=True)
class Spread:
    """Where a sweep's independent work runs (:mod:`ppe.executors`): in this process
    ("serial"), a local process pool of ``workers`` (0: every core), or the Dask scheduler
    at ``scheduler_address``. The answer is the same on any of them."""

    executor: str = "serial"
    workers: int = 0
    scheduler_address: str | None = None
    #: The process pool's start method (None: fork, or forkserver beside other threads).
    method: str | None = None

    def __post_init__(self) -> None:
        check_executor(self.executor, self.scheduler_address)

    def spreads(self, tasks: int) -> bool:
        """Whether ``tasks`` independent tasks would leave this process."""
        if self.executor == "dask":
            return True
        return self.executor == "process" and min(worker_count(self.workers), tasks) > 1

    def executor_for(self, tasks: int) -> Executor:
        """The executor for ``tasks`` tasks: never more pool processes than tasks."""
        workers = min(worker_count(self.workers), max(tasks, 1))
        return Executor(
            self.executor,
            workers,
            self.scheduler_address,
            method=self.method,
            initializer=one_thread,
        )
