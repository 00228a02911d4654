"""Where replay planning runs: in this process, a process pool, or a Dask cluster.

Workers only compute: cases carry their seeds and results are gathered by position, so a
report does not depend on the executor or the number of workers.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from threadpoolctl import threadpool_limits

from ppe.replay import planning
from ppe.replay.cases import HostData, prepare_hosts
from ppe.replay.config import ReplayConfig
from ppe.traces import expand_paths, read_traces

ProgressFn = Callable[[int, int], None]


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
    return config.workers if config.workers > 0 else (os.cpu_count() or 1)


class Workers:
    """Where planning runs: in this process, a process pool or a Dask cluster.

    Kept open for the whole experiment, since re-planning runs ask for schedules in rounds
    as their simulations reach each progress check.
    """

    def __init__(self, hosts: Sequence[HostData], config: ReplayConfig) -> None:
        self.hosts, self.config = hosts, config
        self.count = worker_count(config)
        self._pool: ProcessPoolExecutor | None = None
        self._client: Any = None
        self._paths: list[str] = []

    def __enter__(self) -> Workers:
        cfg = self.config
        if cfg.executor == "dask":
            try:
                from dask.distributed import Client
            except ImportError as exc:  # optional dependency
                raise RuntimeError(
                    "--executor dask needs `pip install 'dask[distributed]'`"
                ) from exc
            self._paths = [str(p.resolve()) for p in expand_paths(cfg.traces)]
            self._client = Client(cfg.scheduler_address)
        elif cfg.executor == "process" and self.count > 1:
            ctx = multiprocessing.get_context(_start_method(cfg))
            self._pool = ProcessPoolExecutor(
                self.count, mp_context=ctx, initializer=_init_worker, initargs=(self.hosts, cfg)
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        if self._client is not None:
            self._client.close()

    def map(self, kind: str, items: Sequence[Any], progress: ProgressFn | None = None) -> list[Any]:
        """``planning.plan_case`` or ``planning.replan_case`` over ``items``, in their order;
        ``progress(done, total)`` after each chunk."""
        size = max(1, min(8, math.ceil(len(items) / (4 * self.count))))
        chunks = [list(items[i : i + size]) for i in range(0, len(items), size)]
        parts: list[list[Any]] = [[] for _ in chunks]
        done = 0
        for pos, part in self._run(kind, chunks):
            parts[pos] = part
            done += len(part)
            if progress:
                progress(done, len(items))
        return [x for part in parts for x in part]

    def _run(self, kind: str, chunks: list[list[Any]]) -> Iterable[tuple[int, list[Any]]]:
        if self._client is not None:
            from dask.distributed import as_completed

            futures = {
                self._client.submit(
                    _chunk_from_paths, kind, ch, self._paths, self.config, pure=False
                ): pos
                for pos, ch in enumerate(chunks)
            }
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        elif self._pool is not None:
            yield from enumerate(self._pool.map(_work_chunk, [kind] * len(chunks), chunks))
        else:
            with threadpool_limits(1):  # (sklearn is loaded: see _init_worker)
                _CTX["hosts"], _CTX["config"] = self.hosts, self.config
                for pos, ch in enumerate(chunks):
                    yield pos, _work_chunk(kind, ch)


def _start_method(config: ReplayConfig) -> str | None:
    """The configured start method; by default "fork" unless other threads are running
    (a service's replay job): forking a threaded process can copy a lock some other
    thread holds and hang the worker, so then "forkserver"."""
    if config.start_method:
        return config.start_method
    methods = multiprocessing.get_all_start_methods()
    if threading.active_count() > 1 and "forkserver" in methods:
        return "forkserver"
    return None
