"""The Dask executor on a real (local) cluster gives the same report as a serial run."""

from __future__ import annotations

import pytest

from ppe.replay.experiment import run_replay

from ..conftest import TRACES_DIR

distributed = pytest.importorskip("distributed")

FILES = [str(TRACES_DIR / f"{n}.csv.gz") for n in ("1", "41", "65", "198")]

pytestmark = pytest.mark.slow


def test_dask_cluster_matches_serial() -> None:
    config = dict(
        traces=FILES,
        n=400,
        iterations=40,
        hosts=3,
        starts=4,
        strategies=["mean", "conservative"],
        replan=["expected"],
        benchmark=2e-5,
        schedule_samples=500,
        predict_samples=1000,
        seed=5,
    )
    serial = run_replay({**config, "executor": "serial"})
    # Worker processes: plans travel to and from them pickled, as on a real cluster.
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        on_dask = run_replay(
            {**config, "executor": "dask", "scheduler_address": cluster.scheduler_address}
        )
    assert on_dask["strategies"] == serial["strategies"]
    assert on_dask["runs"] == serial["runs"]
    # 4 starts x (2 static strategies + expected re-planning)
    assert len(serial["runs"]) == 12
    assert {r["strategy"] for r in serial["runs"]} == {"mean", "conservative", "expected+replan"}
