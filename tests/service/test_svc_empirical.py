"""Empirical models over the run store (SQLite and PostgreSQL): runs posted through
/api/v1/runs, then fitted, saved, read, used to predict and deleted; every bad input a 422
that stores nothing; kernel coupling from runs alone and in pairs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest

from ppe.cli import main as cli_main
from ppe.empirical.formats import parse
from ppe.empirical.report import FIT_TYPES
from ppe.service.schemas_empirical import FitType

RUNS = "/api/v1/runs"
FIT = "/api/v1/models/empirical"
COUPLING = "/api/v1/coupling"
KERNELS = Path(__file__).resolve().parents[2] / "examples" / "runs" / "kernels.csv"


def post_runs(env: Any, runs: list[dict[str, Any]]) -> None:
    r = env.client.post(RUNS, json={"runs": runs}, headers=env.h("app"))
    assert r.status_code == 201, r.text


def post_kernels(env: Any) -> None:
    post_runs(
        env,
        [
            {"app": r.app, "kernel": r.kernel, "params": dict(r.params), "values": list(r.values)}
            for r in parse(KERNELS.read_text())
        ],
    )


def fit(env: Any, role: str = "app", **body: Any) -> Any:
    return env.client.post(FIT, json=body, headers=env.h(role))


def stored(env: Any) -> list[dict[str, Any]]:
    r = env.client.get(FIT, headers=env.h("app"))
    assert r.status_code == 200, r.text
    return list(r.json())


def runs_at(app: str, times: dict[float, float], kernel: str = "total", **kw: Any) -> list[Any]:
    return [
        {"app": app, "kernel": kernel, "params": {"n": n}, "values": [t, t * 1.01], **kw}
        for n, t in times.items()
    ]


def refused(r: Any, kind: str, field: str | None) -> str:
    assert r.status_code == 422, r.text
    [problem] = r.json()["detail"]
    assert problem["field"] == field, problem
    assert problem["reason"].endswith(f"({kind})"), problem
    return str(problem["reason"])


# ------------------------------------------------------------------------ fit, save, use


def test_fit_answers_the_report_and_stores_nothing(env) -> None:  # type: ignore[no-untyped-def]
    post_kernels(env)
    r = fit(env, app="numpy", kernel="matmul", predict=[{"n": 4096}, {"n": 256, "p": 1}])
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["type"] == "search" and out["saved_as"] is None
    assert out["fixed"] == {"p": 1.0} and out["params"] == ["n"]
    far, inside = out["predictions"]
    assert far["extrapolated"] and not inside["extrapolated"]
    for p in (far, inside):
        assert p["interval"][0] < p["mean"] < p["interval"][1]
    assert stored(env) == []


def test_the_api_answers_what_the_command_prints(env, capsys) -> None:  # type: ignore[no-untyped-def]
    post_kernels(env)
    body: dict[str, Any] = {"app": "sor", "kernel": "strips", "predict": [{"n": 2048, "p": 2}]}
    api = fit(env, **body).json()
    args = ["model", "fit", str(KERNELS), "--app", "sor", "--kernel", "strips"]
    assert cli_main([*args, "--predict", "n=2048,p=2", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert set(api) == set(cli) | {"saved_as", "suggested", "suggested_per"}
    assert api["model"] == cli["model"]
    terms = [c["term"] for c in cli["coefficients"]]
    assert [c["term"] for c in api["coefficients"]] == terms
    values = [c["value"] for c in cli["coefficients"]]
    assert [c["value"] for c in api["coefficients"]] == pytest.approx(values, rel=1e-9)
    for key in ("cv_error", "residual_norm", "sigma"):
        assert api[key] == pytest.approx(cli[key], rel=1e-9)
    assert api["predictions"][0]["interval"] == pytest.approx(cli["predictions"][0]["interval"])


def test_suggested_runs_are_the_commands(env, capsys) -> None:  # type: ignore[no-untyped-def]
    """`suggest` plans the next runs over stored runs as `ppe model fit --suggest` does over the
    file; without `predict` points, or with a budget of 0, it is a 422 naming `suggest`."""
    post_kernels(env)
    for by_cost in (False, True):
        body: dict[str, Any] = {
            "app": "numpy",
            "kernel": "matmul",
            "predict": [{"n": 4096}],
            "suggest": 3,
        }
        api = fit(env, **body, by_cost=by_cost)
        assert api.status_code == 200, api.text
        args = ["model", "fit", str(KERNELS), "--app", "numpy", "--kernel", "matmul"]
        extra = ["--by-cost"] if by_cost else []
        assert cli_main([*args, "--predict", "n=4096", "--suggest", "3", *extra, "--json"]) == 0
        cli = json.loads(capsys.readouterr().out)
        assert api.json()["suggested"] == cli["suggested"] and len(cli["suggested"]) == 3
        assert api.json()["suggested_per"] == ("time" if by_cost else "run")
    for bad in ({"suggest": 2}, {"suggest": 0, "predict": [{"n": 4096}]}):
        r = fit(env, app="numpy", kernel="matmul", **bad)
        assert r.status_code == 422 and r.json()["detail"][0]["field"].startswith("suggest"), r.text


def test_save_get_predict_delete(env) -> None:  # type: ignore[no-untyped-def]
    post_kernels(env)
    r = fit(env, app="numpy", kernel="sort", predict=[{"n": 1e6}], save_as="sort-time")
    assert r.status_code == 200, r.text
    fitted = r.json()
    assert fitted["saved_as"] == "sort-time"
    [row] = stored(env)
    assert row["name"] == "sort-time" and row["model"] == fitted["model"]
    assert (row["app"], row["kernel"], row["metric"], row["system"]) == (
        "numpy",
        "sort",
        "time",
        None,
    )
    assert row["n_points"] == fitted["n_points"] and row["cv_error"] == fitted["cv_error"]

    got = env.client.get(f"{FIT}/sort-time", params={"n": 1e6}, headers=env.h("app")).json()
    assert got["model"] == fitted["model"] and got["name"] == "sort-time"
    [pred] = got["predictions"]
    assert pred["mean"] == pytest.approx(fitted["predictions"][0]["mean"], rel=1e-12)
    assert pred["interval"] == pytest.approx(fitted["predictions"][0]["interval"], rel=1e-12)
    assert got["definition"]["formula"] == fitted["model"]
    # the spread model is stored with it: the same std model, coverage and calibrated interval
    assert fitted["spread"]["used"] and got["spread"] == fitted["spread"]
    assert got["definition"]["spread"]["std"]["formula"] == fitted["spread"]["model"]
    assert pred["spread"]["interval"] == pytest.approx(
        fitted["predictions"][0]["spread"]["interval"], rel=1e-12
    )
    bare = env.client.get(f"{FIT}/sort-time", headers=env.h("app")).json()
    assert bare["predictions"] == []

    again = fit(env, app="numpy", kernel="matmul", save_as="sort-time")
    assert again.status_code == 409 and again.json()["detail"][0]["field"] == "save_as"
    assert [m["kernel"] for m in stored(env)] == ["sort"]

    assert env.client.delete(f"{FIT}/sort-time", headers=env.h("app")).status_code == 403
    assert env.client.delete(f"{FIT}/sort-time", headers=env.h("operator")).status_code == 204
    assert env.client.get(f"{FIT}/sort-time", headers=env.h("app")).status_code == 404
    assert env.client.delete(f"{FIT}/sort-time", headers=env.h("operator")).status_code == 404
    assert stored(env) == []


def test_prophecy_types_round_trip_through_the_store(env) -> None:  # type: ignore[no-untyped-def]
    times = {n: 1.0 + 0.5 * n + 0.01 * n * n for n in (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)}
    post_runs(env, runs_at("q", times))
    for kind in ("quadratic", "unknown"):
        r = fit(env, app="q", type=kind, predict=[{"n": 100}], save_as=f"q-{kind}")
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["requested_type"] == kind
        got = env.client.get(f"{FIT}/q-{kind}?n=100", headers=env.h("app")).json()
        assert got["type"] == out["type"] and got["requested_type"] == kind
        assert got["predictions"][0]["mean"] == pytest.approx(out["predictions"][0]["mean"])
    quad = env.client.get(f"{FIT}/q-quadratic", headers=env.h("app")).json()
    assert [c["term"] for c in quad["coefficients"]] == ["1", "n", "n^2"]
    assert [m["name"] for m in stored(env)] == ["q-quadratic", "q-unknown"]


def test_roles(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, runs_at("a", {2.0: 1.0, 4.0: 2.0, 8.0: 4.0, 16.0: 8.0}))
    assert fit(env, role="sensor", app="a").status_code == 403
    assert env.client.get(FIT, headers=env.h("sensor")).status_code == 403
    assert env.client.post(FIT, json={"app": "a"}).status_code == 401
    assert fit(env, role="operator", app="a").status_code == 200


# ------------------------------------------------------------------------ bad input


def test_fewer_points_than_coefficients(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, runs_at("three", {2.0: 1.0, 4.0: 2.1, 8.0: 4.3}))
    why = refused(fit(env, app="three", type="cubic", save_as="m"), "too_few_points", None)
    assert "4 coefficients" in why
    post_runs(env, runs_at("two", {2.0: 1.0, 4.0: 2.1}))
    refused(fit(env, app="two", save_as="m"), "too_few_points", None)
    assert stored(env) == []


def test_a_single_distinct_value(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, runs_at("one", {100.0: 1.0}))
    why = refused(fit(env, app="one", save_as="m"), "single_value", None)
    assert "n=100" in why
    post_kernels(env)
    refused(fit(env, app="numpy", kernel="fft2", x="p", save_as="m"), "single_value", "x")
    r = fit(env, app="numpy", kernel="fft2", predict=[{"n": 64}, {"n": 64, "p": 2}], save_as="m")
    refused(r, "single_value", "predict[1].p")
    assert stored(env) == []


@pytest.mark.parametrize("kind", ["search", "inverse_linear", "inverse_quadratic"])
def test_non_positive_values_under_a_log_or_an_inverse(env, kind: str) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, runs_at("zero", {0.0: 1.0, 1.0: 2.0, 2.0: 3.0, 4.0: 5.0, 8.0: 9.0}))
    refused(fit(env, app="zero", type=kind, save_as="m"), "non_positive", None)
    assert stored(env) == []


def test_a_log_model_predicting_at_a_non_positive_point(env) -> None:  # type: ignore[no-untyped-def]
    times = {n: 0.1 * n**0.5 for n in (2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)}
    post_runs(env, runs_at("root", times))
    r = fit(env, app="root", predict=[{"n": -4}], save_as="m")
    refused(r, "non_positive", "predict[0].n")
    assert stored(env) == []


def test_no_runs_for_the_app_or_the_kernel(env) -> None:  # type: ignore[no-untyped-def]
    why = refused(fit(env, app="nobody", save_as="m"), "no_runs", "app")
    assert "no completed runs" in why
    post_kernels(env)
    why = refused(fit(env, app="numpy", kernel="gemm", save_as="m"), "no_runs", "kernel")
    assert "numpy/matmul (time)" in why  # what the application does have
    refused(fit(env, app="numpy", kernel="sort", metric="flops"), "no_runs", "metric")
    post_runs(env, runs_at("x", {2.0: 1.0, 4.0: 2.0, 8.0: 4.0}, status="failed"))
    refused(fit(env, app="x", save_as="m"), "no_runs", "app")  # failed runs do not count
    assert stored(env) == []


def test_several_systems_must_be_told_apart(env) -> None:  # type: ignore[no-untyped-def]
    times = {2.0: 1.0, 4.0: 2.0, 8.0: 4.0, 16.0: 8.0}
    post_runs(env, runs_at("s", times, system="h0") + runs_at("s", times, system="h1"))
    why = refused(fit(env, app="s", save_as="m"), "ambiguous", "system")
    assert "h0, h1" in why
    assert fit(env, app="s", system="h1").status_code == 200
    assert stored(env) == []


def test_nan_and_malformed_points(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, runs_at("a", {2.0: 1.0, 4.0: 2.0, 8.0: 4.0, 16.0: 8.0, 32.0: 16.5}))
    raw = '{"app": "a", "predict": [{"n": NaN}], "save_as": "m"}'
    r = env.client.post(
        FIT, content=raw, headers={**env.h("app"), "Content-Type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["detail"][0]["field"].startswith("predict[0]")
    refused(fit(env, app="a", predict=[{"m": 3}], save_as="m"), "empirical", "predict[0].m")
    refused(fit(env, app="a", predict=[{}], save_as="m"), "empirical", "predict[0].n")
    assert fit(env, app="a", type="cubical").status_code == 422
    assert fit(env, app="a", predict=[{"n": 1}] * 101).status_code == 422
    assert stored(env) == []
    assert fit(env, app="a", save_as="m").status_code == 200
    for query, field in (
        ("n=nan", "query.n"),
        ("n=inf", "query.n"),
        ("n=ten", "query.n"),
        ("n=1&n=2", "query.n"),
        ("m=3", "query.m"),
        ("n=-1", "query.n"),
    ):
        r = env.client.get(f"{FIT}/m?{query}", headers=env.h("app"))
        assert r.status_code == 422, (query, r.text)
        assert r.json()["detail"][0]["field"] == field, (query, r.json())


def test_fit_types_match_the_schema() -> None:
    assert set(get_args(FitType)) == set(FIT_TYPES)


# ------------------------------------------------------------------------ coupling

ALONE = {"A": 10.0, "B": 20.0, "C": 5.0}
PAIRS = {"A+B": 27.0, "B+C": 27.5, "C+A": 18.0}


def loop_runs(n: float, scale: float = 1.0, drift: float = 1.0, **kw: Any) -> list[Any]:
    """Kernels alone and in pairs at input n; the C+A pair's time is multiplied by ``drift``."""
    out = []
    for kernel, t in {**ALONE, **PAIRS}.items():
        t = t * scale * (drift if kernel == "C+A" else 1.0)
        out.append({"app": "loop", "kernel": kernel, "params": {"n": n}, "values": [t], **kw})
    return out


def couple(env: Any, **body: Any) -> Any:
    return env.client.post(COUPLING, json={"app": "loop", **body}, headers=env.h("app"))


def test_coupling_by_the_formula_and_stable_across_inputs(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, loop_runs(100) + loop_runs(200, scale=2.0))
    r = couple(env, kernels=["A", "B", "C"])
    assert r.status_code == 200, r.text
    out = r.json()
    c_ab, c_bc, c_ca = 27 / 30, 27.5 / 25, 18 / 15
    values = {tuple(c["pair"]): c["value"] for c in out["couplings"]}
    assert values == pytest.approx({("A", "B"): c_ab, ("B", "C"): c_bc, ("C", "A"): c_ca})
    psi = (c_ab * 27 + c_ca * 18) / (27 + 18)
    assert out["coefficients"]["A"] == pytest.approx(psi)
    assert [i["point"] for i in out["inputs"]] == [{"n": 100.0}, {"n": 200.0}]
    assert out["isocoupling"]["stable"] is True and out["isocoupling"]["unstable"] == []
    one = couple(env, kernels=["A", "B", "C"], params={"n": 200}).json()
    assert one["isocoupling"]["stable"] is None and "one input" in one["isocoupling"]["message"]


def test_unstable_couplings_are_named(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, loop_runs(100) + loop_runs(200, drift=1.5))
    out = couple(env, kernels=["A", "B", "C"]).json()
    assert out["isocoupling"]["stable"] is False
    assert out["isocoupling"]["unstable"] == [["C", "A"]]
    assert "C+A" in out["isocoupling"]["message"]


def test_coupling_bad_input(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, [r for r in loop_runs(100) if r["kernel"] != "C+A"])
    why = refused(couple(env, kernels=["A", "B", "C"], save=True), "coupling", "kernels")
    assert "'C' and 'A' were never run as a pair" in why and "C+A" in why
    assert env.client.get(COUPLING, headers=env.h("app")).json() == []  # nothing kept
    assert couple(env, kernels=["A", "B"]).status_code == 200  # a two-kernel loop: A+B only
    why = refused(couple(env, kernels=["A", "D"]), "coupling", "kernels")
    assert "'D' was never run alone" in why
    refused(couple(env, kernels=["A", "A+B"]), "coupling", "kernels")
    assert couple(env, kernels=["A"]).status_code == 422
    post_runs(env, loop_runs(100, system="h9"))
    refused(couple(env, kernels=["A", "B"]), "coupling", "system")
    assert couple(env, kernels=["A", "B", "C"], system="h9").status_code == 200


# ------------------------------------------------------------------------ schema


def test_the_routes_document_what_they_answer(env) -> None:  # type: ignore[no-untyped-def]
    paths = env.client.get("/openapi.json").json()["paths"]
    expected = {
        ("post", FIT): {"200", "401", "403", "409", "422"},
        ("get", FIT): {"200", "401", "403"},
        ("get", FIT + "/{name}"): {"200", "401", "403", "404", "422"},
        ("delete", FIT + "/{name}"): {"204", "401", "403", "404"},
        ("post", COUPLING): {"200", "401", "403", "422"},
        ("get", COUPLING): {"200", "401", "403"},
    }
    for (method, path), codes in expected.items():
        responses = paths[path][method]["responses"]
        assert codes <= set(responses), (method, path, sorted(responses))
        for code in codes - {"200", "204"}:
            schema = json.dumps(responses[code]["content"]["application/json"]["schema"])
            assert "ProblemReport" in schema or "Message" in schema, (method, path, code)


def scaled_loop(ns: tuple[float, ...], drift: float = 1.0) -> list[Any]:
    """Loop runs whose every time grows as n (two repetitions 1 % apart), so each kernel's
    model is linear in n and the couplings do not change with n (unless ``drift``)."""
    out = []
    for n in ns:
        for run in loop_runs(n, scale=n / 100, drift=drift ** (n / 100 - 1)):
            run["values"] = [run["values"][0], run["values"][0] * 1.01]
            out.append(run)
    return out


def test_couplings_predict_other_inputs_and_are_kept_per_loop(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, scaled_loop((100, 200, 400, 800)))
    r = couple(env, kernels=["A", "B", "C"], predict=[{"n": 1600}, {"n": 200}], save=True)
    assert r.status_code == 200, r.text
    out = r.json()
    far, seen = out["predictions"]
    assert not far["measured"] and seen["measured"]
    alpha = out["coefficients"]
    at_100 = sum(alpha[k] * t * 1.005 for k, t in ALONE.items())  # the repetitions' mean
    assert far["mean"] == pytest.approx(16 * at_100, rel=0.01)
    assert far["kernels"]["B"] == pytest.approx(16 * 20.0 * 1.005, rel=0.01)
    assert far["interval"][0] < far["mean"] < far["interval"][1]
    assert seen["mean"] == pytest.approx(2 * at_100, rel=0.01)
    assert out["warnings"] == [] and out["saved"] is not None
    # kept per loop: saving again replaces it
    again = couple(env, kernels=["A", "B", "C"], save=True).json()
    kept = env.client.get(COUPLING, params={"app": "loop"}, headers=env.h("app")).json()
    assert [k["id"] for k in kept] == [again["saved"]]  # one per loop: replaced
    assert kept[0]["kernels"] == ["A", "B", "C"] and kept[0]["stable"] is True
    assert kept[0]["report"]["coefficients"] == pytest.approx(alpha)
    other = couple(env, kernels=["A", "B"], save=True).json()
    kept = env.client.get(COUPLING, params={"app": "loop"}, headers=env.h("app")).json()
    assert sorted(k["id"] for k in kept) == sorted([again["saved"], other["saved"]])


def test_reusing_unstable_couplings_says_so_and_widens(env) -> None:  # type: ignore[no-untyped-def]
    post_runs(env, scaled_loop((100, 200, 400, 800), drift=1.1))
    out = couple(env, kernels=["A", "B", "C"], predict=[{"n": 1600}, {"n": 200}]).json()
    assert out["isocoupling"]["stable"] is False
    assert len(out["warnings"]) == 1 and "C+A" in out["warnings"][0]
    far, seen = out["predictions"]
    assert far["std"] / far["mean"] > 2 * seen["std"] / seen["mean"]
    refused(couple(env, kernels=["A", "B"], predict=[{"m": 3}]), "empirical", "predict.m")
    assert env.client.get(COUPLING, headers=env.h("app")).json() == []
