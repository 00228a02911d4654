"""Where replay planning runs: in this process, a process pool, or a Dask cluster
(:mod:`ppe.executors`, shared with what-if sweeps).

Workers only compute: cases carry their seeds and results are gathered by position, so a
report does not depend on the executor or the number of workers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from threadpoolctl import threadpool_limits

from ppe import executors
from ppe.executors import Executor, ProgressFn
from ppe.replay import planning
from ppe.replay.cases import HostData, prepare_hosts
from ppe.replay.config import ReplayConfig
from ppe.traces import expand_paths, read_traces

__all__ = ["ProgressFn", "Workers", "worker_count"]

_CTX: dict[str, Any] = {}


def _init_worker(hosts: Sequence[HostData], config: ReplayConfig) -> None:
    # One BLAS/OpenMP thread per process: the pool already uses every core, and sklearn's
    # k-means initialisation of the mixture fits is 10-30x slower with oversubscribed threads.
    # threadpoolctl only limits libraries already loaded: `planning` (imported above) loads them.
    threadpool_limits(1)
    _CTX["hosts"] = hosts
    _CTX["config"] = config


def _work_chunk(kind: str, items: Sequence[Any]) -> list[Any]:
    """Plan cases (``kind="plan"``) or re-plan running applications (``"replan"``)."""
    fn = planning.plan_case if kind == "plan" else planning.replan_case
    return [fn(item, _CTX["hosts"], _CTX["config"]) for item in items]


def _chunk_from_paths(
    kind: str, items: Sequence[Any], paths: Sequence[str], config: ReplayConfig
) -> list[Any]:
    """Dask task: read the traces (cached per worker process) and work through a chunk."""
    key = ("paths", tuple(paths), config)
    if _CTX.get("key") != key:
        _init_worker(prepare_hosts(read_traces(paths), config), config)
        _CTX["key"] = key
    return _work_chunk(kind, items)


def worker_count(config: ReplayConfig) -> int:
    return executors.worker_count(config.workers)


class Workers:
    """Where planning runs: in this process, a process pool or a Dask cluster
    (:class:`ppe.executors.Executor`).

    Kept open for the whole experiment, since re-planning runs ask for schedules in rounds
    as their simulations reach each progress check.
    """

    def __init__(self, hosts: Sequence[HostData], config: ReplayConfig) -> None:
        self.hosts, self.config = hosts, config
        self.count = worker_count(config)
        self._exec = Executor(
            config.executor,
            config.workers,
            config.scheduler_address,
            method=config.start_method,
            initializer=_init_worker,
            initargs=(hosts, config),
        )
        self._paths: list[str] = []

    def __enter__(self) -> Workers:
        if self.config.executor == "dask":
            self._paths = [str(p.resolve()) for p in expand_paths(self.config.traces)]
        self._exec.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._exec.__exit__(*exc)

    def map(self, kind: str, items: Sequence[Any], progress: ProgressFn | None = None) -> list[Any]:
        """``planning.plan_case`` or ``planning.replan_case`` over ``items``, in their order;
        ``progress(done, total)`` after each chunk."""
        size = max(1, min(8, math.ceil(len(items) / (4 * self.count))))
        chunks = [list(items[i : i + size]) for i in range(0, len(items), size)]
        sizes = [len(ch) for ch in chunks]
        if self._exec.kind == "dask":
            args = [(kind, ch, self._paths, self.config) for ch in chunks]
            parts = self._exec.map(_chunk_from_paths, args, progress, sizes)
        elif not self._exec.local:
            parts = self._exec.map(_work_chunk, [(kind, ch) for ch in chunks], progress, sizes)
        else:
            with threadpool_limits(1):  # (sklearn is loaded: see _init_worker)
                _CTX["hosts"], _CTX["config"] = self.hosts, self.config
                parts = self._exec.map(_work_chunk, [(kind, ch) for ch in chunks], progress, sizes)
        return [x for part in parts for x in part]
