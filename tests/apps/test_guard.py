"""The ranks' guards: one BLAS thread per rank (a dot product must not take the neighbour's core),
and a start-up light enough not to show as load to the sensors."""

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


@pytest.mark.parametrize(
    "module", ["ppe.apps.sor.main", "ppe.apps.cg.main", "ppe.apps.replay_phases.main"]
)
def test_a_rank_starts_without_scipy(module: str) -> None:
    """SciPy costs a rank 0.25-0.7 s of CPU at start, which the host's sensor reports as load
    just as the run asks for its schedule (the forecast then planned a 10 s run at 290 s)."""
    code = f"import sys, {module}\nprint(sorted(m for m in sys.modules if m.startswith('scipy')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
