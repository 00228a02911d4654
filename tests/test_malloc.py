"""ppe.malloc.keep_heap: a numpy kernel's temporaries stay in the heap, so a pass does not
fault their pages in again (the 2.5x slowdown ppe-sor's ranks had, docs/sor.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ppe.malloc import glibc

pytestmark = pytest.mark.skipif(glibc() is None, reason="the C library is not glibc")

LOOP = """
import resource, sys
import numpy as np
from ppe import malloc
libc = malloc.glibc()
if sys.argv[1] == "keep":
    assert malloc.keep_heap()
else:  # every block above 64 KiB a fresh mmap: what a process that never adapts gets
    assert libc.mallopt(malloc.M_MMAP_THRESHOLD, 64 << 10) == 1
a = np.ones(1 << 17)  # 1 MiB, as a sweep's temporary at n = 1000 (too small for huge pages)
del a
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    t = np.ones(1 << 17)
    t += 1.0
    del t
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", LOOP, mode], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def test_kept_temporaries_do_not_fault_again() -> None:
    mapped, kept = _faults("mmap"), _faults("keep")
    assert mapped >= 20 * 128  # each fresh 1 MiB mapping faults its 256 pages in again
    assert kept * 20 < mapped
