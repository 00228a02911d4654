"""Where independent tasks run: in this process, a process pool, or a Dask cluster.

Shared by replay (cases to plan) and what-if (sweep points, chunks of start times). Workers
only compute: every task carries what it needs (its seeds included) and results are gathered
by position, so an answer does not depend on the executor or the number of workers. Dask is
optional and imported only when asked for.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorError",
    "ProgressFn",
    "check_executor",
    "dask_client",
    "one_thread",
    "start_method",
    "worker_count",
]

#: Where tasks may run: a local process pool, this process, or a Dask scheduler.
EXECUTORS: tuple[str, ...] = ("process", "serial", "dask")

ProgressFn = Callable[[int, int], None]


class ExecutorError(RuntimeError):
    """The executor cannot start: Dask missing, or its scheduler unreachable."""


def worker_count(workers: int) -> int:
    """``workers``, or every core for 0 (or less)."""
    return workers if workers > 0 else (os.cpu_count() or 1)


def one_thread() -> None:
    """A pool process's initializer: one BLAS/OpenMP thread per process, since the pool
    already uses every core (threadpoolctl limits the libraries loaded so far: with "fork",
    the parent's)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def _start_worker(
    path: list[str], initializer: Callable[..., None] | None, initargs: tuple[Any, ...]
) -> None:
    """A pool process's start: the parent's import path first (a "forkserver" or "spawn"
    worker starts from the interpreter's own, without what the parent added, such as a test
    runner's root), then the caller's initializer."""
    sys.path[:0] = [p for p in path if p not in sys.path]
    if initializer is not None:
        initializer(*initargs)


def check_executor(executor: str, scheduler_address: str | None) -> None:
    """Refuse an unknown executor, or Dask without a scheduler (ValueError)."""
    if executor not in EXECUTORS:
        raise ValueError("executor must be 'process', 'serial' or 'dask'")
    if executor == "dask" and not scheduler_address:
        raise ValueError("--executor dask needs --scheduler-address")


def start_method(chosen: str | None = None) -> str | None:
    """``chosen``; by default "fork" unless other threads are running (a service's job):
    forking a threaded process can copy a lock some other thread holds and hang the worker,
    so then "forkserver"."""
    if chosen:
        return chosen
    methods = multiprocessing.get_all_start_methods()
    if threading.active_count() > 1 and "forkserver" in methods:
        return "forkserver"
    return None


def dask_client(address: str) -> Any:
    """A client of the Dask scheduler at ``address``, or an :class:`ExecutorError` saying
    why not (Dask is an optional dependency)."""
    try:
        from dask.distributed import Client
    except ImportError as exc:  # optional dependency
        raise ExecutorError("--executor dask needs `pip install 'dask[distributed]'`") from exc
    try:
        return Client(address)
    except (OSError, ValueError, TimeoutError) as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {address!r}: {exc}") from exc


class Executor:
    """A context: tasks ``fn(*args)`` run in this process, a process pool of ``workers``
    (0: every core; one worker is this process) or on the Dask scheduler at
    ``scheduler_address``. ``initializer(*initargs)`` runs once in each pool process."""

    def __init__(
        self,
        executor: str = "process",
        workers: int = 0,
        scheduler_address: str | None = None,
        *,
        method: str | None = None,
        initializer: Callable[..., None] | None = None,
        initargs: tuple[Any, ...] = (),
    ) -> None:
        check_executor(executor, scheduler_address)
        self.kind = executor
        self.count = worker_count(workers)
        self.address = scheduler_address
        self.method = method
        self.initializer, self.initargs = initializer, initargs
        self._pool: ProcessPoolExecutor | None = None
        self._client: Any = None

    @property
    def local(self) -> bool:
        """Whether tasks run in this process."""
        return self._pool is None and self._client is None

    @property
    def slots(self) -> int:
        """How many tasks run at once: the Dask cluster's threads, the pool's processes, or 1."""
        if self._client is not None:
            return max(1, sum(self._client.nthreads().values()))
        return self.count if self._pool is not None else 1

    def __enter__(self) -> Executor:
        if self.kind == "dask":
            assert self.address is not None
            self._client = dask_client(self.address)
        elif self.kind == "process" and self.count > 1:
            ctx = multiprocessing.get_context(start_method(self.method))
            self._pool = ProcessPoolExecutor(
                self.count,
                mp_context=ctx,
                initializer=_start_worker,
                initargs=(list(sys.path), self.initializer, self.initargs),
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def completed(
        self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]]
    ) -> Iterator[tuple[int, Any]]:
        """``(position, fn(*args[position]))`` as each task finishes; a task's exception
        is raised here."""
        if self._client is not None:
            from dask.distributed import as_completed

            futures = {self._client.submit(fn, *a, pure=False): i for i, a in enumerate(args)}
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        elif self._pool is not None:
            pending: dict[Future[Any], int] = {
                self._pool.submit(fn, *a): i for i, a in enumerate(args)
            }
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield pending.pop(fut), fut.result()
        else:
            for i, a in enumerate(args):
                yield i, fn(*a)

    def map(
        self,
        fn: Callable[..., Any],
        args: Sequence[tuple[Any, ...]],
        progress: ProgressFn | None = None,
        sizes: Sequence[int] | None = None,
    ) -> list[Any]:
        """``fn(*a)`` for every ``a`` in ``args``, in their order whatever order they finish
        in; ``progress(done, total)`` after each, counting ``sizes[i]`` for task ``i``
        (default 1 each)."""
        weights = list(sizes) if sizes is not None else [1] * len(args)
        total = sum(weights)
        out: list[Any] = [None] * len(args)
        done = 0
        for pos, result in self.completed(fn, args):
            out[pos] = result
            done += weights[pos]
            if progress is not None:
                progress(done, total)
        return out
