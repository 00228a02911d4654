"""How a what-if is planned and predicted at every point (the CLI's flags, later the API's)."""

from __future__ import annotations

from dataclasses import dataclass

from ppe.pipeline import PlanOptions

__all__ = ["Options"]


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
