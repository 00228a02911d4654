"""Keeping an MPI job's ranks honest: a stall watchdog, stop signals, core pinning.

Shared by ``ppe-sor`` and ``ppe-cg``: a dead or hung peer leaves the other ranks blocked
inside MPI, where only a thread can notice.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Callable

from threadpoolctl import threadpool_limits

from ppe.apps.trace import now

__all__ = ["STOP_SIGNALS", "Watchdog", "pin_to_core", "watch_signals"]


class Watchdog:
    """Calls ``on_stall`` when no step completes for ``timeout_s`` (a dead or hung peer leaves
    the others blocked inside MPI, where nothing else can notice)."""

    def __init__(self, timeout_s: float, on_stall: Callable[[float], None]) -> None:
        self.timeout_s = timeout_s
        self._on_stall = on_stall
        self._last = now()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="rank-watchdog", daemon=True)
        self._thread.start()

    def tick(self) -> None:
        self._last = now()

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        while not self._done.wait(min(1.0, self.timeout_s / 4)):
            idle = now() - self._last
            if idle > self.timeout_s:
                self._on_stall(idle)
                return


#: Signals a launcher or a user stops a job with (mpiexec.gforker sends SIGINT to the
#: survivors when a rank dies; hydra's SIGKILL cannot be caught).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)


def watch_signals(on_signal: Callable[[str], None]) -> None:
    """Call ``on_signal`` from a thread as soon as a stop signal arrives, then exit.

    The main thread may sit inside an MPI call that never returns (its Python handlers would
    never run), so the C-level handler's wakeup fd wakes a thread instead.
    """
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: None)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

    def wait() -> None:
        got = reader.recv(1)  # the writer lives as long as this thread (it is referenced here)
        if got and writer.fileno() >= 0:
            on_signal(signal.Signals(got[0]).name)
            os._exit(128 + got[0])

    threading.Thread(target=wait, name="rank-signals", daemon=True).start()


def pin_to_core(rank: int) -> int:
    """Pin this process to core ``rank % cpu_count`` of the cores it may use."""
    cores = sorted(os.sched_getaffinity(0))
    core = cores[rank % len(cores)]
    os.sched_setaffinity(0, {core})
    return core


def one_blas_thread() -> None:
    """Every rank owns one core: a BLAS call (a dot product) that starts threads on the others
    steals them from the neighbour ranks, whose halos then arrive a scheduler tick late (ppe-sor
    spent 4-8 ms in each receive after its first residual check, 12x its half-sweep)."""
    threadpool_limits(1)
