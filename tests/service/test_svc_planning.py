"""Schedules, predictions and user models over HTTP, fed by real trace measurements."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.service import planning
from ppe.traces import read_trace

FILES = ["1.csv.gz", "2.csv.gz", "4.csv.gz"]


def feed(env, traces_dir):  # type: ignore[no-untyped-def]
    """Three hosts with 500 real cpu samples each and one measured link, no benchmarks."""
    items = []
    for i, f in enumerate(FILES):
        tr = read_trace(traces_dir / f)
        for t, v in zip(tr.timestamps[:500], tr.availability[:500], strict=True):
            items.append(
                {"resource": f"h{i}", "metric": "cpu", "timestamp": float(t), "value": float(v)}
            )
    t0 = items[0]["timestamp"]
    rng = np.random.default_rng(0)
    for k in range(100):
        items.append(
            {
                "resource": "h0",
                "metric": "bandwidth",
                "peer": "h1",
                "timestamp": t0 + 300 * k,
                "value": float(1e7 + 1e6 * rng.standard_normal()),
            }
        )
    r = env.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200, r.text
    return env


@pytest.fixture
def fed(env, traces_dir):  # type: ignore[no-untyped-def]
    """`feed`, and each host registered with a benchmark."""
    feed(env, traces_dir)
    for i, bench in enumerate((2e-8, 3e-8, 2.5e-8)):
        env.client.put(
            f"/api/v1/resources/h{i}",
            json={"properties": {"benchmark": bench}},
            headers=env.h("operator"),
        )
    return env


def schedule(env, **kw):  # type: ignore[no-untyped-def]
    body = {
        "app": "sor",
        "n": 2000,
        "iterations": 50,
        "hosts": ["h0", "h1", "h2"],
        "strategy": "mean",
        **kw,
    }
    return env.client.post("/api/v1/schedules", json=body, headers=env.h("app"))


def test_schedule_contract_and_log(fed) -> None:  # type: ignore[no-untyped-def]
    r = schedule(fed, strategy="conservative", k=2)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["strategy"] == "conservative"
    rows = [a["rows"] for a in body["allocation"]]
    assert sum(rows) == 2000
    ms = body["makespan"]
    assert ms["interval"][0] <= ms["mean"] <= ms["interval"][1]
    assert all(a["time"]["mean"] <= ms["interval"][1] for a in body["allocation"])
    assert any(i["metric"] == "bandwidth" and i["peer"] == "h1" for i in body["inputs"])
    listed = fed.client.get("/api/v1/schedules", headers=fed.h("operator")).json()
    assert listed[0]["id"] == body["id"]
    assert listed[0]["response"]["allocation"] == body["allocation"]


def test_every_strategy_serves(fed) -> None:  # type: ignore[no-untyped-def]
    import scheduler

    for strategy in scheduler.STRATEGIES:
        r = schedule(fed, strategy=strategy)
        assert r.status_code == 200, (strategy, r.text)
        assert sum(a["rows"] for a in r.json()["allocation"]) == 2000


def test_schedule_bad_requests(fed) -> None:  # type: ignore[no-untyped-def]
    assert schedule(fed, strategy="magic").status_code == 422
    assert schedule(fed, hosts=["h0", "nope"]).status_code == 404
    assert schedule(fed, hosts=["h0", "h0"]).status_code == 422
    assert schedule(fed, app="unknown-model").status_code == 422
    fed.client.put("/api/v1/resources/h9", json={"properties": {}}, headers=fed.h("operator"))
    r = schedule(fed, hosts=["h0", "h9"])
    assert r.status_code == 409  # registered, but never measured
    r = schedule(fed, hosts=[{"name": "h0", "max_rows": 10}, {"name": "h1", "max_rows": 10}])
    assert r.status_code == 422 and "feasible" in r.text
    assert fed.client.get("/api/v1/schedules", headers=fed.h("app")).json() == []


def test_schedule_checks_name_the_field(fed) -> None:  # type: ignore[no-untyped-def]
    """Checks the schema cannot make (planning.check_schedule) come first, in the same shape."""
    r = schedule(fed, strategy="magic", hosts=["h0", "nope"])
    assert r.status_code == 422
    assert [p["field"] for p in r.json()["detail"]] == ["strategy"]
    assert "choose from" in r.json()["detail"][0]["reason"]
    r = schedule(fed, select=True, current=[{"host": "h0", "rows": 2000}])
    assert r.status_code == 422
    assert [p["field"] for p in r.json()["detail"]] == ["select"]


def test_memory_bounds_a_strip(fed) -> None:  # type: ignore[no-untyped-def]
    # h0 can hold 100 rows of a 2000-wide grid of 8-byte elements.
    fed.client.put(
        "/api/v1/resources/h0",
        json={"properties": {"memory_bytes": 100 * 2000 * 8}},
        headers=fed.h("operator"),
    )
    r = schedule(fed)
    assert r.status_code == 200, r.text
    assert r.json()["allocation"][0]["rows"] <= 100


def test_prediction_matches_schedule_and_reports_inputs(fed) -> None:  # type: ignore[no-untyped-def]
    s = schedule(fed).json()
    alloc = [{"host": a["host"], "rows": a["rows"]} for a in s["allocation"]]
    r = fed.client.post(
        "/api/v1/predictions",
        headers=fed.h("app"),
        json={"model": "sor", "params": {"n": 2000, "iterations": 50}, "allocation": alloc},
    )
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["makespan"]["mean"] == pytest.approx(s["makespan"]["mean"], rel=0.05)
    cpu_inputs = [i for i in p["inputs"] if i["metric"] == "cpu"]
    assert {i["host"] for i in cpu_inputs} == {"h0", "h1", "h2"}
    assert all(i["samples"] == 500 and i["predictor"] for i in cpu_inputs)
    # each input's interval is the one the forecast endpoint answers for that horizon
    for i in cpu_inputs:
        f = fed.client.get(
            f"/api/v1/forecasts/{i['host']}/cpu?horizon={i['horizon_s']}", headers=fed.h("app")
        ).json()
        assert i["forecast"]["interval"] == pytest.approx(f["interval"], abs=1e-12)
        assert 0.0 <= f["interval"][0] <= f["interval"][1] <= 1.0


def test_user_model_roundtrip_and_bad_grammar(fed) -> None:  # type: ignore[no-untyped-def]
    h = fed.h("app")
    bad = fed.client.post(
        "/api/v1/models",
        headers=h,
        json={
            "name": "broken",
            "text": "param n\nHostTime[p] = rows[p] * Bogus[p]\nExecTime = max(p in hosts: HostTime[p])",
        },
    )
    assert bad.status_code == 422
    detail = bad.json()["detail"]
    assert any("Bogus" in (d.get("token") or d.get("name") or d["message"]) for d in detail)
    sor_text = next(
        m["text"] for m in fed.client.get("/api/v1/models", headers=h).json() if m["name"] == "sor"
    )
    ok = fed.client.post("/api/v1/models", headers=h, json={"name": "my-sor", "text": sor_text})
    assert ok.status_code == 201, ok.text
    assert "my-sor" in [m["name"] for m in fed.client.get("/api/v1/models", headers=h).json()]
    mine = schedule(fed, app="my-sor").json()
    builtin = schedule(fed, app="sor").json()
    assert [a["rows"] for a in mine["allocation"]] == [a["rows"] for a in builtin["allocation"]]


def test_schedule_as_of_past_ignores_later_data(fed, traces_dir) -> None:  # type: ignore[no-untyped-def]
    tr = read_trace(traces_dir / FILES[0])
    at = float(tr.timestamps[400])
    first = schedule(fed, at=at).json()
    items = [
        {"resource": "h0", "metric": "cpu", "timestamp": float(t), "value": 0.01}
        for t in tr.timestamps[500:520]
    ]
    fed.client.post("/api/v1/measurements", json={"measurements": items}, headers=fed.h("sensor"))
    again = schedule(fed, at=at).json()
    assert first["allocation"] == again["allocation"]
    assert first["makespan"] == again["makespan"]


def test_selection_drops_slow_host_behind_thin_link(fed) -> None:  # type: ignore[no-untyped-def]
    t0 = 1.372e9
    items = [
        {
            "resource": "h2",
            "metric": "bandwidth",
            "peer": p,
            "timestamp": t0 + 300 * k,
            "value": 2e3,
        }
        for k in range(30)
        for p in ("h0", "h1")
    ]
    fed.client.post("/api/v1/measurements", json={"measurements": items}, headers=fed.h("sensor"))
    fed.client.put(
        "/api/v1/resources/h2", json={"properties": {"benchmark": 4e-7}}, headers=fed.h("operator")
    )
    plain = schedule(fed).json()
    chosen = schedule(fed, select=True).json()
    hosts = [a["host"] for a in chosen["allocation"] if a["rows"] > 0]
    assert "h2" not in hosts
    assert chosen["makespan"]["mean"] <= plain["makespan"]["mean"]


def test_repeat_schedule_reuses_plan_until_data_changes(fed, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Same request over unchanged data: one plan, answers logged separately, ages current;
    a new measurement on one host makes a new plan that sees it."""
    calls = []
    real_plan = planning.plan

    def counting_plan(*a, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real_plan(*a, **kw)

    monkeypatch.setattr(planning, "plan", counting_plan)
    first, second = schedule(fed).json(), schedule(fed).json()
    assert len(calls) == 1
    assert first["id"] != second["id"]
    assert first["allocation"] == second["allocation"] and first["makespan"] == second["makespan"]
    age = {(i["host"], i["metric"]): i["age_s"] for i in first["inputs"]}
    assert all(i["age_s"] > age[(i["host"], i["metric"])] for i in second["inputs"])
    assert schedule(fed, strategy="conservative").status_code == 200
    assert len(calls) == 2  # another strategy is another plan

    h1 = fed.client.get("/api/v1/forecasts/h1/cpu", headers=fed.h("app")).json()
    t = h1["last_timestamp"]
    slow = [
        {"resource": "h1", "metric": "cpu", "timestamp": t + 300 * (k + 1), "value": 0.02}
        for k in range(12)
    ]
    r = fed.client.post(
        "/api/v1/measurements", json={"measurements": slow}, headers=fed.h("sensor")
    )
    assert r.status_code == 200, r.text
    third = schedule(fed).json()
    assert len(calls) == 3
    rows = {a["host"]: a["rows"] for a in third["allocation"]}
    before = {a["host"]: a["rows"] for a in first["allocation"]}
    assert rows["h1"] < before["h1"]


def test_new_link_and_new_properties_show_up_at_once(fed) -> None:  # type: ignore[no-untyped-def]
    """The worker caches which series and properties a host set has; its own writes clear it."""

    def links(body: dict) -> set:  # type: ignore[type-arg]
        return {(i["host"], i["peer"]) for i in body["inputs"] if i["metric"] == "bandwidth"}

    first = schedule(fed).json()
    assert ("h1", "h2") not in links(first)
    t0 = 1.6e9
    items = [
        {
            "resource": "h1",
            "metric": "bandwidth",
            "peer": "h2",
            "timestamp": t0 + 300 * k,
            "value": 2e6,
        }
        for k in range(50)
    ]
    r = fed.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=fed.h("sensor")
    )
    assert r.status_code == 200, r.text
    second = schedule(fed).json()
    assert ("h1", "h2") in links(second)
    fed.client.put(
        "/api/v1/resources/h2",
        json={"properties": {"benchmark": 2.5e-7}},
        headers=fed.h("operator"),
    )
    third = schedule(fed).json()
    rows = {a["host"]: a["rows"] for a in third["allocation"]}
    before = {a["host"]: a["rows"] for a in second["allocation"]}
    assert rows["h2"] < before["h2"] / 3  # ten times slower per element now


def test_monte_carlo_strategies_sample_hosts_jointly(fed, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`expected` gets the hosts' measured dependence (forecaster.co_movement over their
    stored cpu series); balancing strategies do not need it; a worker reuses it for a while
    instead of recomputing it for every new sample."""
    import ppe.service.forecasts as forecasts_mod

    seen: list[int] = []
    real = forecasts_mod.co_movement

    def spy(series, now, horizon, **kw):  # type: ignore[no-untyped-def]
        seen.append(len(series))
        out = real(series, now, horizon, **kw)
        assert out.shape == (len(series), len(series))
        assert max(float(ts.max()) for ts, _ in series) < now  # the past only
        return out

    monkeypatch.setattr(forecasts_mod, "co_movement", spy)
    assert schedule(fed, strategy="mean").status_code == 200
    assert seen == []
    assert schedule(fed, strategy="expected").status_code == 200
    assert seen and set(seen) == {3}
    calls = len(seen)
    h1 = fed.client.get("/api/v1/forecasts/h1/cpu", headers=fed.h("app")).json()
    new = [
        {"resource": "h1", "metric": "cpu", "timestamp": h1["last_timestamp"] + 300, "value": 0.9}
    ]
    assert (
        fed.client.post(
            "/api/v1/measurements", json={"measurements": new}, headers=fed.h("sensor")
        ).status_code
        == 200
    )
    assert schedule(fed, strategy="expected").status_code == 200  # a new plan ...
    assert len(seen) == calls  # ... on the dependence measured a moment ago
    past = schedule(fed, strategy="expected", at=h1["last_timestamp"])
    assert past.status_code == 200, past.text
    assert len(seen) > calls  # as of a past time: measured from the rows before it


def test_a_running_application_asks_again(fed) -> None:  # type: ignore[no-untyped-def]
    first = schedule(fed, strategy="expected", replan_every_s=300)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["horizon_s"] == 300 and body["rounds"] == 1  # forecasts to the next check
    assert "replan" not in body
    rows = [{"host": a["host"], "rows": a["rows"]} for a in body["allocation"]]
    # a third of the run done, on the rows it was given: nothing worth moving
    same = schedule(fed, strategy="expected", replan_every_s=300, iterations=35, current=rows)
    assert same.status_code == 200, same.text
    assert same.json()["replan"]["move"] is False
    # the whole grid on one host: moving pays, and the answer says what keeping would cost
    lopsided = [{"host": "h0", "rows": 2000}, {"host": "h1", "rows": 0}, {"host": "h2", "rows": 0}]
    again = schedule(
        fed, strategy="expected", replan_every_s=300, iterations=35, current=lopsided
    ).json()
    verdict = again["replan"]
    assert verdict["move"] is True and verdict["migration_s"] > 0
    assert verdict["keep"]["mean"] > 1.5 * again["makespan"]["mean"]
    assert sum(a["rows"] for a in again["allocation"]) == 2000


@pytest.mark.parametrize(
    ("current", "extra", "field"),
    [
        ([{"host": "h0", "rows": 2000}, {"host": "h1", "rows": 0}], {}, "current"),  # h2 missing
        (
            [{"host": "h0", "rows": 1000}, {"host": "h1", "rows": 500}, {"host": "h2", "rows": 0}],
            {},
            "current",
        ),  # rows lost
        (
            [{"host": "h0", "rows": 2000}, {"host": "h0", "rows": 0}, {"host": "h2", "rows": 0}],
            {},
            "current",
        ),
        (
            [{"host": "h0", "rows": 2000}, {"host": "h1", "rows": 0}, {"host": "h2", "rows": 0}],
            {"select": True},
            "select",
        ),
        (
            [{"host": "h0", "rows": -1}, {"host": "h1", "rows": 2001}, {"host": "h2", "rows": 0}],
            {},
            "current",
        ),
    ],
)
def test_bad_current_rows_are_refused(fed, current, extra, field) -> None:  # type: ignore[no-untyped-def]
    before = len(fed.client.get("/api/v1/schedules", headers=fed.h("operator")).json())
    r = schedule(fed, current=current, **extra)
    assert r.status_code == 422, r.text
    assert field in r.text
    assert len(fed.client.get("/api/v1/schedules", headers=fed.h("operator")).json()) == before
