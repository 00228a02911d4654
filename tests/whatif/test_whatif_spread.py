"""A sweep spread over workers (ppe.executors: this process, a process pool, a Dask cluster)
gives the same answer, bit for bit, as one point after another; progress still comes per
point; bad executors are refused with a reason. Small machines, few starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppe.core.stochastic import Normal, StochasticValue
from ppe.executors import ExecutorError
from ppe.whatif import (
    Options,
    RegisteredHost,
    Spread,
    WhatIfError,
    evaluate,
    evaluate_resolved,
    resolve,
)
from ppe.whatif.simulated import SimOptions, simulate_whatif
from ppe.whatif_cli import FileResolver
from ppe.whatif_cli import main as whatif_main

from .conftest import MemoryResolver, cluster, parse, two_nodesets

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path("/work/shared/traces/bitbrains-rnd-2013-7")
TRACES = SHARED if SHARED.is_dir() else ROOT / "examples/traces/bitbrains-sample"
BUSY = ["1.csv.gz", "41.csv.gz", "198.csv.gz"]

#: A heterogeneous sweep of four points with drawn loads (numeric max over host classes).
SWEEP = two_nodesets(
    fast="[2, 3, 5, 8]",  # type: ignore[arg-type]
    slow=3,
    n=900,
    iterations=20,
    fast_load='{kind = "normal", mean = 0.8, std = 0.05}',
    slow_load=(
        '{kind = "mixture", components = [{weight = 0.7, mean = 0.9, std = 0.02}, '
        "{weight = 0.3, mean = 0.5, std = 0.05}]}"
    ),
)

TRACED = cluster(
    number=[3, 4],
    n=600,
    iterations=20,
    load="{kind = " + '"traces"' + ", files = [" + ", ".join(f'"{n}"' for n in BUSY) + "]}",
)


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    """A local Dask cluster of two worker processes: points travel to and from them pickled,
    as on a real cluster."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c.scheduler_address


def _analytic(spread: Spread, progress: list[tuple[int, int]] | None = None) -> dict[str, Any]:
    w = parse(SWEEP)
    res = resolve(w, MemoryResolver())
    hook = None if progress is None else (lambda d, t: progress.append((d, t)))
    return evaluate_resolved(w, res, Options(), hook, spread).to_dict()


def test_analytic_sweep_is_the_same_serial_on_processes_and_on_dask(dask_address: str) -> None:
    serial_progress: list[tuple[int, int]] = []
    pool_progress: list[tuple[int, int]] = []
    serial = _analytic(Spread("serial"), serial_progress)
    pool = _analytic(Spread("process", 2), pool_progress)
    on_dask = _analytic(Spread("dask", scheduler_address=dask_address))
    assert len(serial["points"]) == 4
    assert [p["values"]["nodeset.fast.number"] for p in serial["points"]] == [2, 3, 5, 8]
    # bit for bit: JSON of exact floats, in point order
    assert json.dumps(pool, sort_keys=True) == json.dumps(serial, sort_keys=True)
    assert json.dumps(on_dask, sort_keys=True) == json.dumps(serial, sort_keys=True)
    # the points differ, so equality above is not trivially one repeated answer
    means = [p["makespan"]["mean"] for p in serial["points"]]
    assert len(set(means)) == 4
    # progress per finished point, whatever order they finish in
    assert serial_progress == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert pool_progress == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_simulated_sweep_is_the_same_on_every_executor(dask_address: str) -> None:
    w = parse(TRACED)
    so = SimOptions(starts=3, seed=2)
    progress: list[tuple[int, int]] = []
    serial = simulate_whatif(w, FileResolver(TRACES), sim=so, spread=Spread("serial"))
    pool = simulate_whatif(
        w,
        FileResolver(TRACES),
        sim=so,
        spread=Spread("process", 2),
        progress=lambda d, t: progress.append((d, t)),
    )
    on_dask = simulate_whatif(
        w, FileResolver(TRACES), sim=so, spread=Spread("dask", scheduler_address=dask_address)
    )
    assert len(serial.points) == 2
    for other in (pool, on_dask):
        for a, b in zip(serial.points, other.points, strict=True):
            np.testing.assert_array_equal(a.starts, b.starts)
            np.testing.assert_array_equal(a.makespans, b.makespans)
            np.testing.assert_array_equal(a.predicted, b.predicted)
            np.testing.assert_array_equal(a.lower, b.lower)
            assert a.nodesets == b.nodesets
            assert a.analytic == b.analytic
    assert not np.array_equal(serial.points[0].makespans, serial.points[1].makespans)
    assert progress == [(1, 2), (2, 2)]


def test_dask_needs_an_address_and_a_reachable_scheduler() -> None:
    with pytest.raises(ValueError, match="needs --scheduler-address"):
        Spread("dask")
    with pytest.raises(ValueError, match="executor must be"):
        Spread("threads")
    w = parse(SWEEP)
    with pytest.raises(ExecutorError, match="cannot reach the Dask scheduler at 'nonsense'"):
        evaluate(w, MemoryResolver(), spread=Spread("dask", scheduler_address="nonsense"))


def test_live_forecasts_stay_in_this_process() -> None:
    """A registered host's forecast is read from this process's store: spreading such a
    sweep is refused with the reason, and the serial executor answers it."""

    def cpu(horizon: float | None) -> StochasticValue:
        return Normal(0.8, 0.05)

    text = cluster(number=[1, 2], n=400).replace(
        'floatspeed = 1000000000.0\nload = {kind = "dedicated"}',
        'host = "h1"\nload = {kind = "forecasts"}',
    )
    resolver = MemoryResolver(hosts={"h1": RegisteredHost("h1", benchmark=1e-6, cpu=cpu)})
    w = parse(text)
    with pytest.raises(WhatIfError, match="live forecasts"):
        evaluate(w, resolver, spread=Spread("process", 2))
    assert len(evaluate(w, resolver, spread=Spread("serial")).points) == 2


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_cli_executor_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = str(_spec(tmp_path, SWEEP))
    assert whatif_main([spec, "--json", "--executor", "serial"]) == 0
    serial = capsys.readouterr().out
    assert whatif_main([spec, "--json", "--executor", "process", "--workers", "2"]) == 0
    assert capsys.readouterr().out == serial
    assert len(json.loads(serial)["points"]) == 4
    assert whatif_main([spec, "--executor", "dask"]) == 2
    assert "needs --scheduler-address" in capsys.readouterr().err
    assert whatif_main([spec, "--executor", "dask", "--scheduler-address", "nonsense"]) == 2
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err


def test_cli_simulated_on_two_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = TRACED
    spec = str(_spec(tmp_path, text))
    args = [spec, "--json", "--simulate", "--starts", "2", "--traces", str(TRACES)]
    assert whatif_main([*args, "--executor", "serial"]) == 0
    serial = json.loads(capsys.readouterr().out)
    assert whatif_main([*args, "--workers", "2"]) == 0
    pool = json.loads(capsys.readouterr().out)
    for a, b in zip(serial["points"], pool["points"], strict=True):
        assert a["makespans_s"] == b["makespans_s"]
        assert a["predicted_interval_s"] == b["predicted_interval_s"]


def test_cli_on_a_dask_cluster(
    dask_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(_spec(tmp_path, SWEEP))
    assert whatif_main([spec, "--json", "--executor", "serial"]) == 0
    serial = capsys.readouterr().out
    args = [spec, "--json", "--executor", "dask", "--scheduler-address", dask_address]
    assert whatif_main(args) == 0
    assert capsys.readouterr().out == serial
