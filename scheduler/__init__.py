"""Pure time-balancing scheduler: balance, strategies over stochastic hosts, resource selection.

No I/O: hosts come in as linear time models (``a * rows + b``), with plain numbers or stochastic
values (scipy.stats-shaped, see ``Stochastic``); schedules come out as plain dataclasses.
"""

from scheduler.balance import Allocation, LinearHost, balance
from scheduler.errors import Infeasible
from scheduler.laws import Stochastic
from scheduler.problem import StochasticHost
from scheduler.replan import ReplanPolicy, migration_seconds
from scheduler.selection import select_resources
from scheduler.stats import TimeStats
from scheduler.strategies import (
    MONTE_CARLO_STRATEGIES,
    STRATEGIES,
    Schedule,
    predict_times,
    schedule,
    schedule_rows,
    simulate_makespans,
)

__all__ = [
    "MONTE_CARLO_STRATEGIES",
    "STRATEGIES",
    "Allocation",
    "Infeasible",
    "LinearHost",
    "ReplanPolicy",
    "Schedule",
    "Stochastic",
    "StochasticHost",
    "TimeStats",
    "balance",
    "migration_seconds",
    "predict_times",
    "schedule",
    "schedule_rows",
    "select_resources",
    "simulate_makespans",
]
