"""The host page's horizon cards: the forecast over a chosen horizon (the public forecast route)
and the calibration of the host's own past horizon forecasts (the dashboard's data route, scored
by ppe.evaluation.horizon_eval.calibrate_series), on two weeks of a real Bitbrains VM."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from ppe.evaluation.horizon_eval import DEFAULT_HORIZONS, calibrate_series
from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.dashboard import host_data
from ppe.traces import read_trace

from .conftest import Dash, tokens_for

CHROMIUM = "/usr/bin/chromium"
HOST = "vm65"
TRACE = "65.csv.gz"  # switches between idle and saturated: analogues, blends and fallbacks
SAMPLES = 14 * 288  # two weeks at the trace's 300 s spacing
CASES = 12  # per horizon in the route tests: enough to score, cheap on two cores
PATH = f"/dashboard/data/hosts/{HOST}/horizon-calibration"


def series(traces_dir: Path, samples: int = SAMPLES) -> tuple[np.ndarray, np.ndarray]:
    """The trace's newest ``samples`` live samples, shifted so the newest is a minute old (the
    store keeps raw rows for 30 days)."""
    trace = read_trace(traces_dir / TRACE).alive()
    ts = trace.timestamps[-samples:]
    return ts - ts[-1] + round(time.time()) - 60.0, trace.availability[-samples:]


def post(
    client: TestClient | httpx.Client,
    token: str,
    ts: np.ndarray,
    xs: np.ndarray,
    resource: str = HOST,
) -> None:
    items = [
        {"resource": resource, "metric": "cpu", "timestamp": float(t), "value": float(v)}
        for t, v in zip(ts, xs, strict=True)
    ]
    r = client.post(
        "/api/v1/measurements",
        json={"measurements": items},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code in (200, 201), r.text


@pytest.fixture
def fed(dash_db: Dash, traces_dir: Path) -> tuple[Dash, np.ndarray, np.ndarray]:
    ts, xs = series(traces_dir)
    post(dash_db.client, dash_db.tokens["sensor"], ts, xs)
    dash_db.login("operator")
    return dash_db, ts, xs


def get(dash: Dash, path: str = PATH, **params: Any) -> httpx.Response:
    """A GET as the page makes it: session cookie, CSRF header, our origin."""
    return dash.client.get(
        path, params=params, headers={"X-PPE-CSRF": dash.form_csrf("/"), "Origin": dash.origin}
    )


def test_route_numbers_are_the_evaluation_of_the_stored_series(fed) -> None:  # type: ignore[no-untyped-def]
    dash, ts, xs = fed
    r = get(dash, cases=CASES)
    assert r.status_code == 200, r.text
    body = r.json()
    direct = calibrate_series(ts, xs, HOST, DEFAULT_HORIZONS, CASES)
    assert body["resource"] == HOST and body["samples"] == SAMPLES == direct["samples"]
    assert body["pit_counts"] == direct["pit_counts"]
    assert len(body["horizons"]) == len(DEFAULT_HORIZONS)
    for got, want in zip(body["horizons"], direct["horizons"], strict=True):
        assert got["horizon_s"] == want["horizon_s"]
        assert got["n"] == want["n"] == CASES  # two weeks hold every horizon up to 3 d
        for k in ("coverage", "width", "pinball", "mae", "fallback_share"):
            assert got[k] == pytest.approx(want[k], abs=1e-12), k
        assert got["hits"] == want["hits"] and got["pit_counts"] == want["pit_counts"]
        assert got["wilson"] == pytest.approx(want["wilson"], abs=1e-12)
        assert got["wilson"][0] <= got["coverage"] <= got["wilson"][1]
        for a, b in zip(got["cases"], want["cases"], strict=True):
            assert a["at"] == pytest.approx(b["at"], abs=1e-6)
            assert a["actual"] == pytest.approx(b["actual"], abs=1e-12)
            for k in ("mean", "lower", "upper", "pit"):
                assert a["forecaster"][k] == pytest.approx(b["forecaster"][k], abs=1e-9), k
    # the long horizons of this bimodal VM lean on the honest fallback, and say so
    assert body["horizons"][-1]["fallback_share"] > 0


def test_each_forecast_is_the_one_the_public_route_answers_at_that_time(fed) -> None:  # type: ignore[no-untyped-def]
    """One formula: the card's past forecasts are what ``GET /forecasts?horizon=&at=`` says."""
    dash, _, _ = fed
    body = get(dash, cases=3, horizons="3600,86400").json()
    for row in body["horizons"]:
        for case in row["cases"]:
            r = get(dash, f"/api/v1/forecasts/{HOST}/cpu", horizon=row["horizon_s"], at=case["at"])
            assert r.status_code == 200, r.text
            api = r.json()
            assert api["mean"] == pytest.approx(case["forecaster"]["mean"], abs=1e-9)
            assert api["interval"] == pytest.approx(
                [case["forecaster"]["lower"], case["forecaster"]["upper"]], abs=1e-9
            )
            assert api["support"] == case["forecaster"]["support"]
            assert api["fallback"] == case["forecaster"]["fallback"]


def test_an_idle_hosts_past_forecasts_borrow_from_the_fleet_as_the_route_does(  # type: ignore[no-untyped-def]
    fed, traces_dir: Path
) -> None:
    """An idle host's long-horizon fallbacks borrow the other hosts' outcomes
    (forecaster.fleet); the card's past forecasts do too, exactly as ``at=`` answers them."""
    dash, ts, _ = fed
    for name in ("4", "2"):
        idle = read_trace(traces_dir / f"{name}.csv.gz").alive()
        post(dash.client, dash.tokens["sensor"], ts, idle.availability[-SAMPLES:], f"vm{name}")
    path = "/dashboard/data/hosts/vm4/horizon-calibration"
    body = get(dash, path, cases=3, horizons="86400,259200").json()
    borrowed = 0
    for row in body["horizons"]:
        for case in row["cases"]:
            api = get(dash, "/api/v1/forecasts/vm4/cpu", horizon=row["horizon_s"], at=case["at"])
            assert api.status_code == 200, api.text
            want = api.json()
            assert want["fleet"] == case["forecaster"]["fleet"]
            assert want["interval"] == pytest.approx(
                [case["forecaster"]["lower"], case["forecaster"]["upper"]], abs=1e-9
            )
            borrowed += case["forecaster"]["fleet"] is not None
    assert borrowed > 0


def test_the_answer_is_kept_until_the_series_gains_a_sample(  # type: ignore[no-untyped-def]
    fed, monkeypatch: pytest.MonkeyPatch
) -> None:
    dash, ts, xs = fed
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(len(args[0]))
        return calibrate_series(*args, **kwargs)

    monkeypatch.setattr(host_data, "calibrate_series", counted)
    first = get(dash, cases=2, horizons="3600").json()
    assert get(dash, cases=2, horizons="3600").json() == first
    assert calls == [SAMPLES]  # the second answer came from the memo
    get(dash, cases=3, horizons="3600")  # another question is another entry
    assert len(calls) == 2
    post(dash.client, dash.tokens["sensor"], np.array([ts[-1] + 300.0]), np.array([0.5]))
    again = get(dash, cases=2, horizons="3600").json()
    assert calls[-1] == SAMPLES + 1 and len(calls) == 3  # recomputed on the new version
    assert again["samples"] == first["samples"] + 1
    assert again["last_timestamp"] == pytest.approx(ts[-1] + 300.0)


def test_calibration_uses_only_data_before_each_time(traces_dir: Path) -> None:
    """Values after a cut C are overwritten (the timestamps kept, so the same times are drawn):
    every forecast made at T <= C is unchanged, and so is its realised mean when T + H <= C;
    forecasts made after C do change (the test could fail)."""
    ts, xs = series(traces_dir)
    cut = float(ts[0] + 9 * 86400)
    altered = np.where(ts >= cut, 1.0 - xs, xs)
    before = calibrate_series(ts, xs, HOST, DEFAULT_HORIZONS, 10)
    after = calibrate_series(ts, altered, HOST, DEFAULT_HORIZONS, 10)
    kept = changed = 0
    for rb, ra in zip(before["horizons"], after["horizons"], strict=True):
        for cb, ca in zip(rb["cases"], ra["cases"], strict=True):
            assert cb["at"] == ca["at"]
            if cb["at"] <= cut:
                assert cb["forecaster"]["mean"] == ca["forecaster"]["mean"]
                assert (cb["forecaster"]["lower"], cb["forecaster"]["upper"]) == (
                    ca["forecaster"]["lower"],
                    ca["forecaster"]["upper"],
                )
                kept += 1
                if cb["at"] + cb["horizon_s"] <= cut:
                    assert cb["actual"] == ca["actual"] and cb["forecaster"] == ca["forecaster"]
            elif cb["forecaster"]["mean"] != ca["forecaster"]["mean"]:
                changed += 1
    assert kept >= 10 and changed >= 10


def test_a_short_history_says_why_a_horizon_has_no_cases(dash: Dash, traces_dir: Path) -> None:
    ts, xs = series(traces_dir, samples=3 * 288)  # three days
    post(dash.client, dash.tokens["sensor"], ts, xs)
    dash.login("operator")
    body = get(dash, cases=4).json()
    by_h = {row["horizon_s"]: row for row in body["horizons"]}
    assert by_h[3600.0]["n"] == 4 and by_h[3600.0]["reason"] is None
    for h in (86400.0, 259200.0):
        assert by_h[h]["n"] == 0 and by_h[h]["wilson"] is None and by_h[h]["cases"] == []
        assert re.search(
            r"history spans 3(\.\d+)? d; a case needs 2 d of history", by_h[h]["reason"]
        )
    assert "3 d after it" in by_h[259200.0]["reason"]


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"horizons": "abc"}, "positive seconds separated by commas"),
        ({"horizons": "3600,-5"}, "positive seconds separated by commas"),
        ({"horizons": "0"}, "positive seconds separated by commas"),
        ({"horizons": "nan"}, "positive seconds separated by commas"),
        ({"horizons": str(40 * 86400)}, "at most 2592000 s (30 days)"),
        ({"horizons": ",".join(str(300 * k) for k in range(1, 10))}, "at most 8 horizons"),
    ],
)
def test_bad_horizons_are_refused_clearly(dash: Dash, query: dict[str, str], reason: str) -> None:
    dash.login("operator")
    r = get(dash, **query)
    assert r.status_code == 422
    problems = r.json()["detail"]
    assert any(reason in p["reason"] and p["field"] == "query.horizons" for p in problems), problems


@pytest.mark.parametrize("cases", [0, 41])
def test_case_count_is_bounded(dash: Dash, cases: int) -> None:
    dash.login("operator")
    assert get(dash, cases=cases).status_code == 422


def test_unknown_host_is_a_404_that_names_it(dash: Dash) -> None:
    dash.login("operator")
    r = get(dash, "/dashboard/data/hosts/nohost/horizon-calibration")
    assert r.status_code == 404
    assert any("no measurements for nohost/cpu" in p["reason"] for p in r.json()["detail"])


def test_route_needs_an_operator(dash: Dash) -> None:
    assert dash.client.get(PATH).status_code == 401
    r = dash.client.get(PATH, headers={"Authorization": f"Bearer {dash.tokens['sensor']}"})
    assert r.status_code == 403


def test_host_page_has_both_cards(fed) -> None:  # type: ignore[no-untyped-def]
    dash, _, _ = fed
    page = dash.client.get(f"/hosts/{HOST}").text
    assert "Forecast over a horizon" in page and "Calibration of past horizon forecasts" in page
    assert f'data-calibration="{PATH}"' in page
    options = re.findall(
        r'<option value="(\d+)"[^>]*>([^<]+)</option>', page.split('id="hz-horizon"')[1]
    )
    assert [(float(v), t) for v, t in options[:5]] == list(
        zip(DEFAULT_HORIZONS, ["5 min", "1 h", "6 h", "1 d", "3 d"], strict=True)
    )
    for part in (
        'id="chart-hz"',
        'id="chart-hcal-coverage"',
        'id="chart-hcal-pit"',
        'for="hz-horizon"',
    ):
        assert part in page


def test_host_page_escapes_the_name_in_the_data_path(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'esc.db'}"
    tokens = tokens_for(url)
    with TestClient(create_app(Settings(database_url=url))) as client:
        d = Dash(client, tokens)
        d.login("operator")
        page = client.get("/hosts/a%20b").text
    assert 'data-calibration="/dashboard/data/hosts/a%20b/horizon-calibration"' in page


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="apt-get install chromium")
def test_horizon_cards_draw_in_chromium(server_factory, traces_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect, sync_playwright

    from .test_dash_browser import CHROMIUM_ARGS, Browser, make_token

    url = f"sqlite:///{tmp_path / 'horizon.db'}"
    server = server_factory(url)
    operator, sensor = make_token(url, "operator"), make_token(url, "sensor")
    ts, xs = series(traces_dir)
    with httpx.Client(base_url=server.base_url, timeout=60) as api:
        post(api, sensor, ts, xs)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            b = Browser(server.base_url)
            b.attach(page)
            page.set_default_timeout(60_000)
            page.goto(server.base_url + f"/login?next=%2Fhosts%2F{HOST}")
            page.get_by_label("Token").fill(operator)
            page.get_by_role("button", name="Sign in").click()
            expect(page).to_have_url(server.base_url + f"/hosts/{HOST}")

            # the forecast for every horizon drawn, the chosen one's figures listed
            expect(page.locator("#chart-hz")).to_have_class(re.compile(r"js-plotly-plot"))
            page.wait_for_function(
                "() => { const el = document.querySelector('#chart-hz');"
                " return !!(el && el.data && el.data.length && el.data[0].x.length === 5); }"
            )
            points = "el => el.data[0].x"
            assert page.locator("#chart-hz").evaluate(points) == [
                "5 min",
                "1 h",
                "6 h",
                "1 d",
                "3 d",
            ]
            expect(page.locator("#hz-figures")).to_contain_text("Support")
            expect(page.locator("#hz-figures")).to_contain_text("95 % interval")
            page.get_by_label("Horizon", exact=True).select_option("259200")
            page.wait_for_function(  # redrawn with the 3 d forecast highlighted
                "() => { const el = document.querySelector('#chart-hz');"
                " return !!(el && el.data && el.data[0].marker.size[4] === 13); }"
            )
            sizes = page.locator("#chart-hz").evaluate("el => el.data[0].marker.size")
            assert sizes == [8, 8, 8, 8, 13]
            support = page.locator('#hz-figures dd[data-figure="support"]').inner_text()
            assert re.fullmatch(r"\d+ analogues?", support), support
            fallback = page.locator('#hz-figures dd[data-figure="fallback"]').inner_text()
            assert fallback.startswith(("blend", "unconditional", "none"))
            fleet = page.locator('#hz-figures dd[data-figure="fleet"]').inner_text()
            assert re.fullmatch(
                r"\d+ outcomes of other hosts that were this idle|not borrowed", fleet
            )

            # the calibration: coverage per horizon against the nominal line, and the PIT
            cov = page.locator("#chart-hcal-coverage")
            expect(cov).to_have_class(re.compile(r"js-plotly-plot"))
            page.wait_for_function(
                "() => { const el = document.querySelector('#chart-hcal-pit');"
                " return !!(el && el.data && el.data.length === 2); }"
            )
            data = cov.evaluate("el => el.data.map(t => [t.name, t.x.length, t.y])")
            assert data[0][0] == "coverage" and data[0][1] == 5
            assert all(0.0 <= y <= 1.0 for y in data[0][2])
            assert data[1][0] == "nominal 95 %" and set(data[1][2]) == {0.95}
            pit = page.locator("#chart-hcal-pit").evaluate("el => el.data[0].y")
            assert len(pit) == 10 and sum(pit) == 5 * 40
            expect(page.locator("#hcal-body tr")).to_have_count(5)
            expect(page.locator("#hcal-note")).to_contain_text("strictly before T")
            page.screenshot(path=str(tmp_path / "host-horizon.png"), full_page=True)
            assert b.errors == [] and b.external == [], (b.errors, b.external)
        finally:
            browser.close()
