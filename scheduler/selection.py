"""Resource selection (AppLeS): which candidate hosts to use, and in which chain order.

A host's (a, b) depend on its chain neighbours (its strip's halo crosses those links), so the
caller's ``evaluate(order)`` builds the host models for a chain order and this module stays pure.
Greedy forward selection scans the candidates (fastest first, and in the given order) and keeps a
host only if the predicted makespan drops, arranging the chosen hosts in the given order or by
speed; a host the balance leaves without rows is taken out of the chain and the chain re-evaluated
(its links no longer cost anything). The best of these, and of "all candidates in the given order",
is returned, so adding a slow host behind a thin link can never make the answer worse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from scheduler.errors import Infeasible, check_names
from scheduler.laws import law_of
from scheduler.problem import StochasticHost
from scheduler.strategies import MONTE_CARLO_STRATEGIES, STRATEGIES, Schedule, schedule

Evaluate = Callable[[list[str]], list[StochasticHost]]
CRITERIA = ("mean", "upper")


@dataclass(frozen=True)
class _Options:
    strategy: str
    total_rows: int
    k: float
    quantile: float
    samples: int
    seed: int
    confidence: float
    criterion: str


@dataclass(frozen=True)
class _Result:
    order: list[str]
    schedule: Schedule
    score: float


def select_resources(
    candidates: Sequence[str],
    evaluate: Evaluate,
    total_rows: int,
    strategy: str = "mean",
    *,
    k: float = 2.0,
    quantile: float = 0.95,
    samples: int = 4000,
    seed: int = 0,
    confidence: float = 0.95,
    criterion: str = "mean",
    search_strategy: str | None = None,
) -> tuple[list[str], Schedule]:
    """The chain order (a subset of ``candidates``) and its schedule minimising the makespan.

    ``criterion``: "mean" (predicted makespan mean) or "upper" (upper end of its interval at
    ``confidence``). ``search_strategy`` schedules the trial chains (default: ``strategy``, or
    "mean" when ``strategy`` is a slow Monte Carlo one); the chosen chain is then scheduled with
    ``strategy``. Raises ``Infeasible`` if even all candidates cannot hold the rows.
    """
    names = list(candidates)
    check_names(names)
    if not names:
        raise Infeasible("no candidate hosts")
    for s in (strategy, search_strategy):
        if s is not None and s not in STRATEGIES:
            raise ValueError(f"unknown strategy {s!r}; choose from {', '.join(STRATEGIES)}")
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    if search_strategy is None:
        search_strategy = "mean" if strategy in MONTE_CARLO_STRATEGIES else strategy
    opts = _Options(search_strategy, total_rows, k, quantile, samples, seed, confidence, criterion)
    chains = _Chains(evaluate, opts)
    by_speed = _speed_order(names, _call(evaluate, names))
    given = {n: i for i, n in enumerate(names)}
    speed = {n: i for i, n in enumerate(by_speed)}
    tries = [
        chains.greedy(by_speed, given),
        chains.greedy(by_speed, speed),
        chains.greedy(names, given),
        chains.run(names),
    ]
    found = [r for r in tries if r is not None]
    if not found:
        schedule(_call(evaluate, names), total_rows, search_strategy)  # raises the reason
        raise Infeasible("no feasible chain among the candidates")
    best = min(found, key=lambda r: (r.score, len(r.order)))
    if search_strategy == strategy:
        return best.order, best.schedule
    final = _Chains(evaluate, replace(opts, strategy=strategy)).run(best.order)
    assert final is not None  # the same chain was feasible under the search strategy
    return final.order, final.schedule


class _Chains:
    """Schedules chains for one selection; the greedy variants retry many of the same chains,
    so each chain is evaluated and scheduled once."""

    def __init__(self, evaluate: Evaluate, opts: _Options) -> None:
        self.evaluate = evaluate
        self.opts = opts
        self.seen: dict[tuple[str, ...], _Result | None] = {}

    def run(self, order: list[str]) -> _Result | None:
        """Schedule a chain, taking out hosts left without rows until all are used (their
        links no longer cost anything); None if the chain cannot hold the rows."""
        key = tuple(order)
        if key not in self.seen:
            self.seen[key] = self._schedule(list(order))
        return self.seen[key]

    def _schedule(self, order: list[str]) -> _Result | None:
        o = self.opts
        try:
            s = schedule(
                _call(self.evaluate, order),
                o.total_rows,
                o.strategy,
                k=o.k,
                quantile=o.quantile,
                samples=o.samples,
                seed=o.seed,
                confidence=o.confidence,
            )
        except Infeasible:
            return None
        used = set(s.used)
        if len(used) == len(order) or not used:
            return _Result(order, s, _score(s, o.criterion))
        return self.run([n for n in order if n in used])

    def greedy(self, scan: list[str], rank: dict[str, int]) -> _Result | None:
        """Forward selection along ``scan``, keeping a host only if the makespan drops; the
        chain is arranged by ``rank``."""
        chosen: list[str] = []
        best: _Result | None = None
        for name in scan:
            trial = sorted([*chosen, name], key=rank.__getitem__)
            result = self.run(trial)
            if result is None:
                if best is None:
                    chosen = trial  # not enough capacity yet: keep adding
                continue
            if best is None or result.score < best.score * (1 - 1e-12):
                best = result
                chosen = result.order
        return best


def _call(evaluate: Evaluate, order: list[str]) -> list[StochasticHost]:
    hosts = list(evaluate(list(order)))
    if [h.name for h in hosts] != order:
        raise ValueError(f"evaluate({order}) returned hosts {[h.name for h in hosts]}")
    return hosts


def _speed_order(names: list[str], hosts: list[StochasticHost]) -> list[str]:
    """Fastest first: lowest mean time per row, ties in the given order."""
    a_mean = {h.name: law_of(h.a).mean for h in hosts}
    return sorted(names, key=lambda n: a_mean[n])


def _score(s: Schedule, criterion: str) -> float:
    return s.makespan.mean if criterion == "mean" else s.makespan.interval[1]
