"""The host page's machine profile: its memory curves, message curves and figures drawn from the
stored versions in real Chromium, a version picked by the operator, and a short hint on a host
without one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from ppe.pmac import KINDS, PATTERNS, Curve, CurvePoint, Figure, MachineProfile, profile_to_dict
from ppe.pmac.profile import MessageCurve

CHROMIUM = "/usr/bin/chromium"


def fig(value: float) -> Figure:
    return Figure.of([value * 0.98, value, value * 1.02], 0.01, "synthetic")


def profile(
    host: str, sizes: int, shared: int, messages: int, measured_at: float
) -> dict[str, Any]:
    """Every single-copy curve over ``sizes`` working sets from 8 KiB in steps of 8; the
    2-copy curves of ``read unit`` and ``rmw stride2`` over the first ``shared`` of them;
    ``messages`` message sizes to h1 (none when 0)."""
    ws = [8192 * 8**i for i in range(sizes)]
    memory = [
        Curve(p, k, 1, tuple(CurvePoint(b, fig(8e9 / (1 + i))) for i, b in enumerate(ws)))
        for p in PATTERNS
        for k in KINDS
    ]
    memory += [
        Curve(p, k, 2, tuple(CurvePoint(b, fig(5e9 / (1 + i))) for i, b in enumerate(ws[:shared])))
        for p, k in (("unit", "read"), ("stride2", "rmw"))
    ]
    msgs = (
        (MessageCurve("h1", tuple((64 * 16**i, fig(1e-4 * (1 + i))) for i in range(messages))),)
        if messages
        else ()
    )
    p = MachineProfile(
        host=host,
        measured_at=measured_at,
        method="synthetic",
        memory=tuple(memory),
        flops={"dense": fig(2e10), "stencil": fig(2e9)},
        overheads={"call": fig(1e-6), "view": fig(2e-7)},
        messages=msgs,
        quick=sizes < 5,
        machine={"cpu": "Test CPU", "cpus": 2, "numpy": "2.0", "load_average": [1.0, 0.5, 0.25]},
    )
    return profile_to_dict(p)


def test_the_host_page_has_the_profile_section(dash) -> None:  # type: ignore[no-untyped-def]
    dash.login("operator")
    page = dash.client.get("/hosts/h0").text
    for part in ('id="profile-version"', 'id="chart-profile-read"', 'id="chart-profile-rmw"'):
        assert part in page
    assert 'for="profile-version"' in page  # the selector is labelled


TRACES_JS = "el => el.data.map(t => [t.name, t.x.length, (t.line || {}).dash || 'solid'])"


def traces(page: Any, chart: str, points: int) -> list[list[Any]]:
    """The chart's traces (name, points, dash) once its first trace has ``points`` points."""
    page.wait_for_function(
        "([sel, n]) => { const el = document.querySelector(sel);"
        " return !!(el && el.data && el.data.length && el.data[0].x.length === n); }",
        arg=[chart, points],
    )
    return [list(t) for t in page.locator(chart).evaluate(TRACES_JS)]


def expected(kind: str, sizes: int, shared: int) -> list[list[Any]]:
    out: list[list[Any]] = [[f"{kind} {p}", sizes, "solid"] for p in PATTERNS]
    pattern = "unit" if kind == "read" else "stride2"
    return [*out, [f"{kind} {pattern}, 2 copies (each)", shared, "dash"]]


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="apt-get install chromium")
def test_profile_curves_draw_and_a_version_can_be_picked_in_chromium(  # type: ignore[no-untyped-def]
    server_factory, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    from .test_dash_browser import CHROMIUM_ARGS, Browser, make_token

    url = f"sqlite:///{tmp_path / 'profile.db'}"
    server = server_factory(url)
    operator = make_token(url, "operator")
    with httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {operator}"}
    ) as api:
        for body in (profile("h0", 4, 3, 0, 1.7e9), profile("h0", 6, 5, 3, 1.7e9 + 86400)):
            r = api.post("/api/v1/resources/h0/profiles", json=body)
            assert r.status_code == 201, r.text
        r = api.put("/api/v1/resources/h1", json={"properties": {"benchmark": 1e-8}})
        assert r.status_code == 200, r.text
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            b = Browser(server.base_url)
            b.attach(page)
            page.set_default_timeout(20_000)
            page.goto(server.base_url + "/login?next=%2Fhosts%2Fh0")
            page.get_by_label("Token").fill(operator)
            page.get_by_role("button", name="Sign in").click()
            expect(page).to_have_url(server.base_url + "/hosts/h0")

            # The newest version: 6 sizes, 5 shared, messages to h1 at 3 sizes.
            expect(page.locator("#profile-meta")).to_contain_text("2 of 2 (newest)")
            for kind in ("read", "rmw"):
                chart = page.locator(f"#chart-profile-{kind}")
                expect(chart).to_have_class(re.compile(r"js-plotly-plot"))
                assert traces(page, f"#chart-profile-{kind}", 6) == expected(kind, 6, 5)
            assert traces(page, "#chart-profile-messages", 3) == [["to h1", 3, "solid"]]
            xaxis = page.locator("#chart-profile-read").evaluate("el => el._fullLayout.xaxis.type")
            assert xaxis == "log"
            rows = page.locator("#profile-rates-body tr")
            expect(rows).to_have_count(4)
            assert rows.locator("code").all_inner_texts() == [
                "flops_dense",
                "flops_stencil",
                "call_s",
                "view_s",
            ]
            expect(rows.first).to_contain_text("20 GFLOP/s")
            expect(page.locator("#profile-meta")).to_contain_text("Test CPU")
            page.screenshot(path=str(tmp_path / "host-profile.png"), full_page=True)

            # The operator picks version 1: 4 sizes, 3 shared, no messages.
            page.get_by_label("Version", exact=True).select_option("1")
            expect(page.locator("#profile-meta")).to_contain_text("1 of 2")
            assert traces(page, "#chart-profile-read", 4) == expected("read", 4, 3)
            assert traces(page, "#chart-profile-rmw", 4) == expected("rmw", 4, 3)
            expect(page.locator("#chart-profile-messages")).to_be_hidden()
            expect(page.locator("#profile-messages-note")).to_contain_text("No message figures")
            expect(page.locator("#profile-meta")).to_contain_text("yes: fewer sizes")

            # At phone width the section does not make the page scroll sideways.
            page.set_viewport_size({"width": 390, "height": 844})
            page.reload()
            traces(page, "#chart-profile-read", 6)  # a fresh page shows the newest version
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            page.set_viewport_size({"width": 1280, "height": 900})

            # A host without a profile: a short hint, no charts.
            page.goto(server.base_url + "/hosts/h1")
            expect(page.locator("#profile-note")).to_contain_text("No profile yet")
            expect(page.locator("#profile-note")).to_contain_text("ppe profile --out h1.json")
            expect(page.locator("#profile-body")).to_be_hidden()
            expect(page.locator("#profile-pick")).to_be_hidden()
            assert b.errors == [] and b.external == []
        finally:
            browser.close()
