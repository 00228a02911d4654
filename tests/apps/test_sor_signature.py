"""ppe-sor --signature: trace a run, take its PAS2P signature, run only that, predict the run."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ppe.pas2p import logical_trace, read_traces, signature
from ppe.pas2p.execution import SETUP, execution_plan
from ppe.pas2p.report import to_dict
from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.probes import ProbeSpec, run_probe
from ppe.service.probing import PROBE_MAX_ELEMENTS, probe_strip
from tests.apps.conftest import run_sor
from tests.service.conftest import Env, make_tokens

pytestmark = pytest.mark.slow

RUN = ("--offline", "--n", "48", "--iterations", "30", "--tolerance", "1e-30")


@pytest.fixture(scope="module")
def sig_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("sig")
    run = run_sor(2, *RUN, "--trace", str(tmp / "t.jsonl"))
    assert run.code == 0, run.stderr
    events = read_traces([tmp / "t.jsonl.0", tmp / "t.jsonl.1"])
    # one phase per shape whatever the jitter: set-up, the first half-sweep, steady, residual
    # half-sweeps (iterations 10 and 20), the last one
    sig = signature(logical_trace(events), keep=1.0, tolerance=math.inf)
    path = tmp / "sig.json"
    path.write_text(json.dumps(to_dict(sig)))
    return path


def test_signature_runs_each_kept_phase_and_predicts_the_run(sig_file: Path) -> None:
    analysis = json.loads(sig_file.read_text())
    kept = [p for p in analysis["phases"] if p["kept"]]
    weights = sorted(p["weight"] for p in kept)
    assert sum(weights) == 1 + 60  # the set-up and the 60 half-sweeps
    run = run_sor(
        2, *RUN, "--signature", str(sig_file), "--repeats", "2", "--warmup", "1", "--settle", "0"
    )
    assert run.code == 0, run.stderr
    out = run.summary
    # the phases seen once (the last half-sweep) are scaled, not run
    timed = [p for p in kept if p["step"] != SETUP and p["weight"] > 1]
    run_ids = {p["id"] for p in kept if p["step"] == SETUP or p["weight"] > 1}
    assert len(run_ids) < len(kept)
    # each phase's typical step as often as the plan says (at most twice, within half its
    # share of the run: tests/pas2p/test_pas2p_execution.py), each time right after the step
    # before it (untimed, except before step 0)
    plan = execution_plan(analysis, repeats=2, warmup=1)
    runs = {p.id: plan.runs(p) for p in plan.steps}
    assert set(runs) == {p["id"] for p in timed}
    warm = sum(r > 1 for r in runs.values())  # an untimed first round of those timed twice
    assert out["steps"] == warm + sum(runs[p["id"]] * (2 if p["step"] > 0 else 1) for p in timed)
    assert {p["id"] for p in out["phases"]} == run_ids
    for p in out["phases"]:
        assert p["runs"] == (1 if p["step"] == SETUP else runs[p["id"]])
        assert all(t > 0 for t in p["times_s"])
    total = sum(p["weight"] * p["mean_s"] for p in out["phases"])
    assert out["predicted_s"] == pytest.approx(total + out["left_out_s"])
    low, high = out["interval_s"]
    assert low <= out["predicted_s"] <= high
    assert [r["rows"] for r in out["ranks"]] == [24, 24]
    assert all(r["benchmark"] > 0 for r in out["ranks"])


def test_settling_runs_untimed_rounds_first_at_most_as_many_steps_as_the_run(
    sig_file: Path,
) -> None:
    """``--settle`` far beyond the run: the untimed rounds stop at the half-sweeps of the
    phases run (not the last, which occurs once and is scaled), and the timed steps are those
    of a run without settling."""
    analysis = json.loads(sig_file.read_text())
    timed = [p for p in analysis["phases"] if p["kept"] and p["step"] != SETUP and p["weight"] > 1]
    plan = execution_plan(analysis, repeats=2, warmup=1)
    runs = {p.id: plan.runs(p) for p in plan.steps}
    warm = sum(r > 1 for r in runs.values())
    args = ("--signature", str(sig_file), "--repeats", "2", "--warmup", "1", "--settle", "1e6")
    run = run_sor(2, *RUN, *args)
    assert run.code == 0, run.stderr
    out = run.summary
    timed_steps = sum(runs[p["id"]] * (2 if p["step"] > 0 else 1) for p in timed)
    half_sweeps = sum(p["weight"] for p in timed)
    assert half_sweeps < 60
    assert out["steps"] == warm * (half_sweeps // warm) + timed_steps
    assert all(p["runs"] == runs.get(p["id"], 1) for p in out["phases"])
    bad = run_sor(1, *RUN, "--signature", str(sig_file), "--settle", "-1")
    assert bad.code != 0 and "--settle" in bad.stderr


def test_a_probe_holds_the_rows_it_is_given(sig_file: Path) -> None:
    run = run_sor(1, *RUN, "--signature", str(sig_file), "--rows", "12", "--hosts", "h0")
    assert run.code == 0, run.stderr
    assert run.summary["ranks"][0]["rows"] == 12
    assert run.summary["ranks"][0]["host"] == "h0"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rows", "30"), "more than the 48"),
        (("--iterations", "5"), "half-sweeps 0..9"),
        (("--repeats", "0"), "--repeats"),
    ],
)
def test_bad_signature_runs_are_refused(
    sig_file: Path, args: tuple[str, ...], message: str
) -> None:
    base = [a for a in RUN]
    if "--iterations" in args:
        base[base.index("--iterations") + 1] = args[1]
        args = ()
    run = run_sor(2, *base, "--signature", str(sig_file), *args)
    assert run.code == 2
    assert message in run.stderr


def test_a_file_that_is_not_a_signature_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"phases": []}')
    run = run_sor(2, *RUN, "--signature", str(bad))
    assert run.code == 2
    assert "not a signature" in run.stderr or "keeps no phase" in run.stderr


def probe_spec(sig_file: Path, host: str = "h0") -> ProbeSpec:
    return ProbeSpec(
        "sor",
        json.loads(sig_file.read_text()),
        {"iterations": 30, "tolerance": 1e-30},
        host,
        n=48,
        rows=24,
    )


def test_the_service_s_probe_reads_the_host_s_speed(sig_file: Path) -> None:
    out = run_probe(probe_spec(sig_file), "mpiexec -n 1", timeout_s=120)
    assert out.ok, out.error
    assert out.benchmark is not None and out.benchmark > 0
    assert out.result is not None and out.result["ranks"][0]["rows"] == 24
    record = out.record()
    assert record["benchmark"] == out.benchmark and record["phases"]


@pytest.mark.parametrize(
    ("launcher", "timeout", "message"),
    [
        ("no-such-launcher -n 1", 60, "could not start"),
        ("false", 60, "exited with 1"),
        (f"{sys.executable} -c 'import time; time.sleep(30)'", 0.5, "ran over 0.5 s"),
    ],
)
def test_a_failed_probe_is_an_outcome(
    sig_file: Path, launcher: str, timeout: float, message: str
) -> None:
    out = run_probe(probe_spec(sig_file), launcher, timeout_s=timeout)
    assert not out.ok and out.benchmark is None
    assert out.error is not None and message in out.error


def test_a_probe_of_an_unknown_program_fails_cleanly(sig_file: Path) -> None:
    spec = probe_spec(sig_file)
    out = run_probe(
        ProbeSpec("nbody", spec.analysis, spec.parameters, "h0", 48, 24), "mpiexec -n 1", 60
    )
    assert not out.ok and out.error is not None and "no probe program" in out.error


def probe_env(db_url: str, launcher: str) -> Iterator[Env]:
    tokens = make_tokens(db_url)
    settings = Settings(database_url=db_url, probe_launcher=launcher, probe_timeout_s=120)
    with TestClient(create_app(settings)) as client:
        env = Env(client, db_url, tokens)
        now = time.time()
        # h0's sensor saw half a core just before any probe; h1's readings are older than the
        # two minutes a probe looks back
        items = [
            {"resource": "h0", "metric": "cpu", "timestamp": now - 100 + 5 * i, "value": 0.5}
            for i in range(20)
        ] + [
            {"resource": "h1", "metric": "cpu", "timestamp": now - 900 + 30 * i, "value": 0.9}
            for i in range(20)
        ]
        r = client.post(
            "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
        )
        assert r.status_code == 200, r.text
        yield env


@pytest.fixture
def served(db_url: str) -> Iterator[Env]:
    yield from probe_env(db_url, "mpiexec -n 1")


@pytest.fixture
def broken(db_url: str) -> Iterator[Env]:
    yield from probe_env(db_url, "false")


def post_signature(env: Env, sig_file: Path) -> None:
    body = {
        "name": "sor-small",
        "app": "sor",
        "parameters": {"iterations": 30, "tolerance": 1e-30},
        "ranks": 2,
        "analysis": json.loads(sig_file.read_text()),
    }
    body["analysis"]["tolerance"] = None  # infinite: JSON has no infinity
    r = env.client.post("/api/v1/signatures/phases", json=body, headers=env.h("operator"))
    assert r.status_code == 201, r.text


def probe_schedule(env: Env, **kw: Any) -> Any:
    body = {"app": "sor", "n": 48, "iterations": 30, "hosts": ["h0", "h1"], **kw}
    return env.client.post("/api/v1/schedules", json=body, headers=env.h("app"))


def test_a_schedule_plans_with_the_speeds_its_probes_measured(served: Env, sig_file: Path) -> None:
    post_signature(served, sig_file)
    first = probe_schedule(served, probe="signature")
    assert first.status_code == 200, first.text
    out = first.json()
    probes = {p["host"]: p for p in out["probes"]}
    assert {p["status"] for p in probes.values()} == {"ok"} and not any(
        p["reused"] for p in probes.values()
    )
    # h0 ran at half a core: its dedicated speed is half what the probe measured
    assert probes["h0"]["cpu_share"] == pytest.approx(0.5)
    assert probes["h0"]["benchmark"] == pytest.approx(probes["h0"]["measured_benchmark"] / 2)
    assert probes["h1"]["cpu_share"] is None
    assert probes["h1"]["benchmark"] == probes["h1"]["measured_benchmark"]
    speeds = {a["host"]: a["speed"] for a in out["allocation"]}
    assert {s["source"] for s in speeds.values()} == {"probe"}
    assert speeds["h0"]["benchmark"] == pytest.approx(probes["h0"]["benchmark"])
    assert any("signature probe" in w and "'h0'" in w for w in out["warnings"])
    stored = served.client.get(
        "/api/v1/signatures/phases/sor-small/probes", headers=served.h("app")
    ).json()
    assert {p["host"] for p in stored} == {"h0", "h1"}
    # a second request within probe_max_age_s reuses them; 0 probes anew
    again = probe_schedule(served, probe="signature").json()
    assert all(p["reused"] for p in again["probes"])
    assert {p["probe_id"] for p in again["probes"]} == {p["probe_id"] for p in probes.values()}
    fresh = probe_schedule(served, probe="signature", probe_max_age_s=0).json()
    assert not any(p["reused"] for p in fresh["probes"])
    # the request's own benchmark wins: that host is not probed
    given = probe_schedule(
        served, probe="signature", hosts=[{"name": "h0", "benchmark": 1e-8}, "h1"]
    ).json()
    assert [p["host"] for p in given["probes"]] == ["h1"]


def test_a_failed_probe_leaves_the_host_unprobed(broken: Env, sig_file: Path) -> None:
    post_signature(broken, sig_file)
    put = {"properties": {"benchmark": 3e-8}}
    for h in ("h0", "h1"):
        r = broken.client.put(f"/api/v1/resources/{h}", json=put, headers=broken.h("operator"))
        assert r.is_success
    r = probe_schedule(broken, probe="signature")
    assert r.status_code == 200, r.text
    out = r.json()
    assert {p["status"] for p in out["probes"]} == {"failed"}
    assert {a["speed"]["source"] for a in out["allocation"]} == {"registered"}
    assert sum("unprobed" in w for w in out["warnings"]) == 2


def test_probing_without_a_signature_of_the_app_is_refused(served: Env) -> None:
    r = probe_schedule(served, probe="signature")
    assert r.status_code == 422
    assert "no phase signature of app 'sor'" in r.text
    r = probe_schedule(served, probe="signature", probe_signature="nope")
    assert r.status_code == 422 and "nope" in r.text


def test_a_probe_strip_is_the_even_share_capped() -> None:
    assert probe_strip(1000, 3) == (1000, 334)
    cols, rows = probe_strip(100_000, 2)  # 50 000 rows of 100 000: over the cap
    assert cols == 100_000 and rows == PROBE_MAX_ELEMENTS // 100_000
    assert probe_strip(10_000_000, 4) == (PROBE_MAX_ELEMENTS, 1)
