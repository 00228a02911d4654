"""The dashboard in real headless Chromium against a real `ppe serve` fed with real trace data.

Logs in, sees both hosts on the overview, opens a host page and finds the forecast chart drawn,
computes schedules in the playground and reads the strips back, and saves a 1280 px screenshot of
every page into docs/screenshots/. Every request the browser makes must stay on the server's
origin, and the pages must log no error.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import httpx
import numpy as np
import pytest

from ppe.service.api.whatif import EXAMPLE_SPEC
from ppe.traces import read_trace
from tests.whatif.conftest import two_nodesets

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Page, Route

    from ..conftest import ServerProcess

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
KERNEL_RUNS = ROOT / "examples" / "runs" / "kernels.csv"  # real kernels measured on this machine
# Two real VMs: 65 switches between idle and saturated (multi-mode), 413 varies within one mode.
HOSTS = {"vm65": "65.csv.gz", "vm413": "413.csv.gz"}
SAMPLES = 288  # one day at the traces' 300 s spacing
LINK_CAPACITY = 12.5e6  # B/s, a 100 Mbit/s link; the trace's own network traffic competes for it
BENCHMARK = {"vm65": 2.0e-8, "vm413": 3.0e-8}  # dedicated s per element update
REPLAY_STRATEGIES = ["block", "mean", "conservative"]
# A small replay job, run by the server while the browser visits the other pages.
REPLAY = {
    "traces": ["65.csv.gz", "413.csv.gz", "392.csv.gz", "41.csv.gz"],  # all in tests/data too
    "hosts": 3,
    "starts": 6,
    "n": 2000,
    "iterations": 100,
    "executor": "serial",
    "strategies": REPLAY_STRATEGIES,
    "replan": ["mean"],
}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason=f"{CHROMIUM} not installed (apt-get install chromium); .ci/run installs it",
    ),
]


def ppe_command() -> list[str]:
    exe = Path(sys.executable).with_name("ppe")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ppe"]


def make_token(db_url: str, role: str) -> str:
    out = subprocess.run(
        [*ppe_command(), "token", "create", "--role", role, "--db", db_url],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout.strip().splitlines()[-1]


def trace_measurements(traces_dir: Path, now: float) -> list[dict[str, object]]:
    """The last day of each trace, shifted so its newest sample is a few seconds old.

    CPU availability is the trace's own `1 - usage/100` (clipped); a link's available bandwidth is
    the link capacity minus the traffic the VM itself moved in that interval.
    """
    items: list[dict[str, object]] = []
    names = list(HOSTS)
    for i, (name, file) in enumerate(HOSTS.items()):
        trace = read_trace(traces_dir / file).alive()
        ts = trace.timestamps[-SAMPLES:]
        ts = ts - ts[-1] + now - 5.0 * (i + 1)
        avail = trace.availability[-SAMPLES:]
        items += [
            {"resource": name, "metric": "cpu", "timestamp": float(t), "value": float(v)}
            for t, v in zip(ts, avail, strict=True)
        ]
        peer = names[(i + 1) % len(names)]
        rx = trace.net_rx_kbs[-SAMPLES:] if trace.net_rx_kbs is not None else np.zeros(len(ts))
        tx = trace.net_tx_kbs[-SAMPLES:] if trace.net_tx_kbs is not None else np.zeros(len(ts))
        bw = np.clip(LINK_CAPACITY - (rx + tx) * 1000.0, 0.05 * LINK_CAPACITY, LINK_CAPACITY)
        items += [
            {
                "resource": name,
                "metric": "bandwidth",
                "peer": peer,
                "timestamp": float(t),
                "value": float(v),
            }
            for t, v in zip(ts, bw, strict=True)
        ]
    return items


@dataclass
class Browser:
    """Chromium with every request outside the server's origin recorded and refused."""

    base_url: str
    page: Page | None = None
    external: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        self.page = page

        def guard(route: Route) -> None:
            url = route.request.url
            if (
                url.startswith(self.base_url + "/")
                or url.startswith("data:")
                or url.startswith("blob:")
            ):
                route.continue_()
            else:
                self.external.append(url)
                route.abort()

        page.route("**/*", guard)
        page.on("console", self.on_console)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))

    def on_console(self, message: ConsoleMessage) -> None:
        """Errors fail the test, except the API's own 4xx answers the pages handle (409: too
        little data yet; 404: an endpoint this server does not offer)."""
        if message.type != "error":
            return
        url = (message.location or {}).get("url", "")
        if message.text.startswith("Failed to load resource") and "/api/v1/" in url:
            return
        self.errors.append(f"console: {message.text} ({url})")


class Strip(TypedDict):
    """One strategy card of the playground: its rows per host."""

    strategy: str
    rows: dict[str, int]


class Found(TypedDict, total=False):
    """What the walkthrough read back from the pages."""

    overview_hosts: list[str]
    history_traces: int
    predictor: str
    strips: list[Strip]
    replay_strategies: list[str]
    model_traces: int
    cubic_formula: str
    surface_traces: list[str]
    unlabelled: list[str]
    phone_widths: dict[str, int]
    external: list[str]
    errors: list[str]


UNLABELLED_JS = """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea, button')]
    .filter(el => !((el.labels && el.labels.length) || el.getAttribute('aria-label')
                    || el.getAttribute('aria-labelledby') || (el.tagName === 'BUTTON' && el.textContent.trim())))
    .map(el => el.outerHTML.slice(0, 120))"""


def walkthrough(base_url: str, operator_token: str, out_dir: Path) -> Found:
    """Drive the dashboard like an operator would; return what was read back from the pages."""
    from playwright.sync_api import expect, sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    found: Found = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            b = Browser(base_url)
            page = context.new_page()
            b.attach(page)
            page.set_default_timeout(20_000)

            # Login: an unauthenticated visit lands on the form, which brings us back.
            page.goto(base_url + "/playground")
            expect(page).to_have_url(f"{base_url}/login?next=%2Fplayground")
            expect(page.get_by_label("Token")).to_be_visible()
            page.screenshot(path=str(out_dir / "login.png"))
            page.get_by_label("Token").fill(operator_token)
            page.get_by_role("button", name="Sign in").click()
            expect(page).to_have_url(base_url + "/playground")

            # Overview: both hosts, with forecasts filled in.
            page.get_by_role("link", name="Overview").click()
            rows = page.locator("#hosts-body tr[data-host]")
            expect(rows).to_have_count(len(HOSTS))
            found["overview_hosts"] = sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.host)"))
            expect(page.locator("#hosts-body .ival")).to_have_count(len(HOSTS))
            expect(page.locator("#status")).to_contain_text("Updated")
            page.screenshot(path=str(out_dir / "overview.png"), full_page=True)
            unlabelled = page.evaluate(UNLABELLED_JS)
            # Filtering narrows the list live.
            page.get_by_label("Filter", exact=True).fill("413")
            expect(rows).to_have_count(1)
            page.get_by_label("Filter", exact=True).fill("")

            # Host page: the history chart with its forecast band is drawn by plotly.
            page.get_by_role("link", name="vm65", exact=True).click()
            expect(page).to_have_url(base_url + "/hosts/vm65")
            history = page.locator("#chart-history")
            expect(history).to_have_class(re.compile(r"js-plotly-plot"))
            expect(history.locator("svg.main-svg").first).to_be_visible()
            found["history_traces"] = history.locator(".scatterlayer .trace").count()
            expect(page.locator("#chart-dist .barlayer .trace").first).to_be_attached()
            expect(page.locator("#chart-battery .barlayer .trace").first).to_be_attached()
            expect(page.locator("#links-body tr[data-peer]")).to_have_count(1)
            expect(page.locator("#status")).to_contain_text("Updated")
            found["predictor"] = page.locator("#t-predictor").inner_text()
            page.screenshot(path=str(out_dir / "host.png"), full_page=True)
            unlabelled += page.evaluate(UNLABELLED_JS)

            # Playground: schedules under three strategies, strips read back from the tables.
            page.get_by_role("link", name="Schedules").click()
            expect(page.locator('input[name="host"]')).to_have_count(len(HOSTS))
            page.get_by_label("Grid size n").fill("2000")
            page.get_by_label("Iterations").fill("50")
            page.get_by_role("button", name="Compute schedules").click()
            cards = page.locator(".strategy-card")
            expect(cards).to_have_count(3)
            expect(page.locator(".strategy-card table.strips")).to_have_count(3)
            strips = page.locator(".strategy-card").evaluate_all("""cards => cards.map(c => ({
                strategy: c.dataset.strategy,
                rows: Object.fromEntries([...c.querySelectorAll('tbody tr')].map(
                    r => [r.dataset.host, Number(r.dataset.rows)]))}))""")
            found["strips"] = strips
            expect(page.locator("#chart-strips .barlayer .trace")).to_have_count(len(HOSTS))
            expect(page.locator("#recent-body tr[data-id]").first).to_be_visible()
            page.screenshot(path=str(out_dir / "playground.png"), full_page=True)
            unlabelled += page.evaluate(UNLABELLED_JS)

            # Replays: the job runs to completion in the list, then its report draws.
            page.get_by_role("link", name="Replays").click()
            job = page.locator("#jobs-body tr[data-id]")
            expect(job).to_have_count(1)
            expect(job.locator(".badge")).to_have_text("done", timeout=90_000)
            page.screenshot(path=str(out_dir / "replays.png"), full_page=True)
            job.get_by_role("link", name="Report").click()
            expect(page.locator("#summary-body tr[data-strategy]")).to_have_count(4)
            for chart in ("#chart-makespans", "#chart-ratio", "#chart-time", "#chart-modes"):
                expect(page.locator(chart + " svg.main-svg").first).to_be_visible()
            found["replay_strategies"] = page.locator("#summary-body tr").evaluate_all(
                "rs => rs.map(r => r.dataset.strategy)"
            )
            page.screenshot(path=str(out_dir / "replay-report.png"), full_page=True)
            unlabelled += page.evaluate(UNLABELLED_JS)
            report_path = page.url[len(base_url) :]

            # Models: the real kernels' runs (examples/runs), the search's curve with its band
            # and extrapolated point; then SOR strips over n and p: the two-range surface.
            page.get_by_role("link", name="Models").click()
            expect(page).to_have_url(base_url + "/models")
            curve = page.locator("#chart-curve")
            expect(curve).to_have_class(re.compile(r"js-plotly-plot"))
            expect(page.locator("#t-type")).to_have_text("Automatic (model search)")
            found["model_traces"] = curve.locator(".scatterlayer .trace").count()
            page.get_by_label("Graph type").select_option("cubic")
            expect(page.locator("#t-type")).to_have_text("Cubic")
            found["cubic_formula"] = page.locator("#t-formula").inner_text()
            page.get_by_label("Application", exact=True).select_option("sor")
            page.get_by_label("Kernel", exact=True).select_option("strips")
            page.get_by_label("Graph type").select_option("search")
            expect(page.locator("#t-runs")).to_have_text("time of sor / strips")
            surface = page.locator("#chart-surface")
            expect(surface).to_have_class(re.compile(r"js-plotly-plot"))
            found["surface_traces"] = surface.evaluate("el => el.data.map(t => t.type)")
            expect(page.locator("#coupling-body tr.empty")).to_have_count(1)
            page.screenshot(path=str(out_dir / "models.png"), full_page=True)
            unlabelled += page.evaluate(UNLABELLED_JS)
            found["unlabelled"] = unlabelled

            # Phone width: no page scrolls sideways.
            page.set_viewport_size({"width": 390, "height": 844})
            widths: dict[str, int] = {}
            for path in ("/", "/hosts/vm65", "/playground", "/replays", report_path, "/models"):
                page.goto(base_url + path)
                page.wait_for_load_state("networkidle")
                widths[path] = page.evaluate("document.documentElement.scrollWidth")
            page.goto(base_url + "/")
            expect(page.locator("#hosts-body .ival")).to_have_count(len(HOSTS))
            page.screenshot(path=str(out_dir / "overview-phone.png"), full_page=True)
            found["phone_widths"] = widths

            # Sign out: the cookie is gone and pages send us back to the form.
            page.get_by_role("button", name="Sign out").click()
            expect(page).to_have_url(base_url + "/login")
            page.goto(base_url + "/")
            expect(page).to_have_url(base_url + "/login?next=%2F")
            found["external"] = b.external
            found["errors"] = b.errors
        finally:
            browser.close()
    return found


def test_dashboard_in_chromium(
    server_factory: type[ServerProcess], traces_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("playwright.sync_api")
    started = time.time()  # compared with file mtimes: wall clock
    db_url = f"sqlite:///{tmp_path / 'browser.db'}"
    tokens = {"sensor": make_token(db_url, "sensor")}  # the first call also migrates the store
    with ThreadPoolExecutor(1) as pool:  # the second overlaps the server's start-up
        operator_token = pool.submit(make_token, db_url, "operator")
        server = server_factory(db_url, "--trace-dir", str(traces_dir))
        tokens["operator"] = operator_token.result()
    with httpx.Client(base_url=server.base_url, timeout=30) as api:
        sensor = {"Authorization": f"Bearer {tokens['sensor']}"}
        operator = {"Authorization": f"Bearer {tokens['operator']}"}
        r = api.post(
            "/api/v1/measurements",
            headers=sensor,
            json={"measurements": trace_measurements(traces_dir, time.time())},
        )
        assert r.status_code == 200, r.text
        for name, bench in BENCHMARK.items():
            r = api.put(
                f"/api/v1/resources/{name}",
                headers=operator,
                json={"properties": {"benchmark": bench}},
            )
            assert r.status_code == 200, r.text
        r = api.post("/api/v1/replays", headers=operator, json=REPLAY)
        assert r.status_code == 202, r.text
    runs = subprocess.run(
        [*ppe_command(), "runs", "import", str(KERNEL_RUNS), "--db", db_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert runs.returncode == 0, runs.stderr

    found = walkthrough(server.base_url, tokens["operator"], SCREENSHOTS)

    assert found["overview_hosts"] == sorted(HOSTS)
    assert found["history_traces"] >= 3  # band, one-step forecasts, measurements (at least)
    assert found["predictor"] not in ("", "—")
    strips = found["strips"]
    assert [s["strategy"] for s in strips] == ["block", "mean", "conservative"]
    for s in strips:
        assert set(s["rows"]) == set(HOSTS), s
        assert sum(s["rows"].values()) == 2000, s
    assert strips[0]["rows"]["vm65"] == strips[0]["rows"]["vm413"] == 1000  # block: equal strips
    assert found["replay_strategies"] == [*REPLAY_STRATEGIES, "mean+replan"]
    # repetitions, point means, model, band (two traces), extrapolated point
    assert found["model_traces"] >= 6, found["model_traces"]
    assert found["cubic_formula"].count("n^") == 2, found["cubic_formula"]  # n^2, n^3
    assert found["surface_traces"] == ["surface", "scatter3d"]
    assert found["unlabelled"] == [], found["unlabelled"]  # including controls drawn by scripts
    assert all(w <= 390 for w in found["phone_widths"].values()), found["phone_widths"]
    assert found["external"] == [], found["external"]
    assert found["errors"] == [], found["errors"]
    for name in (
        "login",
        "overview",
        "host",
        "playground",
        "replays",
        "replay-report",
        "models",
        "overview-phone",
    ):
        shot = SCREENSHOTS / f"{name}.png"
        assert shot.stat().st_size > 10_000 and shot.stat().st_mtime >= started - 1, name


# ---- the What-if page ---------------------------------------------------------------------------

WHATIF_SPEC = EXAMPLE_SPEC.replace(
    'title = "4 nodes at 1 Gflop/s, SOR"', 'title = "browser what-if"'
)
WHATIF_TYPO = WHATIF_SPEC.replace("floatspeed =", "floatsped =")  # line 6
WHATIF_SWEEP = WHATIF_SPEC.replace("number = 4", 'number = "2..32 x2"')  # 5 points: a job
WHATIF_ABSENT = two_nodesets(n=1000).replace(  # 2 points: without 'fast', with it
    'name = "fast"\nnumber = 4', 'name = "fast"\nnumber = [0, 4]'
)
WHATIF_LONG = WHATIF_SPEC.replace("number = 4", 'number = "2000..2999 +1"').replace(
    "size = 1000", "size = 4000"
)  # 1000 points of 2000-3000 nodes: a job that runs for a while


class WhatIfFound(TypedDict, total=False):
    """What the What-if walkthrough read back from the page."""

    current: str
    problem_line: str
    problem_text: str
    marked_lines: list[str]
    checked: str
    point_rows: int
    bars: list[str]
    job_rows: int
    sweep_x: list[float]
    band: bool
    reopened_x: list[float]
    reopened_spec: str
    cancelled: str
    absent_cells: list[list[str]]
    absent_head: list[str]
    unlabelled: list[str]
    phone_width: int
    wide: list[str]
    external: list[str]
    errors: list[str]


def whatif_walkthrough(base_url: str, operator_token: str, out_dir: Path) -> WhatIfFound:
    """Start from the current hosts, break a spec, see the problem at its line, fix it, run it
    at once, run a sweep as a job, and open that job again."""
    from playwright.sync_api import expect, sync_playwright

    found: WhatIfFound = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            b = Browser(base_url)
            b.attach(page)
            page.set_default_timeout(20_000)
            page.goto(base_url + "/whatif")
            page.get_by_label("Token").fill(operator_token)
            page.get_by_role("button", name="Sign in").click()
            expect(page).to_have_url(base_url + "/whatif")
            editor = page.get_by_label("What-if spec (TOML)")
            expect(editor).to_have_value(re.compile(r"\[\[nodeset\]\]"))  # an example to start

            # The hosts I have now: one nodeset per registered host, on its live forecasts.
            page.get_by_role("button", name="The hosts I have now").click()
            expect(editor).to_have_value(re.compile(r'host = "vm413"'))
            found["current"] = editor.input_value()

            # A misspelt field: its problem beside the editor, its line marked in the gutter.
            editor.fill(WHATIF_TYPO)
            page.get_by_role("button", name="Validate").click()
            problem = page.locator("#problems li.problem")
            expect(problem).to_have_count(1)
            found["problem_line"] = problem.get_attribute("data-line") or ""
            found["problem_text"] = problem.inner_text()
            found["marked_lines"] = page.locator("#gutter span.err").all_inner_texts()
            expect(editor).to_have_attribute("aria-invalid", "true")
            problem.get_by_role("button").click()  # the caret goes to the line
            page.screenshot(path=str(out_dir / "whatif-problem.png"), full_page=True)

            # Fixed: valid, then run at once (one point of 4 nodes).
            editor.fill(WHATIF_SPEC)
            page.get_by_role("button", name="Validate").click()
            expect(page.locator("#checked-ok")).to_contain_text("Valid")
            found["checked"] = page.locator("#checked-ok").inner_text()
            expect(page.locator("#gutter span.err")).to_have_count(0)
            page.get_by_role("button", name="Run (analytic)").click()
            expect(page.locator("#run-status")).to_contain_text("Answered at once")
            found["point_rows"] = page.locator("#points-body tr").count()
            bars = page.locator("#chart-0")
            expect(bars).to_have_class(re.compile(r"js-plotly-plot"))
            found["bars"] = bars.evaluate("el => el.data.map(t => t.name)")

            # A sweep: a job followed to its end, the makespan with its interval band.
            editor.fill(WHATIF_SWEEP)
            page.get_by_role("button", name="Run (analytic)").click()
            expect(page.locator("#run-status")).to_contain_text("done", timeout=90_000)
            expect(page.locator("#points-body tr")).to_have_count(5)
            chart = page.locator("#chart-0")
            expect(chart.locator("svg.main-svg").first).to_be_visible()
            found["sweep_x"] = chart.evaluate(
                "el => el.data.find(t => t.name === 'predicted mean').x"
            )
            found["band"] = chart.evaluate("el => el.data.some(t => t.fill === 'tonexty')")
            jobs = page.locator("#jobs-body tr[data-id]")
            expect(jobs).to_have_count(1)
            expect(jobs.locator(".badge")).to_have_text("done")
            found["job_rows"] = jobs.count()
            page.screenshot(path=str(out_dir / "whatif.png"), full_page=True)
            found["unlabelled"] = page.evaluate(UNLABELLED_JS)

            # Opened again from the list after a reload: its spec and its plots.
            page.goto(base_url + "/whatif")
            jobs.first.get_by_role("link", name="Open").click()
            expect(page).to_have_url(re.compile(r"/whatif\?job=\d+$"))
            expect(page.locator("#points-body tr")).to_have_count(5)
            expect(page.locator("#chart-0")).to_have_class(re.compile(r"js-plotly-plot"))
            found["reopened_x"] = page.locator("#chart-0").evaluate(
                "el => el.data.find(t => t.name === 'predicted mean').x"
            )
            found["reopened_spec"] = editor.input_value()

            # A long sweep, cancelled from the list: the job stops and says so.
            reopened_url = page.url
            r = httpx.post(
                base_url + "/api/v1/whatif",
                json={"spec": WHATIF_LONG},
                headers={"Authorization": f"Bearer {operator_token}"},
                timeout=30,
            )
            assert r.status_code == 202, r.text
            page.goto(base_url + "/whatif")
            long_job = page.locator(f"#jobs-body tr[data-id='{r.json()['id']}']")
            long_job.get_by_role("button", name="Cancel").click()
            expect(long_job.locator(".badge")).to_have_text("cancelled")
            expect(long_job.get_by_role("button", name="Cancel")).to_have_count(0)
            found["cancelled"] = httpx.get(
                base_url + r.json()["url"],
                headers={"Authorization": f"Bearer {operator_token}"},
                timeout=30,
            ).json()["status"]
            # A nodeset absent from a point (number = 0): its cells are dashes in that row.
            r = httpx.post(
                base_url + "/api/v1/whatif",
                json={"spec": WHATIF_ABSENT, "executor": "serial"},
                headers={"Authorization": f"Bearer {operator_token}"},
                timeout=30,
            )
            assert r.status_code == 202, r.text
            page.goto(f"{base_url}/whatif?job={r.json()['id']}")
            rows = page.locator("#points-body tr")
            expect(rows).to_have_count(2, timeout=60_000)
            found["absent_cells"] = [rows.nth(i).locator("td").all_inner_texts() for i in range(2)]
            found["absent_head"] = page.locator("#points-head th").all_inner_texts()
            page.goto(reopened_url)

            page.set_viewport_size({"width": 390, "height": 844})
            page.reload()
            expect(page.locator("#chart-0")).to_have_class(re.compile(r"js-plotly-plot"))
            page.wait_for_load_state("networkidle")
            found["phone_width"] = page.evaluate("document.documentElement.scrollWidth")
            found["wide"] = page.evaluate("""() => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > 392)
                .map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 15)""")
            found["external"] = b.external
            found["errors"] = b.errors
        finally:
            browser.close()
    return found


def test_whatif_page_in_chromium(
    server_factory: type[ServerProcess], traces_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("playwright.sync_api")
    started = time.time()  # compared with file mtimes: wall clock
    db_url = f"sqlite:///{tmp_path / 'whatif.db'}"
    tokens = {"sensor": make_token(db_url, "sensor"), "operator": make_token(db_url, "operator")}
    server = server_factory(db_url)
    with httpx.Client(base_url=server.base_url, timeout=30) as api:
        r = api.post(
            "/api/v1/measurements",
            headers={"Authorization": f"Bearer {tokens['sensor']}"},
            json={"measurements": trace_measurements(traces_dir, time.time())},
        )
        assert r.status_code == 200, r.text
        for name, bench in BENCHMARK.items():
            r = api.put(
                f"/api/v1/resources/{name}",
                headers={"Authorization": f"Bearer {tokens['operator']}"},
                json={"properties": {"benchmark": bench}},
            )
            assert r.status_code == 200, r.text

    found = whatif_walkthrough(server.base_url, tokens["operator"], SCREENSHOTS)

    assert 'host = "vm65"' in found["current"] and 'load = {kind = "forecasts"}' in found["current"]
    assert found["problem_line"] == "6" and found["marked_lines"] == ["6"]
    assert "line 6, column 1" in found["problem_text"]
    assert "nodeset[0].floatsped" in found["problem_text"]
    assert "did you mean 'floatspeed'?" in found["problem_text"]
    assert found["checked"].startswith("Valid: 1 point")
    assert found["point_rows"] == 1
    assert found["bars"] == ["compute", "communication", "waiting"]
    assert found["sweep_x"] == [2, 4, 8, 16, 32] and found["band"]
    assert found["job_rows"] == 1
    assert found["reopened_x"] == found["sweep_x"]
    assert found["reopened_spec"] == WHATIF_SWEEP
    assert found["cancelled"] == "cancelled"
    assert [t.lower() for t in found["absent_head"][-4:]] == [  # (CSS sets the case)
        "fast rows/node",
        "fast compute / comm / wait",
        "slow rows/node",
        "slow compute / comm / wait",
    ]
    without, with_fast = found["absent_cells"]
    assert without[-4:-2] == ["—", "—"] and "—" not in with_fast, found["absent_cells"]
    assert found["unlabelled"] == [], found["unlabelled"]
    assert found["phone_width"] <= 390, found.get("wide")
    assert found["external"] == [], found["external"]
    assert found["errors"] == [], found["errors"]
    for name in ("whatif", "whatif-problem"):
        shot = SCREENSHOTS / f"{name}.png"
        assert shot.stat().st_size > 10_000 and shot.stat().st_mtime >= started - 1, name
