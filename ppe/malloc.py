"""glibc's allocator, tuned where PPE's processes need it; no-ops on other C libraries.

Two needs, one place (``ctypes`` over ``mallopt`` and ``malloc_trim``):

* **The service** caps a worker's arenas and trims them (``ppe/service/malloc.py``'s trimmer):
  request and planning threads each get an arena, and glibc returns an arena's free pages to
  the system only when the top of its heap is free.
* **numpy kernels** (ppe-sor's sweep, the PMaC benchmark) allocate and free a few
  megabyte-sized temporaries on every pass. glibc serves a block above its mmap threshold
  with a fresh ``mmap`` and unmaps it when freed, and returns a heap top above its trim
  threshold to the system, so every pass can fault its temporaries' pages in again. The
  thresholds adapt upwards after the first such free, but not in every process: ppe-sor's
  MPI ranks kept faulting, 30 % of their CPU time in the kernel and a half-sweep 2.5x slower
  (docs/sor.md). :func:`keep_heap` fixes both thresholds high, so freed temporaries stay in
  the heap for the next pass.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
#: The largest mmap threshold glibc accepts (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit).
MMAP_THRESHOLD_MAX = 32 << 20
#: Free heap top kept rather than returned: a kernel's temporaries, many times over.
TRIM_THRESHOLD = 1 << 30


def glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def limit_arenas(arenas: int) -> bool:
    """Cap the arenas threads created from now on may use; True when the C library did it."""
    libc = glibc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1)


def trim() -> bool:
    """Give free heap pages back to the system; True when some were returned."""
    libc = glibc()
    return bool(libc is not None and libc.malloc_trim(0) == 1)


def keep_heap(
    mmap_threshold: int = MMAP_THRESHOLD_MAX, trim_threshold: int = TRIM_THRESHOLD
) -> bool:
    """Serve blocks up to ``mmap_threshold`` bytes from the heap and keep up to
    ``trim_threshold`` bytes of free heap top (fixed: glibc stops adapting them); True when
    the C library took both. Call it before the kernel allocates; forked children inherit it."""
    libc = glibc()
    return bool(
        libc is not None
        and libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1
        and libc.mallopt(M_TRIM_THRESHOLD, trim_threshold) == 1
    )
