"""The ranks' guards: one BLAS thread per rank (a dot product must not take the neighbour's core)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CHECK = """
import json
import numpy as np
from threadpoolctl import threadpool_info
from ppe.apps.guard import one_blas_thread
one_blas_thread()
print(json.dumps([i["num_threads"] for i in threadpool_info()]))
"""


def test_one_blas_thread_limits_every_blas_pool_to_one_thread() -> None:
    pytest.importorskip("threadpoolctl")
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        capture_output=True,
        text=True,
        check=True,
        env={"OPENBLAS_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"},
    )
    threads = json.loads(done.stdout)
    assert threads, "numpy loaded no BLAS pool threadpoolctl can see"
    assert set(threads) == {1}
