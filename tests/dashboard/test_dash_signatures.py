"""The Signatures page and its data routes: a real PAS2P analysis (tests/pas2p/data) posted
through the API comes back as the list's row and the phases table; posted probes come back
newest first with the speed a schedule would plan with; signed-out and non-operator callers
are refused; in Chromium, picking the signature shows its phases and its probe."""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from ppe.pas2p import logical_trace, read_traces, signature
from ppe.pas2p.report import to_dict
from ppe.service.dashboard.routes import CSP
from ppe.service.dashboard.signatures_data import DATA_PATH
from tests.pas2p.conftest import DATA

from .conftest import ORIGIN, Dash
from .test_dash_pages import external_urls, parse

if TYPE_CHECKING:
    from ..conftest import ServerProcess

API = "/api/v1/signatures/phases"
FILES = sorted(DATA.glob("sor-n800-i100-r10.jsonl.*.gz"))
ANALYSIS = to_dict(signature(logical_trace(read_traces(FILES, "sor"))))
PARAMETERS = {"n": 800, "iterations": 100, "residual_every": 10}
# What ppe.service.probing stores for a probe it ran: measured speed, the sensor's CPU share.
PROBE_RESULT = {
    "seconds": 0.41,
    "benchmark": 2.5e-8,
    "cpu_share": 0.8,
    "started_at": 1.0,
    "strip": {"rows": 400, "columns": 800},
}


def sig_body(name: str = "sor-n800", **over: Any) -> dict[str, Any]:
    out = {
        "name": name,
        "app": "sor",
        "parameters": PARAMETERS,
        "ranks": ANALYSIS["ranks"],
        "analysis": copy.deepcopy(ANALYSIS),
    }
    return {**out, **over}


def bearer(dash: Dash, role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {dash.tokens[role]}"}


def post_signature(dash: Dash, **over: Any) -> dict[str, Any]:
    r = dash.client.post(API, json=sig_body(**over), headers=bearer(dash, "operator"))
    assert r.status_code == 201, r.text
    return dict(r.json())


def post_probe(dash: Dash, name: str, body: dict[str, Any]) -> dict[str, Any]:
    r = dash.client.post(f"{API}/{name}/probes", json=body, headers=bearer(dash, "operator"))
    assert r.status_code == 201, r.text
    return dict(r.json())


def register(dash: Dash, *hosts: str) -> None:
    for host in hosts:
        r = dash.client.put(
            f"/api/v1/resources/{host}", json={"properties": {}}, headers=bearer(dash, "operator")
        )
        assert r.status_code in (200, 201), r.text


def data(dash: Dash, path: str = "") -> httpx.Response:
    """The data route as the page calls it: session cookie, CSRF header, our origin."""
    return dash.client.get(
        DATA_PATH + path, headers={"X-PPE-CSRF": dash.form_csrf("/"), "Origin": ORIGIN}
    )


@pytest.fixture
def stored(dash: Dash) -> Dash:
    """sor-n800 at version 2 (parameters changed) with an ok probe on h1 and a failed one on
    h2 (posted after it), an older jacobi signature without probes; signed in as operator."""
    register(dash, "h1", "h2")
    post_signature(dash, name="jacobi-a", app="jacobi2d")
    post_signature(dash)
    post_signature(dash, parameters={**PARAMETERS, "iterations": 200})
    post_probe(dash, "sor-n800", {"host": "h1", "status": "ok", "result": PROBE_RESULT})
    failed = {"host": "h2", "status": "failed", "error": "exit 1", "result": {"benchmark": "x"}}
    post_probe(dash, "sor-n800", failed)
    dash.login("operator")
    return dash


def test_the_page_renders_with_its_data_path_and_no_inline_script(stored: Dash) -> None:
    r = stored.client.get("/signatures")
    assert r.status_code == 200
    assert r.headers["content-security-policy"] == CSP
    html = r.text
    assert 'aria-current="page">Signatures</a>' in html
    assert "/dashboard/static/signatures.js" in html
    assert f'data-path="{DATA_PATH}"' in html
    assert "ppe pas2p analyze TRACE.0 TRACE.1 --post NAME --app APP" in html  # the hint
    assert external_urls(html) == []
    markup = parse(html)
    assert [ref for ref in markup.refs if ref[0] == "script" and not ref[2]] == []
    assert stored.client.get("/dashboard/static/signatures.js").status_code == 200


def test_signed_out_and_non_operators_are_refused(dash: Dash) -> None:
    r = dash.client.get("/signatures", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login?next=%2Fsignatures"
    for path in ("", "/sor-n800"):
        assert dash.client.get(DATA_PATH + path).status_code == 401
        assert dash.client.get(DATA_PATH + path, headers=bearer(dash, "app")).status_code == 403
        assert dash.client.get(DATA_PATH + path, headers=bearer(dash, "sensor")).status_code == 403
    dash.login("operator")
    assert dash.client.get(DATA_PATH).status_code == 401  # the cookie alone is not enough
    assert data(dash).status_code == 200 and data(dash).json() == []  # the page's empty state


def test_the_list_has_each_names_newest_version_with_its_probe_count(stored: Dash) -> None:
    r = data(stored)
    assert r.status_code == 200, r.text
    rows = r.json()
    assert [(s["name"], s["version"], s["app"]) for s in rows] == [
        ("sor-n800", 2, "sor"),  # newest first
        ("jacobi-a", 1, "jacobi2d"),
    ]
    sor = rows[0]
    assert sor["ranks"] == 2 and sor["parameters"]["iterations"] == 200
    assert sor["kept"] == ANALYSIS["signature"] and sor["phases"] == len(ANALYSIS["phases"])
    assert sor["traced_s"] == ANALYSIS["traced_s"]
    assert sor["predicted_s"] == ANALYSIS["predicted_s"]
    assert sor["kept_share"] == ANALYSIS["kept_share"]
    assert sor["probes"] == 2 and rows[1]["probes"] == 0
    assert abs(sor["created_at"] - time.time()) < 600


def test_one_signature_has_its_phases_and_its_probes_newest_first(stored: Dash) -> None:
    r = data(stored, "/sor-n800")
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["version"] == 2 and d["probes"] == 2
    assert d["anchor_rank"] == ANALYSIS["anchor_rank"] and d["keep"] == ANALYSIS["keep"]
    phases = d["phase_rows"]
    assert [p["id"] for p in phases] == list(range(len(ANALYSIS["phases"])))
    for got, want in zip(phases, ANALYSIS["phases"], strict=True):
        assert got["pattern"] == want["pattern"] and got["weight"] == want["weight"]
        assert got["mean_ms"] == pytest.approx(want["mean_s"] * 1e3)
        assert got["sd_ms"] == pytest.approx(want["sd_s"] * 1e3)
        assert got["share"] == want["share"] and got["step"] == want["step"]
    assert [p["id"] for p in phases if p["kept"]] == sorted(ANALYSIS["signature"])
    kept_share = sum(p["share"] for p in phases if p["kept"])
    assert kept_share == pytest.approx(ANALYSIS["kept_share"])

    failed, ok = d["probe_rows"]  # newest first
    assert (failed["host"], failed["status"], failed["error"]) == ("h2", "failed", "exit 1")
    assert failed["measured_benchmark"] is None and failed["benchmark"] is None  # "x" is no speed
    assert failed["strip"] is None and failed["version"] == 2
    assert (ok["host"], ok["status"], ok["error"]) == ("h1", "ok", None)
    assert ok["measured_benchmark"] == 2.5e-8 and ok["cpu_share"] == 0.8
    # measured x share, as planning uses it
    assert ok["benchmark"] == pytest.approx(2.0e-8, rel=1e-9)
    assert ok["strip"] == {"rows": 400, "columns": 800} and ok["seconds"] == 0.41
    assert ok["reused"] is None and ok["created_at"] <= failed["created_at"]


def test_a_probe_without_a_share_plans_with_its_measured_speed(stored: Dash) -> None:
    post_probe(stored, "sor-n800", {"host": "h1", "status": "ok", "result": {"benchmark": 3e-8}})
    newest = data(stored, "/sor-n800").json()["probe_rows"][0]
    assert newest["measured_benchmark"] == 3e-8 and newest["benchmark"] == 3e-8
    assert newest["cpu_share"] is None


def test_an_unknown_signature_is_a_404_naming_the_path(stored: Dash) -> None:
    r = data(stored, "/nope")
    assert r.status_code == 404
    assert r.json()["detail"][0]["field"] == "path.name"
    assert data(stored, "/bad%20name").status_code == 422


@pytest.mark.browser
def test_signatures_page_in_chromium(server_factory: type[ServerProcess], tmp_path: Path) -> None:
    from .test_dash_browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, Browser, make_token

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import expect, sync_playwright

    db_url = f"sqlite:///{tmp_path / 'sig.db'}"
    operator = make_token(db_url, "operator")
    server = server_factory(db_url)
    auth = {"Authorization": f"Bearer {operator}"}
    with httpx.Client(base_url=server.base_url, timeout=30) as api:
        r = api.put("/api/v1/resources/vm1", headers=auth, json={"properties": {}})
        assert r.status_code in (200, 201), r.text
        assert api.post(API, headers=auth, json=sig_body()).status_code == 201
        probe = {"host": "vm1", "status": "ok", "result": PROBE_RESULT}
        r = api.post(f"{API}/sor-n800/probes", headers=auth, json=probe)
        assert r.status_code == 201, r.text
        probe_id = r.json()["id"]

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            b = Browser(server.base_url)
            b.attach(page)
            page.set_default_timeout(20_000)
            page.goto(server.base_url + "/signatures")
            page.get_by_label("Token").fill(operator)
            page.get_by_role("button", name="Sign in").click()
            expect(page).to_have_url(server.base_url + "/signatures")
            expect(page.locator("#signatures-body tr[data-name]")).to_have_count(1)
            expect(page.locator("#detail")).to_be_hidden()
            page.get_by_role("link", name="sor-n800").click()
            expect(page).to_have_url(re.compile(r"/signatures\?name=sor-n800$"))
            expect(page.locator("#phases-body tr")).to_have_count(len(ANALYSIS["phases"]))
            kept = page.locator("#phases-body tr", has_text="kept")
            expect(kept).to_have_count(len(ANALYSIS["signature"]))
            row = page.locator(f'#probes-body tr[data-id="{probe_id}"]')
            expect(row).to_contain_text("vm1")
            expect(row).to_contain_text("400 × 800")
            expect(row).to_contain_text("80.0 %")
            shares = page.locator("#chart-shares")
            expect(shares).to_have_class(re.compile(r"js-plotly-plot"))
            bars = shares.evaluate("el => el.data[0].x")
            assert bars == [f"phase {i}" for i in sorted(ANALYSIS["signature"])]
            probes = page.locator("#chart-probes")
            expect(probes).to_have_class(re.compile(r"js-plotly-plot"))
            assert probes.evaluate("el => el.data.map(t => t.name)") == ["vm1"]
            assert probes.evaluate("el => el.data[0].y") == [pytest.approx(2.0e-8, rel=1e-9)]
            page.screenshot(path=str(SCREENSHOTS / "signatures.png"), full_page=True)
            page.reload()  # ?name= opens it again
            expect(page.locator("#phases-body tr")).to_have_count(len(ANALYSIS["phases"]))
            assert b.external == [], b.external
            assert b.errors == [], b.errors
        finally:
            browser.close()
