"""Keep glibc's allocator from holding on to memory the worker has already freed.

Request and planning threads each get a malloc arena of their own (up to 8 per core), and
glibc returns an arena's free pages to the system only when the top of its heap is free. Under
steady traffic the soak benchmark saw workers' RSS climb by hundreds of MB while the Python
heap stayed small: freed memory parked in idle threads' arenas. Two arenas and a periodic
``malloc_trim`` keep RSS near what is in use (the calls themselves: ``ppe/malloc.py``).
"""

from __future__ import annotations

import threading

from ppe.malloc import glibc, limit_arenas, trim

__all__ = ["ARENAS", "TRIM_EVERY_S", "Trimmer", "limit_arenas", "trim"]

#: Arenas per worker: one for the event loop's thread, one shared by the request threads.
ARENAS = 2
#: Seconds between trims: a trim walks the heaps, about a millisecond per 100 MB.
TRIM_EVERY_S = 30.0


class Trimmer:
    """A daemon thread that trims every ``every_s`` seconds until stopped (the app's lifespan)."""

    def __init__(self, every_s: float = TRIM_EVERY_S) -> None:
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ppe-malloc-trim", daemon=True)

    def start(self) -> Trimmer:
        if glibc() is not None:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            trim()
