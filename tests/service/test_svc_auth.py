"""The role matrix: 401 without a valid token, 403 with the wrong role."""

from __future__ import annotations

import time

import pytest

from ppe.service.api.whatif import EXAMPLE_SPEC

BATCH = {"measurements": [{"resource": "h1", "metric": "cpu", "timestamp": 1e9, "value": 0.5}]}
CASES = [
    ("POST", "/api/v1/measurements", BATCH, {"sensor", "admin"}),
    ("GET", "/api/v1/resources", None, {"app", "operator", "admin"}),
    ("PUT", "/api/v1/resources/h9", {"properties": {"benchmark": 2e-8}}, {"operator", "admin"}),
    ("POST", "/api/v1/tokens", {"role": "sensor"}, {"admin"}),
    ("POST", "/api/v1/whatif", {"spec": EXAMPLE_SPEC}, {"operator", "admin"}),
    ("GET", "/api/v1/whatif", None, {"app", "operator", "admin"}),
]


@pytest.mark.parametrize(("method", "path", "body", "allowed"), CASES, ids=[c[1] for c in CASES])
def test_role_matrix(env, method, path, body, allowed) -> None:  # type: ignore[no-untyped-def]
    call = lambda headers: env.client.request(method, path, json=body, headers=headers)  # noqa: E731
    assert call({}).status_code == 401
    assert call({"Authorization": "Bearer not-a-token"}).status_code == 401
    for role in ("sensor", "app", "operator", "admin"):
        code = call(env.h(role)).status_code
        if role in allowed:
            assert code in (200, 201), (role, code)
        else:
            assert code == 403, (role, code)


def test_rejected_auth_changes_nothing(env) -> None:  # type: ignore[no-untyped-def]
    env.client.post("/api/v1/measurements", json=BATCH, headers=env.h("app"))
    env.client.post("/api/v1/measurements", json=BATCH)
    assert env.client.get("/api/v1/resources", headers=env.h("app")).json() == []


def test_admin_issues_working_tokens(env) -> None:  # type: ignore[no-untyped-def]
    r = env.client.post("/api/v1/tokens", json={"role": "sensor"}, headers=env.h("admin"))
    token = r.json()["token"]
    batch = {
        "measurements": [
            {"resource": "h1", "metric": "cpu", "timestamp": time.time(), "value": 0.5}
        ]
    }
    r = env.client.post(
        "/api/v1/measurements", json=batch, headers={"Authorization": f"Bearer {token}"}
    )
    assert r.status_code == 200


def test_put_resource_properties_merge_and_validate(env) -> None:  # type: ignore[no-untyped-def]
    h = env.h("operator")
    r = env.client.put("/api/v1/resources/h1", json={"properties": {"benchmark": 2e-8}}, headers=h)
    assert r.json()["properties"] == {"benchmark": 2e-8}
    r = env.client.put(
        "/api/v1/resources/h1", json={"properties": {"memory_bytes": 2**30}}, headers=h
    )
    assert r.json()["properties"] == {"benchmark": 2e-8, "memory_bytes": 2**30}
    r = env.client.put("/api/v1/resources/h1", json={"properties": {"benchmark": -1}}, headers=h)
    assert r.status_code == 422
    assert (
        env.client.get("/api/v1/resources/h1", headers=h).json()["properties"]["benchmark"] == 2e-8
    )


def test_health_reports_store(env) -> None:  # type: ignore[no-untyped-def]
    r = env.client.get("/healthz")
    assert r.status_code == 200
    assert r.json()["store"] == "up"
    assert env.client.get("/openapi.json").json()["paths"]["/api/v1/measurements"]
