"""The Models page and its data route: signed-in only, JSON that matches ppe.empirical on the
same runs, coupling from pair runs, bad requests refused with the problem named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ppe.empirical.data import Measurements
from ppe.empirical.prophecy import fit_graph_type
from ppe.empirical.search import search
from ppe.service.dashboard.models_data import DATA_PATH
from ppe.service.dashboard.routes import CSP

from .conftest import ORIGIN, Dash
from .test_dash_pages import external_urls, parse

NS = [16, 32, 64, 128, 256]
PS = [1, 2, 4]


def cost(n: float, p: float) -> float:
    return 2e-6 * n**2 / p + 1e-3 * np.log2(n)


def synthetic_runs() -> list[dict[str, Any]]:
    """A kernel over n and p with three repetitions each, plus kernels A, B and A+B at two
    inputs (for the coupling table)."""
    rng = np.random.default_rng(7)
    runs = []
    for n in NS:
        for p in PS:
            mean = cost(n, p)
            runs.append(
                {
                    "app": "sweep",
                    "kernel": "solve",
                    "params": {"n": n, "p": p},
                    "values": (mean * (1 + 0.02 * rng.standard_normal(3))).tolist(),
                }
            )
    times = {("A", 64): 1.0, ("B", 64): 2.0, ("A+B", 64): 2.7}
    times |= {("A", 128): 4.0, ("B", 128): 8.0, ("A+B", 128): 11.0}
    for (kernel, n), t in times.items():
        runs.append(
            {"app": "sweep", "kernel": kernel, "params": {"n": n, "p": 1}, "values": [t, t]}
        )
    return runs


def post_runs(dash: Dash, runs: list[dict[str, Any]]) -> None:
    r = dash.client.post(
        "/api/v1/runs",
        json={"runs": runs},
        headers={"Authorization": f"Bearer {dash.tokens['app']}"},
    )
    assert r.status_code == 201, r.text


def data(dash: Dash, path: str = "", **query: Any) -> Any:
    """The data route as the page calls it: session cookie, CSRF header, our origin."""
    return dash.client.get(
        DATA_PATH + path,
        params=query,
        headers={"X-PPE-CSRF": dash.form_csrf("/"), "Origin": ORIGIN},
    )


@pytest.fixture
def signed_in(dash: Dash) -> Dash:
    post_runs(dash, synthetic_runs())
    dash.login("operator")
    return dash


def test_the_page_renders_for_a_signed_in_operator(signed_in: Dash) -> None:
    r = signed_in.client.get("/models")
    assert r.status_code == 200
    assert r.headers["content-security-policy"] == CSP
    html = r.text
    assert 'aria-current="page">Models</a>' in html
    assert "/dashboard/static/models.js" in html
    assert f'data-path="{DATA_PATH}"' in html
    assert external_urls(html) == []
    markup = parse(html)
    inline = [ref for ref in markup.refs if ref[0] == "script" and not ref[2]]
    assert inline == []
    assert "<script>" not in html  # the CSP forbids inline scripts: the page has none
    unlabelled = [
        c for c in markup.controls if c.get("id") not in markup.label_for and not c["_in_label"]
    ]
    assert unlabelled == []


def test_signed_out_visitors_go_to_the_login_form_and_the_data_route_refuses(dash: Dash) -> None:
    r = dash.client.get("/models", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login?next=%2Fmodels"
    assert dash.client.get(DATA_PATH).status_code == 401
    app = {"Authorization": f"Bearer {dash.tokens['app']}"}
    assert dash.client.get(DATA_PATH, headers=app).status_code == 403  # operators only
    dash.login("operator")
    assert dash.client.get(DATA_PATH).status_code == 401  # the cookie alone is not enough
    assert data(dash).status_code == 200


def test_catalogue_lists_apps_kernels_and_parameter_values(signed_in: Dash) -> None:
    r = data(signed_in)
    assert r.status_code == 200, r.text
    [app] = r.json()["apps"]
    assert app["app"] == "sweep"
    kernels = {k["kernel"]: k for k in app["kernels"]}
    assert sorted(kernels) == ["A", "A+B", "B", "solve"]
    assert kernels["solve"]["runs"] == len(NS) * len(PS)
    assert kernels["solve"]["params"] == {"n": NS, "p": PS}
    assert kernels["solve"]["metrics"] == ["time"]
    assert r.json()["types"][0] == "search" and len(r.json()["types"]) == 14


def test_a_prophecy_fit_matches_the_library_on_the_same_slice(signed_in: Dash) -> None:
    r = data(signed_in, "/fit", app="sweep", kernel="solve", x="n", type="quadratic")
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["fixed"] == {"p": 1.0}  # every p has all n: the smallest is held
    assert [pt["x"] for pt in d["points"]] == NS
    runs = [x for x in synthetic_runs() if x["kernel"] == "solve" and x["params"]["p"] == 1]
    pairs = [({"n": x["params"]["n"]}, v) for x in runs for v in x["values"]]
    expected = fit_graph_type(Measurements.from_runs(["n"], pairs), "quadratic")
    assert d["model"]["formula"] == expected.formula
    assert d["model"]["type"] == "quadratic"
    for pt, x in zip(d["points"], runs, strict=True):
        assert pt["values"] == pytest.approx(x["values"])
    e = d["extrapolated"]
    assert e["point"] == {"n": 2.0 * max(NS)}
    assert e["mean"] == pytest.approx(expected.predict({"n": 512.0}).mean)
    assert e["interval"][0] < e["mean"] < e["interval"][1]
    c = d["curve"]
    assert c["x"][0] == min(NS) and c["x"][-1] == pytest.approx(512.0)
    assert all(lo <= m <= hi for lo, m, hi in zip(c["lower"], c["mean"], c["upper"], strict=True))


def test_the_search_surface_and_coupling(signed_in: Dash) -> None:
    r = data(signed_in, "/fit", app="sweep", kernel="solve", x="n", at=1000)
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["model"]["type"] == "search"
    assert d["extrapolated"]["point"] == {"n": 1000.0}
    runs = [x for x in synthetic_runs() if x["kernel"] == "solve" and x["params"]["p"] == 1]
    pairs = [({"n": x["params"]["n"]}, v) for x in runs for v in x["values"]]
    expected = search(Measurements.from_runs(["n"], pairs))
    assert d["model"]["formula"] == expected.formula
    assert d["extrapolated"]["mean"] == pytest.approx(expected.predict({"n": 1000.0}).mean)
    lo, hi = d["extrapolated"]["interval"]
    assert lo < d["extrapolated"]["mean"] < hi
    s = d["surface"]
    assert (s["x"], s["y"]) == ("n", "p")
    assert np.asarray(s["z"]).shape == (len(s["ys"]), len(s["xs"]))
    assert len(s["points"]["mean"]) == len(NS) * len(PS)
    c = d["coupling"]
    assert c["pairs"] == ["A+B"] and c["loop"] == ["A", "B"]
    by_input = {row["input"]: row for row in c["rows"]}
    assert by_input["n=64, p=1"]["couplings"]["A+B"] == pytest.approx(2.7 / 3.0)
    assert by_input["n=128, p=1"]["couplings"]["A+B"] == pytest.approx(11.0 / 12.0)
    assert c["stability"]["stable"] is True  # 0.9 and 0.917 differ by under 10 %
    none = data(signed_in, "/fit", app="sweep", kernel="solve", x="p", y="none").json()
    assert none["surface"] is None and none["fixed"] == {"n": 16.0}


@pytest.mark.parametrize(
    ("query", "status", "fragment"),
    [
        ({"kernel": "solve", "x": "n", "type": "septic"}, 422, "unknown type"),
        ({"kernel": "solve", "x": "q"}, 422, "not a parameter"),
        ({"kernel": "nope", "x": "n"}, 404, "no completed time runs"),
        ({"kernel": "A", "x": "n"}, 422, "distinct points"),  # two points: too few to search
        ({"kernel": "solve", "x": "n", "y": "n"}, 422, "another of"),
        ({"kernel": "solve", "x": "n", "at": -1}, 422, "greater than 0"),
    ],
)
def test_bad_requests_name_the_problem(
    signed_in: Dash, query: dict[str, Any], status: int, fragment: str
) -> None:
    r = data(signed_in, "/fit", app="sweep", **query)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    text = " ".join(str(p.get("reason") or p.get("message")) for p in detail)
    assert fragment in text, detail
