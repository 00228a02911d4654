"""Recalibrated intervals over HTTP, on SQLite and PostgreSQL: a schedule served, runs reported
against it, the next answers widened by hand-computed bounds; not before `min_runs` runs, not
by runs stored after the answer's time, and not when the setting turns it off."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.recalibration import RecalibrationPolicy, app_recalibration
from ppe.service.store.db import make_engine, make_sessionmaker
from tests.service.test_svc_accuracy import (
    N,
    linked,
    post_measurements,
    post_runs,
    register,
    schedule,
    served,
)

ROOT = Path(__file__).resolve().parents[2]
#: log(actual / predicted) of the first eight runs; the largest |.| is 0.6
LOGS = [0.1, -0.2, 0.3, -0.35, 0.45, -0.5, 0.55, -0.6]


@pytest.fixture
def t0(env: Any) -> float:
    start = time.time() - 3700
    post_measurements(env, start)
    for h in ("h0", "h1"):
        register(env, h, {"benchmark": 2e-8})
    return start


def runs_against(
    sid: int, mean: float, logs: list[float], tag: str = "run"
) -> list[dict[str, Any]]:
    """One run per log error, each its own key (equal contents would be one run)."""
    return [{**linked(sid, mean * math.exp(x)), "key": f"{tag}-{i}"} for i, x in enumerate(logs)]


def widened_part(answer: dict[str, Any]) -> list[str]:
    return [w for w in answer["warnings"] if w.startswith("makespan interval widened")]


def test_widened_from_the_eighth_run_on_by_hand(env, t0) -> None:  # type: ignore[no-untyped-def]
    sid, m = served(env, "mean")
    post_runs(env, runs_against(sid, m["mean"], LOGS[:7]))
    r = schedule(env, "mean").json()
    assert r["makespan"]["interval"] == m["interval"] and "recalibrated" not in r["makespan"]
    assert widened_part(r) == []  # seven runs: fewer than the 8 the setting asks for

    post_runs(env, runs_against(sid, m["mean"], LOGS[7:], tag="eighth"))
    r = schedule(env, "mean").json()
    got = r["makespan"]
    mean = got["mean"]
    # n = 8 at 95 %: rank ceil(9 x 0.95) = 9 > 8, so the largest |log ratio|, 0.6.
    assert got["recalibrated"]["runs"] == 8 and got["recalibrated"]["rank"] == 8
    assert got["recalibrated"]["guaranteed"] is False
    assert got["recalibrated"]["log_bound"] == pytest.approx(0.6)
    lo, hi = got["model_interval"]
    assert [lo, hi] == pytest.approx(m["interval"])  # the model's own, kept beside it
    want = [min(lo, mean * math.exp(-0.6)), max(hi, mean * math.exp(0.6))]
    assert got["interval"] == pytest.approx(want)
    assert got["interval"][0] < lo and got["interval"][1] > hi  # really wider
    assert got["recalibrated"]["factor"] == pytest.approx((want[1] - want[0]) / (hi - lo))
    [note] = widened_part(r)
    assert "from 8 reported runs of this application and strategy" in note
    assert "8 runs are fewer than the 19 a 95% conformal bound needs" in note

    # The served log keeps what was served: live accuracy judges the widened interval.
    stored = env.client.get(f"/api/v1/schedules/{r['id']}", headers=env.h("operator")).json()
    assert stored["response"]["makespan"]["interval"] == pytest.approx(want)


def test_other_strategies_and_predictions_fall_back_to_the_application(env, t0) -> None:  # type: ignore[no-untyped-def]
    sid, m = served(env, "mean")
    post_runs(env, runs_against(sid, m["mean"], LOGS))
    r = schedule(env, "conservative").json()
    assert r["makespan"]["recalibrated"]["scope"] == "app"
    assert "of this application: " in widened_part(r)[0]

    rows = N // 2
    body = {"allocation": [{"host": "h0", "rows": rows}, {"host": "h1", "rows": N - rows}]}
    p = env.client.post(
        "/api/v1/predictions", json={**body, "params": {"I": 10}}, headers=env.h("app")
    )
    assert p.status_code == 200, p.text
    got = p.json()["makespan"]
    assert got["recalibrated"]["scope"] == "app" and got["recalibrated"]["runs"] == 8
    assert got["interval"][1] == pytest.approx(
        max(got["model_interval"][1], got["mean"] * 1.8221188)
    )
    # Grammar text names no application: nothing to recalibrate from.
    text = (ROOT / "ppe" / "core" / "models" / "sor.ppg").read_text()
    g = env.client.post(
        "/api/v1/predictions",
        json={**body, "grammar": text, "params": {"I": 10}},
        headers=env.h("app"),
    )
    assert g.status_code == 200, g.text
    assert "recalibrated" not in g.json()["makespan"]


def test_runs_stored_after_the_answer_time_are_not_used(env, t0) -> None:  # type: ignore[no-untyped-def]
    sid, m = served(env, "mean")
    post_runs(env, runs_against(sid, m["mean"], [0.1, -0.1] * 4))
    cut = time.time()
    while time.time() <= cut:  # the next runs are stored strictly after `cut`
        time.sleep(0.001)
    post_runs(env, runs_against(sid, m["mean"], [1.5] * 8, tag="late"))

    engine = make_engine(env.url)
    try:
        with make_sessionmaker(engine)() as session:
            policy = RecalibrationPolicy()
            before = app_recalibration(session, "sor", "mean", 0.95, cut, policy)
            now = app_recalibration(session, "sor", "mean", 0.95, time.time() + 1, policy)
    finally:
        engine.dispose()
    assert before is not None and before.runs == 8 and before.q == pytest.approx(0.1)
    assert now is not None and now.runs == 16 and now.q == pytest.approx(1.5)

    # The same over HTTP: an answer as of `cut` reads the runs stored before it only.
    body = {"app": "sor", "n": N, "iterations": 10, "hosts": ["h0", "h1"], "strategy": "mean"}
    r = env.client.post("/api/v1/schedules", json={**body, "at": cut}, headers=env.h("app"))
    assert r.status_code == 200, r.text
    rec = r.json()["makespan"].get("recalibrated")
    assert rec["runs"] == 8 and rec["log_bound"] == pytest.approx(0.1)
    live = schedule(env, "mean").json()["makespan"]["recalibrated"]
    assert live["runs"] == 16 and live["log_bound"] == pytest.approx(1.5)


class OwnEnv:
    """The helpers' shape (client, h) over an app with its own settings."""

    def __init__(self, client: TestClient, tokens: dict[str, str]) -> None:
        self.client, self.tokens = client, tokens

    def h(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}


def serve_after_runs(db_url: str, tokens: dict[str, str], **settings: Any) -> tuple[Any, Any]:
    """On an app with ``settings``: a schedule, the eight LOGS runs against it, the next one."""
    app = create_app(Settings(database_url=db_url, **settings))
    with TestClient(app) as client:
        e = OwnEnv(client, tokens)
        post_measurements(e, time.time() - 3700)
        for host in ("h0", "h1"):
            register(e, host, {"benchmark": 2e-8})
        sid, m = served(e, "mean")
        post_runs(e, runs_against(sid, m["mean"], LOGS))
        return m, schedule(e, "mean").json()


def test_the_setting_turns_it_off(db_url: str, env_tokens_factory) -> None:  # type: ignore[no-untyped-def]
    _, r = serve_after_runs(db_url, env_tokens_factory(db_url), recalibration_min_runs=0)
    assert "recalibrated" not in r["makespan"] and widened_part(r) == []


def test_the_scaled_score_by_hand(db_url: str, env_tokens_factory) -> None:  # type: ignore[no-untyped-def]
    m, r = serve_after_runs(db_url, env_tokens_factory(db_url), recalibration_score="scaled")
    mean, (lo, hi) = m["mean"], m["interval"]
    up, down = math.log(hi / mean), math.log(mean / lo)
    q = max(x / up if x > 0 else -x / down for x in LOGS)  # rank 9 > 8: the largest score
    got = r["makespan"]
    assert got["recalibrated"]["score"] == "scaled"
    assert got["recalibrated"]["log_bound"] == pytest.approx(q)
    want = [min(lo, mean * (lo / mean) ** q), max(hi, mean * (hi / mean) ** q)]
    assert got["interval"] == pytest.approx(want)
    assert "times their interval's log half-width" in widened_part(r)[0]


def test_an_unknown_score_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PPE_RECALIBRATION_SCORE", "median")
    with pytest.raises(ValueError, match="ratio or scaled"):
        Settings.from_env()
    monkeypatch.setenv("PPE_RECALIBRATION_SCORE", "scaled")
    monkeypatch.setenv("PPE_RECALIBRATION_MIN_RUNS", "12")
    got = Settings.from_env()
    assert (got.recalibration_score, got.recalibration_min_runs) == ("scaled", 12)
