"""The What-if page and what it calls, as the page calls it (session cookie, CSRF header, our
origin): the page and its controls, the shipped examples, a spec's problems with their line,
column and suggestion, a small spec answered with its table's data and plots, a sweep run as a
job and opened again with its band, and nothing changed by a check or a forged call."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ppe.service.api.whatif import EXAMPLE_SPEC
from ppe.service.dashboard.whatif_data import DATA_PATH, EXAMPLES_DIR

from .conftest import ORIGIN, Dash
from .test_dash_pages import parse

SMALL = EXAMPLE_SPEC.replace('title = "4 nodes at 1 Gflop/s, SOR"', 'title = "4 nodes"')

SWEEP = SMALL.replace("number = 4", 'number = "8..128 x2"')  # five points: a job


def call(dash: Dash, method: str, path: str, **kw: Any) -> Any:
    """An API call as the page's fetch() makes it."""
    headers = {"X-PPE-CSRF": dash.form_csrf("/whatif"), "Origin": ORIGIN}
    return dash.client.request(method, path, headers=headers, **kw)


@pytest.fixture
def signed_in(dash_db: Dash) -> Dash:
    dash_db.login("operator")
    return dash_db


def test_the_page_renders_its_editor_and_controls(signed_in: Dash) -> None:
    r = signed_in.client.get("/whatif")
    assert r.status_code == 200
    html = r.text
    assert '<a href="/whatif" aria-current="page">What-if</a>' in html
    m = parse(html)
    tags = {c["id"]: c["_tag"] for c in m.controls}
    assert tags["spec"] == "textarea" and tags["strategy"] == "select"
    assert {"confidence", "example"} <= set(tags)
    assert [b["_text"] for b in m.buttons if b.get("id")] == [
        "The hosts I have now",
        "Validate",
        "Run (analytic)",
    ]
    assert 'value="mean" selected' in html and 'value="conservative"' in html
    assert f'data-examples="{DATA_PATH}"' in html
    scripts = [v for tag, _, v in m.refs if tag == "script"]
    assert any(s.startswith("/dashboard/vendor/plotly.min.js") for s in scripts)
    assert any("/whatif.js" in s for s in scripts)
    assert signed_in.client.get("/whatif?job=3").status_code == 200


def test_the_examples_are_the_shipped_specs_the_service_can_check(signed_in: Dash) -> None:
    assert signed_in.client.get(DATA_PATH).status_code == 401  # the cookie alone: no
    r = call(signed_in, "GET", DATA_PATH)
    assert r.status_code == 200, r.text
    by_name = {e["name"]: e for e in r.json()}
    assert {"homogeneous.toml", "heterogeneous.toml", "script.toml"} <= set(by_name)
    assert "simgrid.toml" not in by_name  # a platform file: for `ppe whatif --simgrid` only
    home = by_name["homogeneous.toml"]
    assert home["spec"] == (EXAMPLES_DIR / "homogeneous.toml").read_text()
    assert home["title"] == "16 dedicated nodes, 1 Gb/s, SOR on a 4000 x 4000 grid"
    checked = call(signed_in, "POST", "/api/v1/whatif/validate", json={"spec": home["spec"]})
    assert checked.status_code == 200 and checked.json()["points"] == 1


def test_validation_names_line_column_field_and_the_nearest_name(signed_in: Dash) -> None:
    bad = SMALL.replace('floatspeed = "1 Gflop/s"', 'floatsped = "1 Gflop/s"').replace(
        'across = "node"', 'across = "nodes"'
    )
    r = call(signed_in, "POST", "/api/v1/whatif/validate", json={"spec": bad})
    assert r.status_code == 422, r.text
    problems = {p["field"]: p for p in r.json()["detail"]}
    typo = problems["nodeset[0].floatsped"]
    assert (typo["line"], typo["column"]) == (6, 1)
    assert "did you mean 'floatspeed'?" in typo["reason"]
    across = next(p for f, p in problems.items() if f.startswith("linkset[0].across"))
    assert across["line"] == 11 and "nodes" in across["reason"]
    ok = call(signed_in, "POST", "/api/v1/whatif/validate", json={"spec": SMALL})
    assert ok.status_code == 200
    assert ok.json() == {
        "valid": True,
        "title": "4 nodes",
        "axes": [],
        "points": 1,
        "nodes": 4,
        "job": False,
    }
    # not TOML at all: one problem at its line
    r = call(signed_in, "POST", "/api/v1/whatif/validate", json={"spec": "[[nodeset]\n"})
    assert r.status_code == 422 and r.json()["detail"][0]["line"] == 1
    assert call(signed_in, "GET", "/api/v1/whatif").json() == []  # a check queues nothing


def test_a_check_without_the_pages_csrf_header_is_refused(signed_in: Dash) -> None:
    r = signed_in.client.post(
        "/api/v1/whatif/validate", json={"spec": SMALL}, headers={"Origin": ORIGIN}
    )
    assert r.status_code == 401
    r = signed_in.client.post("/api/v1/whatif", json={"spec": SWEEP}, headers={"Origin": ORIGIN})
    assert r.status_code == 401
    assert call(signed_in, "GET", "/api/v1/whatif").json() == []


def test_a_small_spec_is_answered_with_its_table_and_plots(signed_in: Dash) -> None:
    r = call(signed_in, "POST", "/api/v1/whatif?figures=true", json={"spec": SMALL})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["id"] is None and out["status"] == "done"
    (point,) = out["report"]["points"]
    lo, hi = point["makespan"]["interval"]
    assert 0 < lo <= point["makespan"]["mean"] <= hi
    (ns,) = point["nodesets"]
    assert ns["nodeset"] == "node" and ns["nodes"] == 4 and ns["rows"] == 1000
    lo_rows, hi_rows = ns["rows_per_node"]  # time-balanced: the chain's ends talk to one side
    assert 0 < lo_rows <= 250 <= hi_rows
    (bars,) = out["figures"]
    assert bars["layout"]["barmode"] == "stack"
    assert [t["name"] for t in bars["data"]] == ["compute", "communication", "waiting"]
    assert bars["data"][0]["y"] == [pytest.approx(ns["compute_s"])]


def wait_done(dash: Dash, job_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job: dict[str, Any] = call(dash, "GET", f"/api/v1/whatif/{job_id}").json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.2)
    raise TimeoutError(job_id)


def test_a_sweep_runs_as_a_job_that_opens_again_with_its_band(signed_in: Dash) -> None:
    r = call(
        signed_in,
        "POST",
        "/api/v1/whatif?figures=true",
        json={"spec": SWEEP, "strategy": "conservative"},
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    assert wait_done(signed_in, job_id)["status"] == "done"
    (listed,) = call(signed_in, "GET", "/api/v1/whatif").json()
    assert listed["id"] == job_id and listed["done"] == listed["total"] == 5
    assert listed["options"]["strategy"] == "conservative"
    job = call(signed_in, "GET", f"/api/v1/whatif/{job_id}?figures=true").json()
    assert job["spec"] == SWEEP
    makespan, breakdown = job["figures"]
    traces = {t["name"]: t for t in makespan["data"]}
    means = [p["makespan"]["mean"] for p in job["report"]["points"]]
    assert traces["predicted mean"]["x"] == [8, 16, 32, 64, 128]
    assert traces["predicted mean"]["y"] == pytest.approx(means)
    assert traces["predicted lower"]["fill"] == "tonexty"  # the interval band
    assert makespan["layout"]["xaxis"]["type"] == "log"
    assert {t["name"] for t in breakdown["data"]} == {"compute", "communication", "waiting"}
