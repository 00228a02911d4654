"""Parameterization templates over HTTP (SQLite and PostgreSQL): stored checked or not at all,
owned like models, evaluated on every registered system from the store's own figures."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ppe.core.grammar import MAX_DEPTH

from .conftest import Env
from .test_svc_pmac import post_profile, synthetic_profile

T = "/api/v1/templates"
PROPHECY = "ADDM*N^3/(P-1) + 2*N*MPISR(L)/(P-1) + N*MPIBC(L)"
PARAMS = {"N": 500, "P": 4, "L": 8000}


def tmpl(name: str = "prophecy", text: str = PROPHECY, **kw: Any) -> dict[str, Any]:
    return {"name": name, "app": "sor", "text": text, **kw}


def post(env: Env, body: dict[str, Any], role: str = "app") -> Any:
    return env.client.post(T, json=body, headers=env.h(role))


def stored_names(env: Env) -> list[str]:
    r = env.client.get(T, headers=env.h("operator"))
    assert r.status_code == 200, r.text
    return [t["name"] for t in r.json()]


def seed_systems(env: Env) -> None:
    """h0 and h1 with properties and measured links between them (and cpu); h2 registered with
    properties only, lacking ADDM."""
    t0 = time.time() - 3600
    items: list[dict[str, Any]] = []
    figures = {"h0": (2e-4, 1.0e8, 0.6), "h1": (6e-4, 4.0e7, 0.8)}
    for k in range(40):
        wiggle = 1 + 0.05 * ((k % 5) - 2)
        for host, (lat, bw, cpu) in figures.items():
            peer = "h1" if host == "h0" else "h0"
            ts = t0 + 60 * k
            items += [
                {"resource": host, "metric": "cpu", "timestamp": ts, "value": cpu * wiggle},
                {
                    "resource": host,
                    "metric": "latency",
                    "peer": peer,
                    "timestamp": ts,
                    "value": lat * wiggle,
                },
                {
                    "resource": host,
                    "metric": "bandwidth",
                    "peer": peer,
                    "timestamp": ts,
                    "value": bw * wiggle,
                },
            ]
    r = env.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200, r.text
    for host, props in {
        "h0": {"ADDM": 2e-9, "site": "lab"},
        "h1": {"ADDM": 4e-9},
        "h2": {"benchmark": 1e-8},
    }.items():
        r = env.client.put(
            f"/api/v1/resources/{host}", json={"properties": props}, headers=env.h("operator")
        )
        assert r.status_code == 200, r.text


def forecast_mean(env: Env, host: str, metric: str, peer: str | None = None) -> float:
    r = env.client.get(
        f"/api/v1/forecasts/{host}/{metric}",
        params={"peer": peer} if peer else {},
        headers=env.h("operator"),
    )
    assert r.status_code == 200, r.text
    return float(r.json()["mean"])


def prophecy(
    addm: float, lat: float, bw: float, rounds: int, n: float, p: float, size: float
) -> float:
    sr = lat + size / bw
    return addm * n**3 / (p - 1) + 2 * n * sr / (p - 1) + n * rounds * sr


# ------------------------------------------------------------------ storing


def test_store_list_get_and_describe(env: Env) -> None:
    r = post(env, tmpl(description="Prophecy's example"))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["app"] == "sor" and body["text"] == PROPHECY
    assert set(body["names"]) == {"ADDM", "N", "P", "L", "latency", "bandwidth", "bcast_rounds"}
    assert body["functions"] == ["MPISR", "MPIBC"]
    assert body["owner_token_id"] is not None
    assert post(env, tmpl("other", "N * 2", app="jacobi")).status_code == 201
    assert stored_names(env) == ["other", "prophecy"]
    r = env.client.get(T, params={"app": "jacobi"}, headers=env.h("app"))
    assert [t["name"] for t in r.json()] == ["other"]
    r = env.client.get(f"{T}/prophecy", headers=env.h("app"))
    assert r.status_code == 200 and r.json()["description"] == "Prophecy's example"
    assert env.client.get(f"{T}/nope", headers=env.h("app")).status_code == 404


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("N * MPISR(L, 2)", ["MPISR() takes 1 argument(s), got 2"]),
        ("N +\nMPIBX(L) + X[1]", ["unknown function 'MPIBX'", "no indexed names"]),
        ("N > 2", ["a condition, not a number"]),
        ("N / (3 - 3)", ["division by zero"]),
        ("x = N", ["unexpected '='"]),
        ("(" * (MAX_DEPTH + 1) + "N" + ")" * (MAX_DEPTH + 1), ["MAX_DEPTH"]),
    ],
)
def test_bad_text_is_refused_naming_each_problem_and_nothing_is_stored(
    env: Env, text: str, fragments: list[str]
) -> None:
    r = post(env, tmpl(text=text))
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert len(detail) == len(fragments), detail
    for problem, fragment in zip(detail, fragments, strict=True):
        assert fragment in problem["message"]
        assert problem["line"] is not None and problem["type"] == "grammar"
    assert stored_names(env) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (tmpl(name="1bad"), "name"),
        (tmpl(app="has space"), "app"),
        (tmpl(text=""), "text"),
        (tmpl(text="N\x00"), "text"),
        ({**tmpl(), "extra": 1}, "extra"),
        ({"name": "x", "text": "N"}, "app"),
    ],
)
def test_bad_fields_are_422_naming_the_field(env: Env, body: dict[str, Any], field: str) -> None:
    r = post(env, body)
    assert r.status_code == 422, r.text
    assert any(p["field"] == field for p in r.json()["detail"]), r.json()
    assert stored_names(env) == []


def test_a_refused_replacement_keeps_the_stored_template(env: Env) -> None:
    assert post(env, tmpl(text="N * 2")).status_code == 201
    assert post(env, tmpl(text="N * (")).status_code == 422
    assert env.client.get(f"{T}/prophecy", headers=env.h("app")).json()["text"] == "N * 2"
    r = post(env, tmpl(text="N * 3", app="sor2"))
    assert r.status_code == 201 and r.json()["app"] == "sor2"


def test_only_the_owner_or_an_admin_may_replace_or_delete(env: Env) -> None:
    assert post(env, tmpl()).status_code == 201
    assert post(env, tmpl(text="N"), role="operator").status_code == 403
    r = env.client.delete(f"{T}/prophecy", headers=env.h("operator"))
    assert r.status_code == 403 and "not yours" in r.json()["detail"]
    assert env.client.delete(f"{T}/prophecy", headers=env.h("sensor")).status_code == 403
    assert env.client.delete(f"{T}/prophecy", headers=env.h("admin")).status_code == 204
    assert env.client.delete(f"{T}/prophecy", headers=env.h("admin")).status_code == 404
    assert post(env, tmpl(), role="operator").status_code == 201  # the name is free again
    assert env.client.delete(f"{T}/prophecy", headers=env.h("operator")).status_code == 204


def test_tokens_are_required(env: Env) -> None:
    assert env.client.get(T).status_code == 401
    assert env.client.post(T, json=tmpl()).status_code == 401
    assert post(env, tmpl(), role="sensor").status_code == 403


# ------------------------------------------------------------------ evaluating


def evaluate(env: Env, name: str = "prophecy", **body: Any) -> Any:
    return env.client.post(f"{T}/{name}/evaluate", json=body, headers=env.h("app"))


def test_every_registered_system_gets_its_value_or_the_missing_parameter(env: Env) -> None:
    seed_systems(env)
    assert post(env, tmpl()).status_code == 201
    r = evaluate(env, params=PARAMS, systems=None)
    assert r.status_code == 200, r.text
    results = {x["system"]: x for x in r.json()["results"]}
    assert list(results) == ["h0", "h1", "h2"]
    for host, addm, peer in (("h0", 2e-9, "h1"), ("h1", 4e-9, "h0")):
        lat = forecast_mean(env, host, "latency", peer)
        bw = forecast_mean(env, host, "bandwidth", peer)
        expected = prophecy(addm, lat, bw, 1, 500, 4, 8000)
        assert results[host]["value"] == pytest.approx(expected, rel=1e-12)
        assert results[host]["sources"] == {
            "ADDM": "property",
            "latency": "measured",
            "bandwidth": "measured",
            "bcast_rounds": "derived",
        }
        assert "problem" not in results[host] or results[host]["problem"] is None
    h2 = results["h2"]
    assert h2["value"] is None
    assert h2["problem"]["status"] == 422 and h2["problem"]["name"] == "ADDM"
    assert h2["problem"]["type"] == "missing_system_parameter"


def test_a_group_takes_its_worst_link_and_the_mean_of_its_properties(env: Env) -> None:
    seed_systems(env)
    assert post(env, tmpl()).status_code == 201
    r = evaluate(env, params=PARAMS, systems=["h0,h1", "h1"])
    assert r.status_code == 200, r.text
    group, single = r.json()["results"]
    assert group["hosts"] == ["h0", "h1"]
    lat = max(forecast_mean(env, "h0", "latency", "h1"), forecast_mean(env, "h1", "latency", "h0"))
    bw = min(
        forecast_mean(env, "h0", "bandwidth", "h1"), forecast_mean(env, "h1", "bandwidth", "h0")
    )
    assert group["parameters"]["ADDM"] == pytest.approx(3e-9)
    assert group["value"] == pytest.approx(prophecy(3e-9, lat, bw, 1, 500, 4, 8000), rel=1e-12)
    assert single["system"] == "h1"


def test_a_named_group_is_a_system_by_its_name(env: Env) -> None:
    seed_systems(env)
    assert post(env, tmpl()).status_code == 201
    g = "/api/v1/groups"
    r = env.client.put(f"{g}/rack1", json={"members": ["h0", "h1"]}, headers=env.h("operator"))
    assert r.status_code == 200, r.text
    assert r.json()["members"] == ["h0", "h1"]
    by_name, listed = evaluate(env, params=PARAMS, systems=["rack1", "h0,h1"]).json()["results"]
    assert by_name["system"] == "rack1" and by_name["hosts"] == ["h0", "h1"]
    assert by_name["value"] == pytest.approx(listed["value"], rel=1e-12)
    every = evaluate(env, params=PARAMS).json()["results"]
    assert [s["system"] for s in every] == ["h0", "h1", "h2", "rack1"]
    # bad groups change nothing; an app token reads but cannot write
    bad = [
        ({"members": ["h0", "h9"]}, "members[1]"),
        ({"members": ["h0", "h0"]}, "members"),
        ({"members": []}, "members"),
    ]
    for body, field in bad:
        r = env.client.put(f"{g}/rack1", json=body, headers=env.h("operator"))
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == field, r.text
    r = env.client.put(f"{g}/h2", json={"members": ["h0"]}, headers=env.h("operator"))
    assert r.status_code == 422 and "resource's name" in r.text
    assert (
        env.client.put(f"{g}/x", json={"members": ["h0"]}, headers=env.h("app")).status_code == 403
    )
    assert [x["name"] for x in env.client.get(g, headers=env.h("app")).json()] == ["rack1"]
    assert env.client.get(f"{g}/rack1", headers=env.h("app")).json()["members"] == ["h0", "h1"]
    assert env.client.delete(f"{g}/rack1", headers=env.h("operator")).status_code == 204
    assert env.client.get(f"{g}/rack1", headers=env.h("app")).status_code == 404
    r = evaluate(env, params=PARAMS, systems=["rack1"])
    assert r.status_code == 404  # now an unknown resource


def test_a_system_lacking_a_measured_figure_is_told_what_would_supply_it(env: Env) -> None:
    seed_systems(env)
    assert post(env, tmpl(text="N * MPISR(L)")).status_code == 201
    r = evaluate(env, params={"N": 3, "L": 10}, systems=["h2"])
    assert r.status_code == 422, r.text  # the one system chosen cannot give a value
    [h2] = r.json()["detail"]
    assert h2["type"] == "missing_system_parameter"
    assert h2["name"] == "latency" and "measurements" in h2["message"]
    assert "'h2'" in h2["message"]


def test_chosen_systems_that_all_lack_a_parameter_are_a_422_naming_it(env: Env) -> None:
    """Issue 18's bad input: a template naming a system parameter the chosen system lacks
    is a 4xx; a list where some systems have a value still answers per system."""
    seed_systems(env)
    assert post(env, tmpl()).status_code == 201
    r = evaluate(env, params=PARAMS, systems=["h2"])
    assert r.status_code == 422, r.text
    [p] = r.json()["detail"]
    assert p["type"] == "missing_system_parameter" and p["name"] == "ADDM"
    assert "system 'h2' has no parameter 'ADDM'" in p["message"]
    r = evaluate(env, params=PARAMS, systems=["h0", "h2"])
    assert r.status_code == 200, r.text
    h0, h2 = r.json()["results"]
    assert h0["value"] is not None and h2["value"] is None
    assert h2["problem"]["name"] == "ADDM"


def test_given_parameters_override_the_systems(env: Env) -> None:
    seed_systems(env)
    assert post(env, tmpl(text="ADDM * N")).status_code == 201
    r = evaluate(env, params={"N": 10, "ADDM": 0.5}, systems=["h2"])
    assert r.json()["results"][0]["value"] == 5.0


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"params": {"N": 1, "Q": 2}, "systems": ["h0"]}, 422, None),  # Q: not the template's
        ({"params": {"N": "x"}, "systems": ["h0"]}, 422, "params.N"),
        ({"params": {"N": 1e300}, "systems": ["h0"]}, 422, "params.N"),
        ({"params": {}, "systems": []}, 422, "systems"),
        ({"params": {}, "systems": ["h0,,h1"]}, 422, "systems[0]"),
        ({"params": {}, "systems": ["h0,h0"]}, 422, "systems[0]"),
        ({"params": {}, "systems": ["h0", "nowhere"]}, 404, "systems"),
        ({"params": {}, "extra": 1}, 422, "extra"),
    ],
)
def test_bad_evaluation_requests(
    env: Env, body: dict[str, Any], status: int, field: str | None
) -> None:
    seed_systems(env)
    assert post(env, tmpl(text="N * ADDM")).status_code == 201
    r = env.client.post(f"{T}/prophecy/evaluate", json=body, headers=env.h("app"))
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    if field is None:
        assert detail[0]["name"] == "Q" and "does not use" in detail[0]["message"]
    else:
        assert any(p.get("field") == field for p in detail), detail


def test_evaluating_an_unknown_template_is_404(env: Env) -> None:
    r = evaluate(env, params={}, systems=None)
    assert r.status_code == 404
    assert r.json()["detail"][0]["field"] == "path.name"


# ------------------------------------------------------------------ machine profiles


def test_a_hosts_profile_figures_are_system_parameters(env: Env) -> None:
    """h0 and h1 (half as fast) have stored profiles, h2 has none: per element, 10 stencil
    flops and 8 bytes updated in DRAM."""
    for host, slower in (("h0", 3.0), ("h1", 2.0)):
        assert post_profile(env, host, synthetic_profile(host, slower)).status_code == 201
    # h0's newer version counts, not its first
    newer = synthetic_profile("h0", 1.0, measured_at=1.8e9)
    assert post_profile(env, "h0", newer).status_code == 201
    for host, props in {"h0": {"flops_stencil": 1.0}, "h2": {"benchmark": 1e-8}}.items():
        r = env.client.put(
            f"/api/v1/resources/{host}", json={"properties": props}, headers=env.h("operator")
        )
        assert r.status_code == 200, r.text
    text = "N * (10 / flops_stencil + 8 / mem_rmw_unit_largest)"
    assert post(env, tmpl(text=text)).status_code == 201
    r = evaluate(env, params={"N": 1000}, systems=["h0", "h1", "h2", "h0,h1", "h0,h2"])
    assert r.status_code == 200, r.text
    h0, h1, h2, pair, with_h2 = r.json()["results"]
    # synthetic_profile: stencil 2e9 flop/s, every curve 4e9 B/s at 1 KiB and 1e9 at 1 GiB
    assert h0["value"] == pytest.approx(1000 * (10 / 2e9 + 8 / 1e9), rel=1e-12)
    assert h0["parameters"]["flops_stencil"] == pytest.approx(2e9, rel=1e-12)  # not the property
    assert h0["sources"] == {"flops_stencil": "profile", "mem_rmw_unit_largest": "profile"}
    assert h1["value"] == pytest.approx(2 * h0["value"], rel=1e-12)
    assert pair["value"] == pytest.approx(h1["value"], rel=1e-12)  # the slower member's
    for missing in (h2, with_h2):
        assert missing["value"] is None
        problem = missing["problem"]
        assert problem["type"] == "missing_system_parameter"
        assert problem["name"] == "flops_stencil"
        assert "resource h2 has no machine profile" in problem["message"]
        assert "ppe profile --out" in problem["message"]
    assert "/api/v1/resources/h2/profiles" in h2["problem"]["message"]
