"""Memory a worker's threads freed goes back to the system (ppe.service.malloc)."""

from __future__ import annotations

import threading

import psutil
import pytest

from ppe.malloc import glibc as _glibc
from ppe.service.malloc import trim

pytestmark = pytest.mark.skipif(_glibc() is None, reason="the C library is not glibc")


def test_trim_returns_what_a_request_thread_freed() -> None:
    held: list[bytes] = []

    def request_thread() -> None:  # small blocks: malloc'd from the thread's arena, not mmap'd
        held.extend(bytes(1000) + bytes([i % 256]) for i in range(200_000))

    worker = threading.Thread(target=request_thread)
    worker.start()
    worker.join()
    keep = held[::1000]  # a few survivors pin the top of the heap, as live objects do
    held.clear()
    process = psutil.Process()
    before = process.memory_info().rss
    assert trim()
    after = process.memory_info().rss
    assert before - after > 100 * 2**20, (before, after)
    assert len(keep) == 200
