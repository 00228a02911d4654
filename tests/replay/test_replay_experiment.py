"""Replay experiment on real traces: causality, report shape, determinism, the command."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest

from ppe.replay.cases import draw_cases, eligible, make_banks, prepare_hosts, run_specs
from ppe.replay.cli import main
from ppe.replay.config import ReplayConfig
from ppe.replay.experiment import run_experiment, run_replay
from ppe.replay.planning import plan_case
from ppe.replay.report import render_html
from ppe.replay.simulate import simulate
from ppe.replay.workers import _chunk_from_paths
from ppe.traces import read_traces

from ..conftest import TRACES_DIR

FILES = [TRACES_DIR / f"{n}.csv.gz" for n in ("1", "41", "65", "198", "233", "392")]


@pytest.fixture(scope="module")
def traces():
    return read_traces(FILES)


def _small(**kw) -> ReplayConfig:
    base = dict(
        traces=tuple(str(f) for f in FILES),
        n=400,
        iterations=60,
        hosts=3,
        starts=4,
        strategies=("block", "static", "mean", "expected"),
        benchmark=2e-5,
        schedule_samples=500,
        predict_samples=1000,
        executor="serial",
        seed=3,
    )
    base.update(kw)
    return ReplayConfig.from_flat(base)


def test_future_values_never_change_a_start_s_plans(traces) -> None:
    config = _small(strategies=("block", "mean", "conservative", "expected"))
    hosts = prepare_hosts(traces, config)
    case = draw_cases(hosts, config)[0]
    before = plan_case(case, hosts, config)
    rng = np.random.default_rng(0)
    scrambled = []
    for tr in traces:
        later = tr.timestamps >= case.start
        avail = tr.availability.copy()
        avail[later] = rng.uniform(0.01, 1.0, int(later.sum()))
        dead = tr.dead.copy()
        dead[later] = rng.random(int(later.sum())) < 0.3
        scrambled.append(dataclasses.replace(tr, availability=avail, dead=dead))
    after = plan_case(case, prepare_hosts(scrambled, config), config)
    assert after.multimode == before.multimode
    for s in config.strategies:
        b, a = before.outcomes[s], after.outcomes[s]
        assert b.error is None
        assert (a.rows, a.mean, a.lo, a.hi, a.horizon_s) == (
            b.rows,
            b.mean,
            b.lo,
            b.hi,
            b.horizon_s,
        )
    # and the past does matter: scrambling it changes the plans
    past = [
        dataclasses.replace(
            tr,
            availability=np.where(
                tr.timestamps < case.start, rng.uniform(0.01, 1.0, len(tr)), tr.availability
            ),
        )
        for tr in traces
    ]
    changed = plan_case(case, prepare_hosts(past, config), config)
    assert changed.outcomes["mean"].mean != before.outcomes["mean"].mean


def test_dead_hosts_are_not_offered(traces) -> None:
    config = _small()
    dead_trace = dataclasses.replace(traces[0], dead=np.ones(len(traces[0]), dtype=bool))
    host = prepare_hosts([dead_trace], config)[0]
    start = float(traces[0].timestamps[3000])
    assert not eligible(host, start, config)
    assert eligible(prepare_hosts([traces[0]], config)[0], start, config)


def test_small_experiment_report_shape_and_sanity(traces) -> None:
    config = _small()
    calls: list[tuple[int, int]] = []
    report = run_experiment(traces, config, lambda d, t: calls.append((d, t)))
    assert calls[-1] == (4, 4)
    assert set(report) >= {"config", "strategies", "by_mode", "oracle", "runs"}
    assert set(report["by_mode"]) == {"single", "multi"}
    assert len(report["runs"]) == 4 * len(config.reported())
    assert "expected+replan" in report["strategies"]  # re-planning runs by default
    for name, st in report["strategies"].items():
        assert {
            "makespan_mean",
            "makespan_p50",
            "makespan_p95",
            "vs_oracle",
            "coverage",
            "mae_rel",
        } <= set(st)
        assert st["n"] == 4 and st["failed"] == 0
        assert st["makespan_p50"] <= st["makespan_p95"]
        if name in config.strategies:  # the oracle's static schedule beats every static one;
            assert st["vs_oracle"] >= 1.0 - 1e-9  # re-planning runs may beat it
        assert 0.0 <= st["coverage"] <= 1.0 and st["mae_rel"] >= 0.0
    for run in report["runs"]:
        assert set(run) >= {"start", "hosts", "strategy", "rows", "predicted", "actual"}
        assert sum(run["rows"]) == config.sim.n and len(run["hosts"]) == 3
        lo, hi = run["predicted"]["interval"]
        # (a heavy right tail may put the mean above the interval: not checked)
        assert 0 < lo <= hi and run["predicted"]["mean"] > 0
        assert math.isfinite(run["actual"])
        if run["strategy"] in config.strategies:
            assert run["actual"] >= run["oracle"] - 1e-9
    # block is equal strips; the model-driven strategies should not lose to it on average
    assert report["strategies"]["expected"]["makespan_mean"] <= (
        report["strategies"]["block"]["makespan_mean"] * 1.05
    )
    json.dumps(report, allow_nan=False)
    page = render_html(report)
    assert "Plotly" in page and len(page) > 1_000_000  # plotly.js inlined
    assert "<script src=" not in page.replace(" ", "") and "src='http" not in page


def test_results_do_not_depend_on_worker_count(traces) -> None:
    serial = run_experiment(traces, _small(strategies=("mean", "quantile")))
    pooled = run_experiment(
        traces, _small(strategies=("mean", "quantile"), executor="process", workers=2)
    )
    assert serial["runs"] == pooled["runs"]
    assert serial["strategies"] == pooled["strategies"]
    # from a worker thread, as the service runs replay jobs (then the pool uses forkserver)
    box: list[dict] = []
    worker = threading.Thread(
        target=lambda: box.append(
            run_experiment(
                traces, _small(strategies=("mean", "quantile"), executor="process", workers=2)
            )
        )
    )
    worker.start()
    worker.join(120)
    assert box and box[0]["runs"] == serial["runs"]


def test_command_writes_json_and_html(tmp_path: Path) -> None:
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    code = main(
        [
            str(FILES[0]),
            str(FILES[1]),
            str(FILES[4]),
            "--hosts",
            "2",
            "--starts",
            "2",
            "--n",
            "200",
            "--iterations",
            "20",
            "--benchmark",
            "2e-5",
            "--strategies",
            "mean,conservative",
            "--replan",
            "mean",
            "--replan-every",
            "120",
            "--executor",
            "serial",
            "--quiet",
            "--out",
            str(out),
            "--html",
            str(page),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert set(report["strategies"]) == {"mean", "conservative", "mean+replan"}
    assert report["config"]["replan"] == ["mean"] and report["config"]["replan_every_s"] == 120
    assert main([str(FILES[0]), str(FILES[1]), "--replan-every", "0", "--quiet"]) == 2
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_bad_input_is_a_clear_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,value\n1,0.5\n2,oops\n")
    assert main([str(bad), "--quiet"]) == 2
    assert "bad.csv:3" in capsys.readouterr().err
    assert main([str(FILES[0]), "--strategies", "nope", "--quiet"]) == 2
    with pytest.raises(ValueError, match="twice"):
        run_replay({"traces": [str(FILES[0])], "replan": ["expected", "expected"]})
    assert main([str(FILES[0]), "--replan", "nope", "--quiet"]) == 2
    with pytest.raises(ValueError, match="unknown replay settings"):
        run_replay({"traces": [str(FILES[0])], "colour": "red"})


def test_bandwidth_from_trace_is_capacity_minus_recorded_traffic(traces) -> None:
    config = _small(bandwidth_from_trace=True, bandwidth=2e5, strategies=("mean",), starts=2)
    host = prepare_hosts(traces[:1], config)[0]
    tr = traces[0]
    used = (tr.net_rx_kbs + tr.net_tx_kbs) * 1024.0
    assert host.bandwidth is not None
    np.testing.assert_allclose(host.bandwidth, np.clip(2e5 - used, 1e4, 2e5))
    report = run_experiment(traces, config)
    assert all(math.isfinite(r["actual"]) for r in report["runs"])
    # a tenth of the link: the same schedules take longer (their halo exchanges do)
    slow_config = dataclasses.replace(config, sim=dataclasses.replace(config.sim, bandwidth=2e4))
    cases = draw_cases(prepare_hosts(traces, config), config)
    rows = [r["rows"] for r in report["runs"] if r["strategy"] == "mean"]
    times = []
    for cfg in (config, slow_config):
        hosts = prepare_hosts(traces, cfg)
        bank, net = make_banks(hosts)
        assert net is not None
        times.append(simulate(bank, run_specs(cases, hosts, rows, True), cfg.sim, net).makespan)
    assert np.all(times[1] > times[0])


def test_the_dask_task_plans_like_the_local_path(traces) -> None:
    # dask itself is optional (not installed here); the task it ships must still be right
    config = _small(strategies=("mean",), starts=2)
    hosts = prepare_hosts(traces, config)
    cases = draw_cases(hosts, config)
    remote = _chunk_from_paths("plan", cases, [str(f) for f in FILES], config)
    local = [plan_case(c, hosts, config) for c in cases]
    assert [p.outcomes["mean"].rows for p in remote] == [p.outcomes["mean"].rows for p in local]


class _Stop(Exception):
    pass


def test_progress_is_reported_after_planning_too(traces) -> None:
    """After the cases are planned, the re-planning runs, the strategies' simulations and the
    oracle each report the planned count again: a service job cancelled then stops there."""
    config = _small(strategies=("mean", "expected"), replan=("expected",))
    calls: list[tuple[int, int]] = []
    report = run_experiment(traces, config, lambda d, t: calls.append((d, t)))
    planned = calls.index((config.starts, config.starts))
    assert len(calls) - planned - 1 >= 3, calls  # re-plan checks, two strategies, the oracle

    def stop_after_planning(done: int, total: int) -> None:
        calls.append((done, total))
        if calls.count((total, total)) > 1:
            raise _Stop

    calls.clear()
    with pytest.raises(_Stop):
        run_experiment(traces, config, stop_after_planning)
    assert report["strategies"]  # the first run went to the end
