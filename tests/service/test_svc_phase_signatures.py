"""PAS2P phase signatures and their probes over HTTP (docs/pas2p.md, "Storage"): versions,
each validation failure naming its field with nothing stored, the routes beside PMaC's."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from ppe.pas2p import logical_trace, read_traces, signature
from ppe.pas2p.report import to_dict
from tests.pas2p.conftest import DATA
from tests.service.conftest import Env

URL = "/api/v1/signatures/phases"
FILES = sorted(DATA.glob("sor-n800-i100-r10.jsonl.*.gz"))
ANALYSIS = to_dict(signature(logical_trace(read_traces(FILES, "sor"))))


def body(**over: Any) -> dict[str, Any]:
    out = {
        "name": "sor-n800",
        "app": "sor",
        "parameters": {"n": 800, "iterations": 100, "residual_every": 10},
        "ranks": 2,
        "analysis": copy.deepcopy(ANALYSIS),
    }
    out.update(over)
    return out


def post(env: Env, payload: Any, role: str = "operator") -> Any:
    """Sent as written by json.dumps, NaN and Infinity literals included."""
    return env.client.post(
        URL,
        content=json.dumps(payload),
        headers={**env.h(role), "Content-Type": "application/json"},
    )


def test_versions_repost_and_reads(env: Env) -> None:
    first = post(env, body())
    assert first.status_code == 201, first.text
    got = first.json()
    assert got["version"] == 1 and got["app"] == "sor" and got["ranks"] == 2
    assert got["kept"] == ANALYSIS["signature"] and got["traced_s"] == ANALYSIS["traced_s"]
    assert got["predicted_s"] == ANALYSIS["predicted_s"]
    again = post(env, body())  # a client retrying: nothing new
    assert again.status_code == 200 and again.json()["version"] == 1
    other = post(env, body(parameters={"n": 800, "iterations": 200}))
    assert other.status_code == 201 and other.json()["version"] == 2
    assert post(env, body(name="jacobi-a", app="jacobi2d")).status_code == 201

    listed = env.client.get(URL, headers=env.h("app")).json()
    assert [(s["name"], s["version"]) for s in listed] == [("jacobi-a", 1), ("sor-n800", 2)]
    assert all("analysis" not in s for s in listed)
    newest = env.client.get(f"{URL}/sor-n800", headers=env.h("app")).json()
    assert newest["version"] == 2 and newest["parameters"]["iterations"] == 200
    old = env.client.get(f"{URL}/sor-n800?version=1", headers=env.h("app")).json()
    assert old["analysis"] == ANALYSIS  # stored as posted, step included
    assert old["analysis"]["phases"][2]["first"]["step"] == ANALYSIS["phases"][2]["first"]["step"]

    missing = env.client.get(f"{URL}/nope", headers=env.h("app"))
    assert missing.status_code == 404 and missing.json()["detail"][0]["field"] == "path.name"
    assert "'nope'" in missing.json()["detail"][0]["reason"]
    no_version = env.client.get(f"{URL}/sor-n800?version=7", headers=env.h("app"))
    assert no_version.status_code == 404
    assert no_version.json()["detail"][0]["field"] == "query.version"


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation of the body at a dotted path with [i] indices (``analysis.phases[3].weight``)."""

    def mutate(b: dict[str, Any]) -> None:
        node: Any = b
        keys: list[str | int] = []
        for part in path.split("."):
            name, *idx = part.replace("]", "").split("[")
            keys.append(name)
            keys.extend(int(i) for i in idx)
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return mutate


def _drop_step(b: dict[str, Any]) -> None:
    for p in b["analysis"]["phases"]:
        del p["first"]["step"]


def _too_many_phases(b: dict[str, Any]) -> None:
    phase = b["analysis"]["phases"][0]
    b["analysis"]["phases"] = [{**phase, "id": i, "kept": i == 0} for i in range(10_001)]
    b["analysis"]["signature"] = [0]


def _repeat_id(b: dict[str, Any]) -> None:
    b["analysis"]["phases"][2]["id"] = 1


def _unkept(b: dict[str, Any]) -> None:
    b["analysis"]["signature"] = [s for s in b["analysis"]["signature"] if s != 0]


BAD: list[tuple[Callable[[dict[str, Any]], None], str]] = [
    (_set("analysis.phases[3].weight", 0), "analysis.phases[3].weight"),
    (_set("analysis.phases[3].weight", 2.5), "analysis.phases[3].weight"),
    (_set("analysis.phases[3].weight", "8"), "analysis.phases[3].weight"),
    (_set("analysis.phases[1].mean_s", -0.1), "analysis.phases[1].mean_s"),
    (_set("analysis.phases[0].sd_s", float("nan")), "analysis.phases[0].sd_s"),
    (_set("analysis.phases[4].mean_s", float("inf")), "analysis.phases[4].mean_s"),
    (_set("analysis.phases[5].first.step", -2), "analysis.phases[5].first.step"),
    (_set("analysis.phases[0].id", 7), "analysis.phases[0].id"),
    (_repeat_id, "analysis.phases[2].id"),
    (_set("analysis.signature", []), "analysis.signature"),
    (_set("analysis.signature[1]", 99), "analysis.signature[1]"),
    (_set("analysis.signature[1]", 2), "analysis.signature[1]"),  # 2 is kept first
    (_unkept, "analysis.phases[0].kept"),
    (_set("analysis.traced_s", 0), "analysis.traced_s"),
    (_set("analysis.traced_s", float("inf")), "analysis.traced_s"),
    (_set("analysis.tolerance", float("inf")), "analysis.tolerance"),
    (_set("analysis.phases", []), "analysis.phases"),
    (_too_many_phases, "analysis.phases"),
    (_set("analysis.phases[0].bogus", 1), "analysis.phases[0].bogus"),
    (_set("analysis.phases[0].compute_s", [0.1, 0.1, 0.1]), "analysis.phases[0].compute_s"),
    (_set("analysis.anchor_rank", 2), "analysis.anchor_rank"),
    (_set("ranks", 4), "ranks"),
    (_set("name", "9lives"), "name"),
    (_set("name", "phases/x"), "name"),
    (_set("parameters", {"n": float("nan")}), "parameters.n"),
    (_set("parameters", {"bad key": 1}), "parameters"),
]


@pytest.mark.parametrize(("mutate", "field"), BAD, ids=[f for _, f in BAD])
def test_each_failure_names_its_field_and_stores_nothing(
    env: Env, mutate: Callable[[dict[str, Any]], None], field: str
) -> None:
    b = body()
    mutate(b)
    r = post(env, b)
    assert r.status_code == 422, r.text
    fields = [p["field"] for p in r.json()["detail"]]
    assert fields[0] == field or any((f or "").startswith(field) for f in fields), fields
    assert env.client.get(URL, headers=env.h("app")).json() == []


def test_older_analyses_without_step_and_infinite_tolerance_as_null(env: Env) -> None:
    b = body()
    _drop_step(b)
    b["analysis"]["tolerance"] = None
    r = post(env, b)
    assert r.status_code == 201, r.text
    stored = env.client.get(f"{URL}/sor-n800", headers=env.h("app")).json()["analysis"]
    assert "step" not in stored["phases"][0]["first"] and stored["tolerance"] is None


def test_roles(env: Env) -> None:
    assert post(env, body(), role="app").status_code == 403
    assert post(env, body(), role="sensor").status_code == 403
    assert post(env, body(), role="admin").status_code == 201
    assert env.client.get(URL, headers=env.h("sensor")).status_code == 403


def test_pmac_signatures_beside_them(env: Env) -> None:
    builtin = env.client.get("/api/v1/signatures/sor", headers=env.h("app")).json()
    text = builtin["toml"].replace('name = "sor"', 'name = "phases"')
    assert text != builtin["toml"]
    refused = env.client.post("/api/v1/signatures", json={"toml": text}, headers=env.h("operator"))
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["field"] == "toml"
    assert "reserved" in refused.json()["detail"][0]["reason"]
    renamed = text.replace('name = "phases"', 'name = "sor-copy"')
    ok = env.client.post("/api/v1/signatures", json={"toml": renamed}, headers=env.h("operator"))
    assert ok.status_code == 201, ok.text
    # /signatures/phases is the phase list, not PMaC's signature "phases"
    assert post(env, body()).status_code == 201
    phases = env.client.get(URL, headers=env.h("app")).json()
    assert [s["name"] for s in phases] == ["sor-n800"]
    pmac = env.client.get("/api/v1/signatures", headers=env.h("app")).json()
    assert "sor-copy" in [s["name"] for s in pmac] and "sor-n800" not in [s["name"] for s in pmac]


def _probe(env: Env, payload: dict[str, Any], role: str = "sensor", name: str = "sor-n800") -> Any:
    return env.client.post(
        f"{URL}/{name}/probes",
        content=json.dumps(payload),
        headers={**env.h(role), "Content-Type": "application/json"},
    )


def test_probes(env: Env) -> None:
    for h in ("h0", "h1"):
        r = env.client.put(
            f"/api/v1/resources/{h}", json={"properties": {}}, headers=env.h("operator")
        )
        assert r.status_code == 200, r.text
    assert post(env, body()).status_code == 201
    result = {"phases": {"2": {"mean_s": 0.006, "repeats": 3}}, "predicted_s": 1.5}
    first = _probe(env, {"host": "h0", "status": "ok", "result": result})
    assert first.status_code == 201, first.text
    assert first.json()["version"] == 1 and first.json()["error"] is None
    assert post(env, body(parameters={"n": 1600})).status_code == 201  # version 2
    failed = _probe(env, {"host": "h1", "status": "failed", "error": "mpiexec died"}, "operator")
    assert failed.status_code == 201 and failed.json()["version"] == 2
    pinned = _probe(env, {"host": "h0", "status": "ok", "result": {}, "version": 1})
    assert pinned.status_code == 201 and pinned.json()["version"] == 1

    def listed(query: str = "") -> list[tuple[str, int, str]]:
        r = env.client.get(f"{URL}/sor-n800/probes{query}", headers=env.h("app"))
        assert r.status_code == 200, r.text
        return [(p["host"], p["version"], p["status"]) for p in r.json()]

    assert listed() == [("h0", 1, "ok"), ("h1", 2, "failed"), ("h0", 1, "ok")]  # newest first
    assert listed("?host=h0") == [("h0", 1, "ok"), ("h0", 1, "ok")]
    assert listed("?limit=1") == [("h0", 1, "ok")]
    assert listed("?version=2") == [("h1", 2, "failed")]
    full = env.client.get(f"{URL}/sor-n800/probes?host=h0", headers=env.h("app")).json()
    assert full[1]["result"] == result
    assert full[0]["created_at"] >= full[1]["created_at"]


def test_probe_refusals(env: Env) -> None:
    env.client.put("/api/v1/resources/h0", json={"properties": {}}, headers=env.h("operator"))
    assert post(env, body()).status_code == 201
    ok = {"host": "h0", "status": "ok"}

    def refused(payload: dict[str, Any], status: int, field: str, **kw: Any) -> None:
        r = _probe(env, payload, **kw)
        assert r.status_code == status, r.text
        assert r.json()["detail"][0]["field"] == field, r.text

    refused(ok, 404, "path.name", name="nope")
    refused({**ok, "version": 9}, 404, "version")
    refused({**ok, "host": "ghost"}, 422, "host")
    refused({"host": "h0", "status": "failed"}, 422, "error")
    refused({**ok, "error": "but it worked"}, 422, "error")
    refused({**ok, "status": "maybe"}, 422, "status")
    refused({**ok, "result": {"t": float("nan")}}, 422, "result")
    refused({**ok, "result": {"t": [1e308 * 10]}}, 422, "result")
    refused({**ok, "result": {"big": "x" * 70_000}}, 422, "result")
    refused({**ok, "result": {"nul": "a\u0000b"}}, 422, "result")
    refused({**ok, "result": [1, 2]}, 422, "result")  # type: ignore[dict-item]
    deep: dict[str, Any] = {}
    for _ in range(20):
        deep = {"d": deep}
    refused({**ok, "result": deep}, 422, "result")
    assert _probe(env, ok, role="app").status_code == 403
    listed = env.client.get(f"{URL}/sor-n800/probes", headers=env.h("app")).json()
    assert listed == []
    unknown = env.client.get(f"{URL}/nope/probes", headers=env.h("app"))
    assert unknown.status_code == 404


def test_a_lost_race_is_409_and_stores_nothing(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    from ppe.service.store import phase_signatures as store

    assert post(env, body()).status_code == 201
    # as if another post of the name had not committed when this one read the newest version
    monkeypatch.setattr(store, "newest", lambda session, name: None)
    lost = post(env, body(parameters={"n": 1600}))
    assert lost.status_code == 409, lost.text
    monkeypatch.undo()
    stored = env.client.get(f"{URL}/sor-n800", headers=env.h("app")).json()
    assert stored["version"] == 1 and stored["parameters"]["n"] == 800
