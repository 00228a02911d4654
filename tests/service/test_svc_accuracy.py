"""Live accuracy and calibration over HTTP, on SQLite and PostgreSQL: measurements posted, a
schedule served, runs reported against it, the figures checked by hand; the metrics scraped;
a host without benchmark planned with the one its runs calibrate."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

RUNS = "/api/v1/runs"
HOSTS = ("h0", "h1", "h2", "h3")
#: cpu readings on every host alternate 0.2 and 0.3 every 10 s: any 60 s window on the
#: sample grid reads 0.25 on average, taken while the run is on the core: the share it got
READING = 0.25
SHARE = READING
N, ITERATIONS = 400, 10


def post_measurements(env: Any, t0: float) -> None:
    items = [
        {"resource": h, "metric": "cpu", "timestamp": t0 + 10 * k, "value": 0.2 + 0.1 * (k % 2)}
        for h in HOSTS
        for k in range(360)
    ]
    r = env.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200, r.text


def register(env: Any, host: str, props: dict[str, Any]) -> None:
    r = env.client.put(
        f"/api/v1/resources/{host}", json={"properties": props}, headers=env.h("operator")
    )
    assert r.status_code == 200, r.text


@pytest.fixture
def t0(env: Any) -> float:
    """An hour of cpu data on four hosts; h0 and h1 registered with benchmark 2e-8."""
    start = time.time() - 3700
    post_measurements(env, start)
    for h in ("h0", "h1"):
        register(env, h, {"benchmark": 2e-8})
    return start


def schedule(env: Any, strategy: str, hosts: list[Any] | None = None) -> Any:
    body = {
        "app": "sor",
        "n": N,
        "iterations": ITERATIONS,
        "hosts": hosts or ["h0", "h1"],
        "strategy": strategy,
    }
    return env.client.post("/api/v1/schedules", json=body, headers=env.h("app"))


def served(env: Any, strategy: str) -> tuple[int, dict[str, Any]]:
    r = schedule(env, strategy)
    assert r.status_code == 200, r.text
    return int(r.json()["id"]), r.json()["makespan"]


def post_runs(env: Any, runs: list[dict[str, Any]]) -> list[int]:
    r = env.client.post(RUNS, json={"runs": runs}, headers=env.h("app"))
    assert r.status_code == 201, r.text
    return list(r.json()["ids"])


def linked(sid: int, actual: float, status: str = "completed", done: int = ITERATIONS) -> Any:
    return {
        "app": "sor",
        "params": {"n": N, "iterations": done, "p": 2},
        "system": "h0,h1",
        "values": [actual],
        "schedule_id": sid,
        "status": status,
    }


def accuracy(env: Any, **query: Any) -> list[dict[str, Any]]:
    r = env.client.get("/api/v1/accuracy", params=query, headers=env.h("operator"))
    assert r.status_code == 200, r.text
    return list(r.json())


# ------------------------------------------------------------------------ live accuracy


def test_accuracy_per_strategy_by_hand(env, t0) -> None:  # type: ignore[no-untyped-def]
    mean_id, m = served(env, "mean")
    cons_id, c = served(env, "conservative")
    lo, hi = m["interval"]
    actuals = [lo + 0.3 * (hi - lo), lo + 0.7 * (hi - lo), hi * 2, lo * 0.5]  # 2 in, 2 out
    post_runs(env, [linked(mean_id, a) for a in actuals] + [linked(mean_id, hi, "failed")])
    # One run stopped at half its iterations: judged against half the promise.
    half = c["mean"] / 2
    post_runs(env, [linked(cons_id, c["mean"]), linked(cons_id, half, done=ITERATIONS // 2)])

    by = {(g["app"], g["strategy"]): g for g in accuracy(env)}
    g = by[("sor", "mean")]
    assert (g["runs"], g["completed"], g["failed"], g["inside"]) == (5, 4, 1, 2)
    assert g["coverage"] == pytest.approx(0.5)
    errors = [abs(m["mean"] - a) / a for a in actuals]
    assert g["mean_relative_error"] == pytest.approx(sum(errors) / 4)
    assert g["mean_ratio"] == pytest.approx(sum(a / m["mean"] for a in actuals) / 4)
    assert g["nominal"] == pytest.approx(0.95)
    assert [j["actual"] for j in g["judged"]] == pytest.approx(actuals[::-1])  # newest first
    k = by[("sor", "conservative")]
    assert (k["completed"], k["inside"], k["coverage"]) == (2, 2, 1.0)
    assert k["mean_ratio"] == pytest.approx(1.0)
    assert sorted(j["scale"] for j in k["judged"]) == [0.5, 1.0]

    # Filters and the window of the newest `last` runs.
    only = accuracy(env, strategy="mean", last=2)
    assert [(x["strategy"], x["runs"]) for x in only] == [("mean", 2)]
    assert only[0]["failed"] == 1 and only[0]["judged"][0]["actual"] == pytest.approx(lo * 0.5)
    assert accuracy(env, app="jacobi2d") == []


def test_unlinked_runs_are_not_judged(env, t0) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, [{**linked(1, 1.0), "schedule_id": None}])
    assert accuracy(env) == []


@pytest.mark.parametrize(
    ("query", "field"),
    [({"last": 0}, "last"), ({"last": 1001}, "last"), ({"strategy": "Mean!"}, "strategy")],
)
def test_bad_queries_are_refused(env, query: dict[str, Any], field: str) -> None:  # type: ignore[no-untyped-def]
    r = env.client.get("/api/v1/accuracy", params=query, headers=env.h("operator"))
    assert r.status_code == 422 and field in r.json()["detail"][0]["field"]


def test_the_metrics_show_runs_and_live_figures(env, t0) -> None:  # type: ignore[no-untyped-def]
    sid, m = served(env, "mean")
    lo, hi = m["interval"]
    post_runs(env, [linked(sid, m["mean"]), linked(sid, hi * 3), linked(sid, hi, "failed")])
    post_runs(env, [{**linked(sid, 2.0), "schedule_id": None}])
    text = env.client.get("/metrics").text

    def value(name: str, **labels: str) -> float:
        body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        found = re.search(rf"^{name}\{{{re.escape(body)}\}} (\S+)$", text, re.M)
        assert found, f"{name}{{{body}}} not in /metrics"
        return float(found.group(1))

    assert value("ppe_runs_reported_total", app="sor", status="completed", strategy="mean") == 2
    assert value("ppe_runs_reported_total", app="sor", status="failed", strategy="mean") == 1
    assert value("ppe_runs_reported_total", app="sor", status="completed", strategy="") == 1
    assert value("ppe_live_coverage", app="sor", strategy="mean") == pytest.approx(0.5)
    assert value("ppe_live_runs", app="sor", strategy="mean") == 2
    assert value("ppe_live_failed_runs", app="sor", strategy="mean") == 1
    ratio = (m["mean"] + hi * 3) / m["mean"] / 2
    assert value("ppe_live_makespan_ratio", app="sor", strategy="mean") == pytest.approx(ratio)


def test_the_live_figures_are_in_a_multiprocess_scrape_too(env, t0, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With several workers the scrape merges the workers' files; the store's figures come
    from the collector, whichever worker answers."""
    sid, m = served(env, "mean")
    post_runs(env, [linked(sid, m["mean"])])
    workers = tmp_path / "prometheus"  # its own directory: the collector reads every *.db
    workers.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(workers))
    text = env.client.get("/metrics").text
    assert 'ppe_live_coverage{app="sor",strategy="mean"} 1.0' in text
    assert 'ppe_runs_reported_total{app="sor",status="completed",strategy="mean"} 1.0' in text


# ------------------------------------------------------------------------ calibration


def calibrating_run(t0: float, k: int, benchmark: float, host: str = "h2") -> dict[str, Any]:
    """A ppe-sor report whose rank on ``host`` spent what ``benchmark`` predicts at 1/3 of
    the CPU, in a window the cpu samples cover (two segments: a migration half-way)."""
    start = t0 + 600 + 400 * k
    rows, n, its = (150, 250), 1000, 50
    segments = [
        {
            "from": i * its,
            "to": (i + 1) * its,
            "rows": r,
            "first": 0,
            "start": start + 60 * i,
            "end": start + 60 * (i + 1),
            "compute_s": benchmark * r * n * its / SHARE,
            "comm_s": 0.5,
        }
        for i, r in enumerate(rows)
    ]
    other = {"rank": 1, "host": "h1", "segments": [{**s, "compute_s": 99.0} for s in segments]}
    report = {"ranks": [{"rank": 0, "host": host, "segments": segments}, other]}
    return {
        "app": "sor",
        "params": {"n": n, "iterations": 2 * its, "p": 2},
        "system": f"{host},h1",
        "values": [120.0],
        "report": report,
        "key": f"cal-{host}-{k}",
    }


def calibration(env: Any, host: str) -> dict[str, Any]:
    r = env.client.get(f"/api/v1/resources/{host}/calibration", headers=env.h("operator"))
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_calibration_by_hand_and_beside_the_configured(env, t0) -> None:  # type: ignore[no-untyped-def]
    values = [2.9e-8, 3.0e-8, 3.1e-8]
    post_runs(env, [calibrating_run(t0, k, b, host="h0") for k, b in enumerate(values)])
    cal = calibration(env, "h0")
    got = cal["calibrated"]
    assert got["benchmark"] == pytest.approx(3.0e-8)
    assert got["std_error"] == pytest.approx(1e-9 / 3**0.5)
    assert sorted(r["benchmark"] for r in got["runs"]) == pytest.approx(values)
    assert all(r["share"] == pytest.approx(SHARE) and r["segments"] == 2 for r in got["runs"])
    # h0 is registered at 2e-8: outside the interval, flagged; planning keeps the configured.
    assert cal["configured"] == 2e-8 and cal["agrees"] is False
    assert cal["used_by_planning"] == "configured"
    assert cal["bandwidth"]["estimated"] is False
    # h1's rank is in every run too, and its own compute time gives its own figure.
    assert calibration(env, "h1")["calibrated"]["benchmark"] == pytest.approx(
        99.0 * SHARE * 2 / (400 * 1000 * 50)
    )


def test_calibration_reads_the_ranks_own_cpu_time_before_the_sensors(env, t0) -> None:  # type: ignore[no-untyped-def]
    """Segments that carry ``cpu_s`` (ppe-sor's do) are calibrated from it: here the rank had
    half its core in its bursts while the sensor read 1/3 over the window."""
    values = [2.9e-8, 3.0e-8, 3.1e-8]
    runs = []
    for k, b in enumerate(values):
        run = calibrating_run(t0, k, b, host="h2")
        for seg in run["report"]["ranks"][0]["segments"]:
            seg["cpu_s"] = seg["compute_s"] * 0.5
        runs.append(run)
    post_runs(env, runs)
    got = calibration(env, "h2")["calibrated"]
    assert got["benchmark"] == pytest.approx(3.0e-8 * 0.5 / SHARE)
    assert {r["share_source"] for r in got["runs"]} == {"cpu time"}
    assert all(r["share"] == pytest.approx(0.5) for r in got["runs"])


def test_calibration_of_a_host_without_runs_and_an_unknown_host(env, t0) -> None:  # type: ignore[no-untyped-def]
    cal = calibration(env, "h3")
    assert cal["calibrated"] is None and cal["used_by_planning"] is None and cal["runs_read"] == 0
    r = env.client.get("/api/v1/resources/nobody/calibration", headers=env.h("operator"))
    assert r.status_code == 404


def test_a_run_outside_the_sensed_window_gives_no_estimate(env, t0) -> None:  # type: ignore[no-untyped-def]
    far = calibrating_run(t0 - 10 * 3600, 0, 3e-8, host="h3")  # long before any cpu sample
    post_runs(env, [far])
    cal = calibration(env, "h3")
    assert cal["runs_read"] == 1 and cal["unusable_runs"] == 1 and cal["calibrated"] is None


def test_planning_uses_the_calibrated_benchmark_of_a_host_without_one(env, t0) -> None:  # type: ignore[no-untyped-def]
    register(env, "h2", {"memory_bytes": 1 << 30})  # registered, but no benchmark
    register(env, "h3", {"memory_bytes": 1 << 30})
    values = [2.9e-8, 3.0e-8, 3.1e-8]
    post_runs(env, [calibrating_run(t0, k, b) for k, b in enumerate(values)])
    post_runs(env, [calibrating_run(t0, k, 3e-8, host="h3") for k in range(2)])  # too few

    r = schedule(env, "mean", ["h2", "h1"])
    assert r.status_code == 200, r.text
    warnings = r.json()["warnings"]
    assert any("'h2'" in w and "calibrated from 3 reported runs" in w for w in warnings)
    # The same schedule as with the calibrated value given explicitly.
    cal = calibration(env, "h2")
    assert cal["used_by_planning"] == "calibrated"
    explicit = schedule(
        env, "mean", [{"name": "h2", "benchmark": cal["calibrated"]["benchmark"]}, "h1"]
    )
    assert explicit.status_code == 200, explicit.text
    rows = [(a["host"], a["rows"]) for a in r.json()["allocation"]]
    assert rows == [(a["host"], a["rows"]) for a in explicit.json()["allocation"]]
    assert not any("calibrated" in w for w in explicit.json()["warnings"])
    # Three times slower than h1 (2e-8 at the same availability): fewer rows.
    assert dict(rows)["h2"] < dict(rows)["h1"]

    r = schedule(env, "mean", ["h3", "h1"])
    assert r.status_code == 422
    reason = r.json()["detail"][0]["reason"]
    assert "no benchmark" in reason and "2 usable so far" in reason


def test_a_store_outage_leaves_the_rest_of_the_scrape(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker

    from ppe.service.accuracy import LiveCollector

    unreachable = create_engine(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    assert list(LiveCollector(sessionmaker(unreachable)).collect()) == []


# ------------------------------------------------------------------------ link bandwidth

LINK_LATENCY, LINK_BANDWIDTH = 2e-5, 5e8


def halo_run(k: int, n: int, hosts: tuple[str, str] = ("h2", "h3"), **extra: Any) -> dict[str, Any]:
    """A ppe-sor report whose two ranks exchanged halo rows of ``n + 2`` doubles: the rank on
    the second host found its neighbour waiting (the link's transfer time exactly), the first
    waited for it (slower)."""
    nbytes = (n + 2) * 8
    transfer = LINK_LATENCY + nbytes / LINK_BANDWIDTH

    def halo(peer: int, seconds: float) -> list[dict[str, Any]]:
        return [
            {
                "peer": peer,
                "bytes": nbytes,
                "exchanges": 400,
                "fast_s": seconds,
                "fast_sd": 0.0,
                "fast_n": 40,
                "min_s": seconds,
                "median_s": 3 * seconds,
            }
        ]

    ranks = [
        {"rank": 0, "host": hosts[0], "halo": halo(1, transfer + 5e-5)},
        {"rank": 1, "host": hosts[1], "halo": halo(0, transfer)},
    ]
    return {
        "app": "sor",
        "params": {"n": n, "iterations": 200, "p": 2},
        "system": ",".join(hosts),
        "values": [1.0],
        "report": {"ranks": ranks, **extra},
        "key": f"halo-{hosts[0]}-{hosts[1]}-{n}-{k}",
    }


def link(cal: dict[str, Any], peer: str) -> dict[str, Any]:
    found = [x for x in cal["bandwidth"]["links"] if x["peer"] == peer]
    assert len(found) == 1, cal["bandwidth"]
    return dict(found[0])


def test_link_bandwidth_from_two_sizes_by_hand(env, t0) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, [halo_run(k, n) for k, n in enumerate([300, 300, 1200, 1200])])
    cal = calibration(env, "h2")
    assert cal["bandwidth"]["estimated"] is True and cal["bandwidth"]["reason"] is None
    got = link(cal, "h3")
    assert got["bandwidth"] == pytest.approx(LINK_BANDWIDTH, rel=1e-6)
    assert got["latency"] == pytest.approx(LINK_LATENCY, rel=1e-6)
    assert got["latency_source"] == "fitted" and got["sizes"] == [2416, 9616]
    assert got["runs"] == 4 and got["measured_bandwidth"] is None
    # Unmeasured: compared with the default planning would assume (12.5 MB/s): far off.
    assert got["compared_with"] == "default" and got["agrees"] is False
    assert got["used_by_planning"] == "calibrated"
    # The other end of the link sees the same link.
    assert link(calibration(env, "h3"), "h2")["bandwidth"] == pytest.approx(got["bandwidth"])
    # A host whose runs carry no halo statistics says so.
    none = calibration(env, "h0")["bandwidth"]
    assert none["estimated"] is False and none["links"] == [] and "halo" in none["reason"]


def post_link(env: Any, metric: str, value: float, t0: float) -> None:
    items = [
        {"resource": "h2", "metric": metric, "peer": "h3", "timestamp": t0 + 10 * k, "value": value}
        for k in range(5)
    ]
    r = env.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200, r.text


def test_one_size_uses_the_sensors_latency_and_compares_with_their_bandwidth(env, t0) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, [halo_run(k, 1200) for k in range(3)])
    alone = link(calibration(env, "h2"), "h3")
    nbytes = 1202 * 8
    assert alone["latency_source"] == "not separated" and alone["latency"] is None
    assert alone["bandwidth"] == pytest.approx(nbytes / (LINK_LATENCY + nbytes / LINK_BANDWIDTH))
    post_link(env, "latency", LINK_LATENCY, t0)
    post_link(env, "bandwidth", 4e8, t0)
    got = link(calibration(env, "h2"), "h3")
    assert got["latency_source"] == "measured" and got["latency"] == pytest.approx(LINK_LATENCY)
    assert got["bandwidth"] == pytest.approx(LINK_BANDWIDTH)
    # Three identical runs: no spread, so no interval to judge the sensors' 400 MB/s by.
    assert got["measured_bandwidth"] == pytest.approx(4e8) and got["compared_with"] == "measured"
    assert got["agrees"] is None and got["used_by_planning"] == "measured"


def test_planning_uses_the_calibrated_bandwidth_of_an_unmeasured_link(env, t0) -> None:  # type: ignore[no-untyped-def]
    for h in ("h2", "h3"):
        register(env, h, {"benchmark": 2e-8})
    post_runs(env, [halo_run(k, n) for k, n in enumerate([300, 1200, 300])])

    def warnings(r: Any) -> list[str]:
        assert r.status_code == 200, r.text
        return [w for w in r.json()["warnings"] if "link" in w]

    r = schedule(env, "mean", ["h2", "h3"])
    notes = warnings(r)
    assert len(notes) == 1 and "'h2'-'h3'" in notes[0]
    assert "calibrated from 3 reported runs" in notes[0] and "latency fitted" in notes[0]
    # The same schedule as with the calibrated bandwidth given, which planning then takes.
    given = env.client.post(
        "/api/v1/schedules",
        json={
            "app": "sor",
            "n": N,
            "iterations": ITERATIONS,
            "hosts": ["h2", "h3"],
            "strategy": "mean",
            "bandwidth": LINK_BANDWIDTH,
        },
        headers=env.h("app"),
    )
    assert warnings(given) == []
    assert r.json()["makespan"]["mean"] == pytest.approx(given.json()["makespan"]["mean"])
    # The default (12.5 MB/s) would have planned a slower run than the calibrated link.
    slow = dict(
        app="sor", n=N, iterations=ITERATIONS, hosts=["h2", "h3"], strategy="mean", bandwidth=1.25e7
    )
    default = env.client.post("/api/v1/schedules", json=slow, headers=env.h("app"))
    assert default.status_code == 200, default.text
    assert default.json()["makespan"]["mean"] > r.json()["makespan"]["mean"]
    # Too few runs on h0-h1: the default, no warning.
    post_runs(env, [halo_run(k, n, ("h0", "h1")) for k, n in enumerate([300, 1200])])
    assert warnings(schedule(env, "mean", ["h0", "h1"])) == []
    # A sensor measures h2-h3 (one way round): its figures, not the runs'.
    post_link(env, "bandwidth", 4e8, t0)
    measured = schedule(env, "mean", ["h3", "h2"])
    assert warnings(measured) == []
    assert any(i.get("metric") == "bandwidth" for i in measured.json()["inputs"])
