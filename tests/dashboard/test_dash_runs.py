"""The Runs page and the host page's calibration: served over the session, their data from the
API with the page's cookie and CSRF header, drawn in real Chromium without a CSP violation."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from ppe.service.dashboard.routes import CSP

ORIGIN = "http://testserver"


def page_csrf(dash: Any, page: str = "/runs") -> str:
    found = re.search(r'name="ppe-csrf" content="([^"]+)"', dash.client.get(page).text)
    assert found
    return found.group(1)


def seed(post: Any, put: Any) -> dict[str, Any]:
    """Two hosts with an hour of cpu data, a served schedule and four runs reported on it (one
    failed); returns the served makespan. ``post``/``put`` send with an admin's rights."""
    t0 = time.time() - 3700
    items = [
        {"resource": h, "metric": "cpu", "timestamp": t0 + 10 * k, "value": 0.2 + 0.1 * (k % 2)}
        for h in ("h0", "h1")
        for k in range(360)
    ]
    assert post("/api/v1/measurements", {"measurements": items}).status_code == 200
    for h in ("h0", "h1"):
        assert put(f"/api/v1/resources/{h}", {"properties": {"benchmark": 2e-8}}).status_code == 200
    body = {"app": "sor", "n": 400, "iterations": 10, "hosts": ["h0", "h1"], "strategy": "mean"}
    r = post("/api/v1/schedules", body)
    assert r.status_code == 200, r.text
    sid, m = r.json()["id"], r.json()["makespan"]
    lo, hi = m["interval"]
    runs = [
        {"app": "sor", "params": {"n": 400, "iterations": 10}, "system": "h0,h1", "values": [v],
         "schedule_id": sid, "status": status}
        for v, status in (((lo + hi) / 2, "completed"), (hi * 2, "completed"),
                          (lo + 0.1 * (hi - lo), "completed"), (hi, "failed"))
    ]  # fmt: skip
    assert post("/api/v1/runs", {"runs": runs}).status_code == 201
    # Three ppe-sor reports whose rank on h0 ran at 3e-8 s per element (the sensor read 0.25
    # with the run on the core: the share it got), against the 2e-8 registered; its halo
    # rows from h1 (8016 bytes) took 16-18 us: about 470 MB/s, far above the 12.5 MB/s default.
    reports = [
        {"app": "sor", "params": {"n": 1000, "iterations": 50}, "system": "h0,h1",
         "values": [60.0], "key": f"cal-{k}",
         "report": {"ranks": [{"rank": 0, "host": "h0", "segments": [
             {"from": 0, "to": 50, "rows": 200, "start": t0 + 600 + 400 * k,
              "end": t0 + 660 + 400 * k, "compute_s": b * 200 * 1000 * 50 * 4}],
             "halo": [{"peer": 1, "bytes": 8016, "exchanges": 100, "fast_s": t,
                       "fast_sd": 1e-6, "fast_n": 10}]}]}}
        for k, (b, t) in enumerate(((2.9e-8, 1.6e-5), (3.0e-8, 1.7e-5), (3.1e-8, 1.8e-5)))
    ]  # fmt: skip
    assert post("/api/v1/runs", {"runs": reports}).status_code == 201
    return dict(m)


def test_runs_page_is_a_session_page_in_the_nav(dash) -> None:  # type: ignore[no-untyped-def]
    r = dash.client.get("/runs", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login?next=%2Fruns"
    dash.login("operator")
    r = dash.client.get("/runs")
    assert r.status_code == 200 and r.headers["content-security-policy"] == CSP
    assert 'href="/runs" aria-current="page"' in r.text  # the nav marks it
    assert "/dashboard/static/runs.js" in r.text and 'id="chart-runs"' in r.text
    assert 'href="/runs"' in dash.client.get("/").text  # every page links it
    assert 'id="calibration"' in dash.client.get("/hosts/h0").text


def test_the_pages_data_comes_from_the_api_with_the_session(dash_db) -> None:  # type: ignore[no-untyped-def]
    admin = {"Authorization": f"Bearer {dash_db.tokens['admin']}"}
    c = dash_db.client
    m = seed(
        lambda path, body: c.post(path, json=body, headers=admin),
        lambda path, body: c.put(path, json=body, headers=admin),
    )
    dash_db.login("operator")
    # The cookie alone is refused; with the page's CSRF header from our origin it is the API.
    assert c.get("/api/v1/accuracy").status_code == 401
    ours = {"X-PPE-CSRF": page_csrf(dash_db), "Referer": ORIGIN + "/runs"}
    [group] = c.get("/api/v1/accuracy", headers=ours).json()
    assert (group["strategy"], group["completed"], group["failed"], group["inside"]) == (
        "mean",
        3,
        1,
        2,
    )
    assert [j["mean"] for j in group["judged"]] == pytest.approx([m["mean"]] * 3)
    cal = c.get("/api/v1/resources/h0/calibration", headers=ours).json()
    assert cal["configured"] == 2e-8 and cal["used_by_planning"] == "configured"
    assert cal["calibrated"]["benchmark"] == pytest.approx(3e-8) and cal["agrees"] is False


# ------------------------------------------------------------------------ in Chromium

CHROMIUM = "/usr/bin/chromium"


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="apt-get install chromium")
def test_runs_and_calibration_draw_in_chromium(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect, sync_playwright

    from .test_dash_browser import CHROMIUM_ARGS, Browser, make_token

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    server = server_factory(url)
    try:
        admin, operator = make_token(url, "admin"), make_token(url, "operator")
        with httpx.Client(
            base_url=server.base_url, headers={"Authorization": f"Bearer {admin}"}
        ) as h:
            seed(lambda p, b: h.post(p, json=b), lambda p, b: h.put(p, json=b))
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                b = Browser(server.base_url)
                b.attach(page)
                page.set_default_timeout(20_000)
                page.goto(server.base_url + "/login?next=%2Fruns")
                page.get_by_label("Token").fill(operator)
                page.get_by_role("button", name="Sign in").click()
                expect(page).to_have_url(server.base_url + "/runs")
                expect(page.locator("#summary-body tr")).to_have_count(1)
                expect(page.locator("#summary-body")).to_contain_text("66.7 %")  # 2 of 3 inside
                expect(page.locator("#runs-body tr")).to_have_count(3)
                expect(page.locator("#runs-body td.bad")).to_have_count(1)
                chart = page.locator("#chart-runs")
                expect(chart).to_have_class(re.compile(r"js-plotly-plot"))
                expect(chart.locator("svg.main-svg").first).to_be_visible()
                page.screenshot(path=str(tmp_path / "runs.png"), full_page=True)
                page.goto(server.base_url + "/hosts/h0")
                expect(page.locator("#calibration")).to_contain_text("2.000e-8 s")
                expect(page.locator("#calibration")).to_contain_text("3.000e-8 s")
                expect(page.locator("#calibration .verdict.bad")).to_contain_text("differs")
                link = page.locator("#calibration")
                expect(link).to_contain_text("Link to h1")
                expect(link).to_contain_text("latency not separated")
                expect(link).to_contain_text("differs, check it")
                page.screenshot(path=str(tmp_path / "host.png"), full_page=True)
                assert b.errors == [] and b.external == []  # a CSP violation logs an error
            finally:
                browser.close()
    finally:
        server.stop()
