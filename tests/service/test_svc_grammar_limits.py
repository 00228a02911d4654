"""The grammar's size limits over HTTP, on SQLite and PostgreSQL: the reported requests (stored
and inline models thousands of components or brackets deep) are answered 422 with the grammar
error naming the limit, never 500; models stored before the limits existed are refused the same
way when used; models at the limits and the built-in ones are served as before."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ppe.core import builtin_models
from ppe.core.grammar import MAX_CHAIN, MAX_DEFINITIONS, MAX_DEPTH
from ppe.service.store.db import make_engine, make_sessionmaker, session_scope
from ppe.service.store.models import UserModel

HOSTS = ["h0", "h1", "h2"]
TAIL = (
    "param n\nparam I\n"
    "HostTime[p] = I * (rows[p] * n * Benchmark[p] / FracAvailCPU[p] + X)\n"
    "ExecTime = max(p in hosts: HostTime[p])\n"
)


def chain(k: int) -> str:
    """``A0 = 0``, ``A1 = A0 + 0``, ...: a chain of ``k`` components (X, HostTime and
    ExecTime included)."""
    return (
        "A0 = 0\n"
        + "".join(f"A{i} = A{i - 1} + 0\n" for i in range(1, k - 3))
        + f"X = A{k - 4}\n"
        + TAIL
    )


def parens(k: int) -> str:
    return "X = " + "(" * k + "0" + ")" * k + "\n" + TAIL


@pytest.fixture
def served(env):  # type: ignore[no-untyped-def]
    """Three measured hosts with a benchmark each."""
    rng = np.random.default_rng(0)
    t0 = 1_700_000_000.0
    items = [
        {
            "resource": host,
            "metric": "cpu",
            "timestamp": t0 + 60.0 * k,
            "value": float(np.clip(0.6 + 0.1 * rng.standard_normal(), 0.05, 1.0)),
        }
        for host in HOSTS
        for k in range(200)
    ]
    r = env.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200, r.text
    for host in HOSTS:
        r = env.client.put(
            f"/api/v1/resources/{host}",
            json={"properties": {"benchmark": 2e-8}},
            headers=env.h("operator"),
        )
        assert r.status_code == 200, r.text
    return env


def store(env: Any, name: str, text: str, role: str = "app") -> Any:
    assert len(text) <= 100_000  # within the schema: the answer is the grammar's
    return env.client.post("/api/v1/models", json={"name": name, "text": text}, headers=env.h(role))


def store_unchecked(env: Any, name: str, text: str) -> None:
    """A model as a store written before the limits existed may hold it."""
    engine = make_engine(env.url)
    with session_scope(make_sessionmaker(engine)) as s:
        s.add(UserModel(name=name, text=text, description="stored before the limits"))
    engine.dispose()


def schedule(env: Any, app: str) -> Any:
    body = {"app": app, "n": 300, "iterations": 10, "hosts": HOSTS}
    return env.client.post("/api/v1/schedules", json=body, headers=env.h("app"))


def predict(env: Any, **model: str) -> Any:
    body = {
        **model,
        "params": {"n": 300, "I": 10},
        "allocation": [{"host": h, "rows": 100} for h in HOSTS],
    }
    return env.client.post("/api/v1/predictions", json=body, headers=env.h("app"))


def refused(r: Any, limit: str) -> dict[str, Any]:
    """The 422 naming ``limit`` in the grammar error shape every model error has."""
    assert r.status_code == 422, r.text
    first = r.json()["detail"][0]
    assert set(first) == {"type", "message", "line", "column", "token", "name"}
    assert first["type"] == "grammar"
    maximum = {"MAX_DEPTH": MAX_DEPTH, "MAX_DEFINITIONS": MAX_DEFINITIONS, "MAX_CHAIN": MAX_CHAIN}
    assert f"limit of {maximum[limit]}" in first["message"] and limit in first["message"]
    return dict(first)


def test_stored_4000_deep_chain_is_refused_when_registered(served) -> None:  # type: ignore[no-untyped-def]
    first = refused(store(served, "deep-chain", chain(4000)), "MAX_DEFINITIONS")
    assert (first["line"], first["column"], first["name"]) == (MAX_DEFINITIONS + 1, 1, "A1000")
    listed = served.client.get("/api/v1/models", headers=served.h("app")).json()
    assert "deep-chain" not in [m["name"] for m in listed]
    r = schedule(served, "deep-chain")
    assert r.status_code == 422 and "unknown model" in r.text


def test_stored_chain_over_the_chain_limit_is_refused(served) -> None:  # type: ignore[no-untyped-def]
    first = refused(store(served, "long-chain", chain(MAX_CHAIN + 1)), "MAX_CHAIN")
    assert first["name"] == "ExecTime" and "ExecTime -> HostTime -> X -> ..." in first["message"]


def test_inline_20000_line_chain_is_refused(served) -> None:  # type: ignore[no-untyped-def]
    """Over the request's text cap, the schema refuses it before any parsing; under the cap, the
    definition limit does."""
    text = chain(20000)
    r = predict(served, grammar=text)
    assert r.status_code == 422, r.text
    (first,) = r.json()["detail"]
    assert first["field"] == "grammar" and len(text) > 100_000
    assert "100000" in first["reason"]
    refused(predict(served, grammar=chain(4000)), "MAX_DEFINITIONS")


def test_inline_5000_deep_parentheses_are_refused(served) -> None:  # type: ignore[no-untyped-def]
    first = refused(predict(served, grammar=parens(5000)), "MAX_DEPTH")
    assert (first["line"], first["column"], first["token"]) == (1, 5 + MAX_DEPTH, "(")


def test_stored_3000_deep_parentheses_are_refused(served) -> None:  # type: ignore[no-untyped-def]
    refused(store(served, "deep-parens", parens(3000)), "MAX_DEPTH")
    refused(store(served, "deep-sum", "X = 0" + " + 0" * 3000 + "\n" + TAIL), "MAX_DEPTH")


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        (chain(4000), "MAX_DEFINITIONS"),
        (chain(MAX_CHAIN + 50), "MAX_CHAIN"),
        (parens(3000), "MAX_DEPTH"),
    ],
    ids=["chain-4000", "chain-250", "parens-3000"],
)
def test_models_stored_before_the_limits_are_refused_when_used(served, text, limit) -> None:  # type: ignore[no-untyped-def]
    store_unchecked(served, "old-model", text)
    refused(schedule(served, "old-model"), limit)
    refused(predict(served, model="old-model"), limit)
    # the store still lists it, so an admin can see and replace it (it has no owner)
    r = store(served, "old-model", chain(10), role="admin")
    assert r.status_code == 201, r.text
    assert schedule(served, "old-model").status_code == 200


def test_models_at_the_limits_are_served(served) -> None:  # type: ignore[no-untyped-def]
    deep = "(" * (MAX_DEPTH - 2) + "A0 + 0" + ")" * (MAX_DEPTH - 2)  # MAX_DEPTH levels
    text = chain(MAX_CHAIN).replace("A1 = A0 + 0\n", f"A1 = {deep}\n")
    assert store(served, "at-the-limits", text).status_code == 201
    r = schedule(served, "at-the-limits")
    assert r.status_code == 200, r.text
    assert sum(a["rows"] for a in r.json()["allocation"]) == 300
    assert predict(served, grammar=text).status_code == 200


def test_builtin_models_are_served_as_before(served) -> None:  # type: ignore[no-untyped-def]
    for name, text in builtin_models().items():
        assert schedule(served, name).status_code == 200
        by_name = predict(served, model=name)
        inline = predict(served, grammar=text)
        assert by_name.status_code == inline.status_code == 200
        assert by_name.json()["makespan"] == inline.json()["makespan"]
