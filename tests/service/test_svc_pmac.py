"""Machine profiles and signatures over HTTP, and planning on hosts known only by a profile."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from ppe.core.predict import builtin_models
from ppe.pmac import (
    KINDS,
    PATTERNS,
    Curve,
    CurvePoint,
    Figure,
    MachineProfile,
    builtin_signature,
    convolve,
    profile_from_dict,
    profile_to_dict,
)
from ppe.pmac.signature import builtin_signature_text
from ppe.service.store.db import make_engine, make_sessionmaker, session_scope
from ppe.service.store.models import ServedLog
from tests.service.conftest import Env
from tests.service.test_svc_planning import feed, schedule

BASE_RATE = 4e9  # bytes/s of every memory curve at 1 KiB on the fastest host


def fig(value: float) -> Figure:
    return Figure.of([value * 0.99, value, value * 1.01], 0.01, "synthetic")


def synthetic_profile(host: str, slower: float = 1.0, measured_at: float = 1.7e9) -> dict[str, Any]:
    """A profile whose every rate is ``slower`` times below the fastest host's, so any
    signature convolves to exactly ``slower`` times the fastest host's time."""
    memory = []
    for p in PATTERNS:
        for k in KINDS:
            rates = {1 << 10: BASE_RATE, 1 << 30: BASE_RATE / 4}
            points = tuple(CurvePoint(b, fig(r / slower)) for b, r in sorted(rates.items()))
            memory.append(Curve(p, k, 1, points))
    profile = MachineProfile(
        host=host,
        measured_at=measured_at,
        method="synthetic",
        memory=tuple(memory),
        flops={"dense": fig(2e10 / slower), "stencil": fig(2e9 / slower)},
        overheads={"call": fig(1e-6 * slower), "view": fig(2e-7 * slower)},
    )
    return profile_to_dict(profile)


def post_profile(env: Env, host: str, body: dict[str, Any], role: str = "sensor") -> Any:
    return env.client.post(f"/api/v1/resources/{host}/profiles", json=body, headers=env.h(role))


def test_profiles_are_versioned_and_a_repost_stores_nothing(env: Env) -> None:
    first = post_profile(env, "p0", synthetic_profile("p0"))
    assert first.status_code == 201, first.text
    assert first.json()["version"] == 1 and first.json()["method"] == "synthetic"
    again = post_profile(env, "p0", synthetic_profile("p0"))  # a sensor retrying
    assert again.status_code == 200 and again.json()["version"] == 1
    later = post_profile(env, "p0", synthetic_profile("p0", 2.0, measured_at=1.7e9 + 86400))
    assert later.status_code == 201 and later.json()["version"] == 2
    listed = env.client.get("/api/v1/resources/p0/profiles", headers=env.h("app")).json()
    assert [v["version"] for v in listed] == [2, 1]
    newest = env.client.get("/api/v1/resources/p0/profile", headers=env.h("app")).json()
    assert newest["version"] == 2 and newest["profile"]["measured_at"] == 1.7e9 + 86400
    old = env.client.get("/api/v1/resources/p0/profile?version=1", headers=env.h("app")).json()
    assert old["profile"] == synthetic_profile("p0")
    # the host was registered by its first profile, like by its first measurement
    assert env.client.get("/api/v1/resources/p0", headers=env.h("app")).status_code == 200


def _non_monotone(d: dict[str, Any]) -> None:
    pts = d["memory"][0]["points"]
    pts[0]["bytes"], pts[1]["bytes"] = pts[1]["bytes"], pts[0]["bytes"]


def _missing_curve(d: dict[str, Any]) -> None:
    d["memory"] = d["memory"][1:]


def _negative(d: dict[str, Any]) -> None:
    d["flops"]["dense"]["value"] = -1.0


def _nul(d: dict[str, Any]) -> None:
    d["method"] = "probe\x00"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (_non_monotone, "non-monotone"),
        (_missing_curve, "missing memory curves"),
        (_negative, "dense"),
        (_nul, "single lines"),
    ],
)
def test_a_bad_profile_is_refused_and_nothing_is_stored(env: Env, mutate: Any, reason: str) -> None:
    body = synthetic_profile("p1")
    mutate(body)
    r = post_profile(env, "p1", body)
    assert r.status_code == 422, r.text
    assert reason in r.text
    assert env.client.get("/api/v1/resources/p1/profiles", headers=env.h("app")).status_code == 404


def test_a_profile_of_another_host_and_the_wrong_role_are_refused(env: Env) -> None:
    r = post_profile(env, "p2", synthetic_profile("elsewhere"))
    assert r.status_code == 422 and "elsewhere" in r.text
    assert post_profile(env, "p2", synthetic_profile("p2"), role="app").status_code == 403
    assert env.client.get("/api/v1/resources/p2/profile", headers=env.h("app")).status_code == 404


SIGNATURE = builtin_signature_text("sor").replace('name = "sor"', 'name = "mysor"')


def test_signatures_post_list_and_read(env: Env) -> None:
    listed = env.client.get("/api/v1/signatures", headers=env.h("app")).json()
    assert {s["name"] for s in listed} == {"sor", "jacobi2d"}
    assert all(s["builtin"] and s["version"] == 0 for s in listed)
    r = env.client.post("/api/v1/signatures", json={"toml": SIGNATURE}, headers=env.h("operator"))
    assert r.status_code == 201, r.text
    assert r.json()["version"] == 1 and r.json()["parameters"]["Size"] == 8
    again = env.client.post("/api/v1/signatures", json={"toml": SIGNATURE}, headers=env.h("admin"))
    assert again.status_code == 200 and again.json()["version"] == 1
    got = env.client.get("/api/v1/signatures/mysor", headers=env.h("app")).json()
    assert got["toml"] == SIGNATURE and not got["builtin"]
    sor = env.client.get("/api/v1/signatures/sor", headers=env.h("app")).json()
    assert sor["builtin"] and sor["unit"] == builtin_signature("sor").unit
    names = [s["name"] for s in env.client.get("/api/v1/signatures", headers=env.h("app")).json()]
    assert names == ["sor", "jacobi2d", "mysor"]
    assert env.client.get("/api/v1/signatures/nope", headers=env.h("app")).status_code == 404


@pytest.mark.parametrize(
    ("toml", "status", "reason"),
    [
        (builtin_signature_text("sor"), 409, "built-in"),
        (SIGNATURE.replace("count = 8", "count = -8"), 422, "negative"),
        (SIGNATURE.replace('pattern = "unit"', 'pattern = "zigzag"', 1), 422, "zigzag"),
        (SIGNATURE.replace("* Size", "* m", 1), 422, "unknown parameter 'm'"),
        ("format = [", 422, "not TOML"),
        (SIGNATURE.replace('name = "mysor"', 'name = "my sor"'), 422, "a letter, then"),
    ],
)
def test_a_bad_signature_is_refused_and_nothing_is_stored(
    env: Env, toml: str, status: int, reason: str
) -> None:
    r = env.client.post("/api/v1/signatures", json={"toml": toml}, headers=env.h("operator"))
    assert r.status_code == status, r.text
    assert reason in r.text
    listed = env.client.get("/api/v1/signatures", headers=env.h("app")).json()
    assert {s["name"] for s in listed} == {"sor", "jacobi2d"}
    denied = env.client.post("/api/v1/signatures", json={"toml": SIGNATURE}, headers=env.h("app"))
    assert denied.status_code == 403


SLOWER = {"h0": 1.0, "h1": 1.6, "h2": 2.5}


@pytest.fixture
def bare(env: Env, traces_dir: Path) -> Env:
    """The hosts of `fed`, with measurements but no benchmark."""
    return feed(env, traces_dir)  # type: ignore[no-any-return]


def test_hosts_known_only_by_their_profiles_get_the_rows_of_their_speeds(bare: Env) -> None:
    """The schedule over profiles equals, within a row per host, the schedule over the
    benchmarks the same hosts would have if measured (the convolution of each profile,
    computed here with the library); each host's speed says it came from its profile."""
    refused = schedule(bare)
    assert refused.status_code == 422 and "machine profile" in refused.text
    for host, slower in SLOWER.items():
        assert post_profile(bare, host, synthetic_profile(host, slower)).status_code == 201
    by_profile = schedule(bare)
    assert by_profile.status_code == 200, by_profile.text
    out = by_profile.json()
    assert {a["speed"]["source"] for a in out["allocation"]} == {"profile"}
    assert sum("machine profile" in w for w in out["warnings"]) == 3

    sig = builtin_signature("sor")
    base = convolve(sig, profile_from_dict(synthetic_profile("h0")), {"n": 2000, "rows": 667})
    speeds = {h: base.per_unit.mean() * s for h, s in SLOWER.items()}
    for a in out["allocation"]:
        assert math.isclose(a["speed"]["benchmark"], speeds[a["host"]], rel_tol=1e-9)
    hosts = [{"name": h, "benchmark": b} for h, b in speeds.items()]
    by_speed = schedule(bare, hosts=hosts).json()
    assert {a["speed"]["source"] for a in by_speed["allocation"]} == {"request"}
    rows = {a["host"]: a["rows"] for a in out["allocation"]}
    for a in by_speed["allocation"]:
        assert abs(rows[a["host"]] - a["rows"]) <= 1
    assert rows["h0"] > rows["h1"] > rows["h2"]  # the fastest profile gets the most rows


def test_each_host_reports_where_its_speed_came_from(bare: Env) -> None:
    put = {"properties": {"benchmark": 3e-8}}
    assert bare.client.put("/api/v1/resources/h1", json=put, headers=bare.h("operator")).is_success
    assert post_profile(bare, "h2", synthetic_profile("h2")).status_code == 201
    hosts = [{"name": "h0", "benchmark": 2e-8}, "h1", "h2"]
    out = schedule(bare, hosts=hosts).json()
    sources = {a["host"]: a["speed"]["source"] for a in out["allocation"]}
    assert sources == {"h0": "request", "h1": "registered", "h2": "profile"}
    pred = bare.client.post(
        "/api/v1/predictions",
        json={
            "model": "sor",
            "allocation": [
                {"host": "h0", "rows": 700, "benchmark": 2e-8},
                {"host": "h1", "rows": 700},
                {"host": "h2", "rows": 600},
            ],
            "params": {"I": 50},
        },
        headers=bare.h("app"),
    )
    assert pred.status_code == 200, pred.text
    body = pred.json()
    assert {h["host"]: h["speed"]["source"] for h in body["hosts"]}["h2"] == "profile"
    assert any("machine profile" in w for w in body["warnings"])


def test_a_model_plans_on_profiles_with_its_own_posted_signature(bare: Env) -> None:
    for host, slower in SLOWER.items():
        post_profile(bare, host, synthetic_profile(host, slower))
    model = {"name": "mysor", "text": builtin_models()["sor"]}
    assert (
        bare.client.post("/api/v1/models", json=model, headers=bare.h("operator")).status_code
        == 201
    )
    missing = schedule(bare, app="mysor")
    assert missing.status_code == 422 and "no signature named 'mysor'" in missing.text
    r = bare.client.post("/api/v1/signatures", json={"toml": SIGNATURE}, headers=bare.h("operator"))
    assert r.status_code == 201
    planned = schedule(bare, app="mysor")
    assert planned.status_code == 200, planned.text
    assert all(a["speed"]["source"] == "profile" for a in planned.json()["allocation"])
    assert any("'mysor'" in w for w in planned.json()["warnings"])


#: A user model that reads two machine-profile figures per host (no benchmark, no CPU forecast:
#: its times are deterministic, so the answer is the hand computation itself).
FIGURES_MODEL = """
param n
param I alias iterations
param Flop = 6
param Bytes = 24
RowTime[p] = n * (Flop / flops_dense[p] + Bytes / mem_read_unit_largest[p])
HostTime[p] = I * rows[p] * RowTime[p]
ExecTime = max(p in hosts: HostTime[p])
"""


def predict_figures(env: Env, rows: dict[str, int], engine: str = "auto") -> Any:
    body = {
        "grammar": FIGURES_MODEL,
        "allocation": [{"host": h, "rows": r} for h, r in rows.items()],
        "params": {"I": 10},
        "engine": engine,
    }
    return env.client.post("/api/v1/predictions", json=body, headers=env.h("app"))


def test_a_grammar_reads_the_hosts_profile_figures(bare: Env) -> None:
    """flops_dense[p] and mem_read_unit_largest[p] are each host's newest profile's figures:
    synthetic_profile puts them at 2e10 / slower flop/s and BASE_RATE / 4 / slower B/s (the
    mean of repetitions 0.99, 1 and 1.01 times that)."""
    rows = {"h0": 900, "h1": 600, "h2": 500}
    for host in rows:
        assert post_profile(bare, host, synthetic_profile(host, 7.0)).status_code == 201
    for host, slower in SLOWER.items():  # a newer version is the one read
        later = synthetic_profile(host, slower, measured_at=1.7e9 + 3600)
        assert post_profile(bare, host, later).status_code == 201
    n = sum(rows.values())
    hand = {
        h: 10 * r * n * (6 / (2e10 / SLOWER[h]) + 24 / (BASE_RATE / 4 / SLOWER[h]))
        for h, r in rows.items()
    }
    for engine in ("auto", "analytic", "mc"):
        r = predict_figures(bare, rows, engine)
        assert r.status_code == 200, r.text
        body = r.json()
        times = {h["host"]: h["time"]["mean"] for h in body["hosts"]}
        for h, t in hand.items():
            assert math.isclose(times[h], t, rel_tol=1e-9), (engine, h)
        assert math.isclose(body["makespan"]["mean"], max(hand.values()), rel_tol=1e-9)
        assert {h["speed"]["source"] for h in body["hosts"]} == {"unused"}
        assert any("mem_read_unit_largest" in w and "version 2" in w for w in body["warnings"])


def test_a_grammar_reading_profile_figures_needs_a_profile_on_every_host(bare: Env) -> None:
    assert post_profile(bare, "h0", synthetic_profile("h0")).status_code == 201
    assert post_profile(bare, "h2", synthetic_profile("h2")).status_code == 201
    r = predict_figures(bare, {"h0": 1000, "h1": 500, "h2": 500})
    assert r.status_code == 422, r.text
    text = r.text
    assert "'h1'" in text and "flops_dense" in text and "/api/v1/resources/h1/profiles" in text
    assert "'h0'" not in text and "'h2'" not in text
    assert served_predictions(bare) == 0  # nothing served, nothing logged
    # once h1 has its profile, the same request is answered (and logged)
    assert post_profile(bare, "h1", synthetic_profile("h1")).status_code == 201
    assert predict_figures(bare, {"h0": 1000, "h1": 500, "h2": 500}).status_code == 200
    assert served_predictions(bare) == 1


def served_predictions(env: Env) -> int:
    engine = make_engine(env.url)
    try:
        with session_scope(make_sessionmaker(engine)) as s:
            query = (
                select(func.count()).select_from(ServedLog).where(ServedLog.kind == "prediction")
            )
            return int(s.scalar(query) or 0)
    finally:
        engine.dispose()


def test_a_stored_model_reading_profile_figures_plans_over_profiles(bare: Env) -> None:
    model = {"name": "figs", "text": FIGURES_MODEL}
    posted = bare.client.post("/api/v1/models", json=model, headers=bare.h("operator"))
    assert posted.status_code == 201, posted.text
    refused = schedule(bare, app="figs")
    assert refused.status_code == 422 and "has no machine profile" in refused.text
    for host, slower in SLOWER.items():
        assert post_profile(bare, host, synthetic_profile(host, slower)).status_code == 201
    planned = schedule(bare, app="figs")
    assert planned.status_code == 200, planned.text
    rows = {a["host"]: a["rows"] for a in planned.json()["allocation"]}
    # time per row is proportional to `slower`: balanced rows are inversely proportional
    share = {h: (1 / s) / sum(1 / x for x in SLOWER.values()) for h, s in SLOWER.items()}
    for h, r in rows.items():
        assert abs(r - 2000 * share[h]) <= 1, (h, r)
