"""Empirical models in the pipeline (SQLite and PostgreSQL): `empirical(...)` inside a grammar
model, and schedules and predictions for an application PPE knows only from its runs.

The runs are the real red-black SOR sweeps of examples/runs/kernels.csv, turned into the time of
one row (a sweep over an n x n grid / n), posted as a new application's `row` kernel."""

from __future__ import annotations

from typing import Any

import pytest

from ppe.empirical.formats import parse
from ppe.empirical.strip import ROW_KERNEL
from tests.service.test_svc_empirical import KERNELS, post_kernels, post_runs
from tests.service.test_svc_planning import fed, schedule  # noqa: F401 - fixture

SCHEDULES = "/api/v1/schedules"
PREDICTIONS = "/api/v1/predictions"
FIT = "/api/v1/models/empirical"


def sweep_rows(app: str = "heat", scale: float = 1.0) -> list[dict[str, Any]]:
    """The real SOR sweeps as an application's time per row and iteration."""
    return [
        {
            "app": app,
            "kernel": ROW_KERNEL,
            "params": {"n": r.params["n"]},
            "values": [scale * v / r.params["n"] for v in r.values],
        }
        for r in parse(KERNELS.read_text())
        if r.app == "sor" and r.kernel == "sweep"
    ]


def row_time(env: Any, n: int, app: str = "heat") -> dict[str, Any]:
    """What the model fitted to the stored runs says one row costs at ``n``."""
    r = env.client.post(
        FIT, json={"app": app, "kernel": ROW_KERNEL, "predict": [{"n": n}]}, headers=env.h("app")
    )
    assert r.status_code == 200, r.text
    [pred] = r.json()["predictions"]
    return dict(pred)


def strip_grammar(row: float) -> str:
    """The empirical strip model with the row time written in as a number."""
    return f"""
param n
param I alias iterations
param Size = 8
param Halo = 1
RowTime = {row!r}
Comm[p] = sum(q in neighbours(p): Halo * n * Size / BWAvail[p, q] + Latency[p, q])
HostTime[p] = I * (rows[p] * RowTime / FracAvailCPU[p] + Comm[p])
ExecTime = max(p in hosts: HostTime[p])
"""


def test_an_application_known_only_from_runs_is_scheduled(fed) -> None:  # noqa: F811
    post_runs(fed, sweep_rows())
    r = schedule(fed, app="heat", strategy="mean")
    assert r.status_code == 200, r.text
    out = r.json()
    rows = {a["host"]: a["rows"] for a in out["allocation"]}
    assert sum(rows.values()) == 2000
    assert any("heat/row" in w and "search" in w for w in out["warnings"]), out["warnings"]
    # the same plan as the strip model with the fitted mean row time written in
    mean = row_time(fed, 2000)["mean"]
    fed.client.post(
        "/api/v1/models",
        json={"name": "heat-fixed", "text": strip_grammar(mean)},
        headers=fed.h("app"),
    )
    fixed = schedule(fed, app="heat-fixed", strategy="mean").json()
    assert {a["host"]: a["rows"] for a in fixed["allocation"]} == rows
    # the row model's own uncertainty widens the interval of the makespan
    width = out["makespan"]["interval"][1] - out["makespan"]["interval"][0]
    fixed_width = fixed["makespan"]["interval"][1] - fixed["makespan"]["interval"][0]
    assert width > fixed_width
    assert out["makespan"]["mean"] == pytest.approx(fixed["makespan"]["mean"], rel=0.02)


def test_an_application_known_only_from_runs_is_predicted(fed) -> None:  # noqa: F811
    """POST /predictions by the application's name, as for SOR: the strip model over the
    fitted row time, with the CPU forecasts applied; the same mean as the strip model with the
    fitted mean written in, and a wider interval (the model's own uncertainty)."""
    post_runs(fed, sweep_rows())
    alloc = [{"host": "h0", "rows": 1200}, {"host": "h1", "rows": 800}]
    body = {"model": "heat", "params": {"n": 2000, "iterations": 50}, "allocation": alloc}
    r = fed.client.post(PREDICTIONS, json=body, headers=fed.h("app"))
    assert r.status_code == 200, r.text
    out = r.json()
    assert any("heat/row" in w for w in out["warnings"]), out["warnings"]
    mean = row_time(fed, 2000)["mean"]
    fixed = fed.client.post(
        "/api/v1/models",
        json={"name": "heat-fixed", "text": strip_grammar(mean)},
        headers=fed.h("app"),
    )
    assert fixed.status_code in (200, 201), fixed.text
    plain = fed.client.post(PREDICTIONS, json={**body, "model": "heat-fixed"}, headers=fed.h("app"))
    assert plain.status_code == 200, plain.text
    ms, pm = out["makespan"], plain.json()["makespan"]
    assert ms["mean"] == pytest.approx(pm["mean"], rel=0.02)
    assert ms["interval"][1] - ms["interval"][0] > pm["interval"][1] - pm["interval"][0]
    # no runs and no model: the same refusal as a schedule gives
    r = fed.client.post(PREDICTIONS, json={**body, "model": "cold"}, headers=fed.h("app"))
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == "model" and "'row' kernel" in r.text


def test_new_runs_change_the_answer_at_once(fed) -> None:  # noqa: F811
    post_runs(fed, sweep_rows())
    first = schedule(fed, app="heat").json()["makespan"]["mean"]
    assert schedule(fed, app="heat").json()["makespan"]["mean"] == first
    slower = sweep_rows(scale=3.0)
    for run in slower:  # new runs at the same points, three times slower: the fit moves
        run["key"] = f"slow-{run['params']['n']}-{run['values'][0]}"
    post_runs(fed, slower)
    again = schedule(fed, app="heat").json()["makespan"]["mean"]
    assert again > 1.5 * first


def test_a_grammar_reads_a_fitted_model(fed) -> None:  # noqa: F811
    post_kernels(fed)
    text = """
param n
param I alias iterations
Sweep = empirical("sor", "sweep", n = n)
HostTime[p] = I * Sweep * rows[p] / n / FracAvailCPU[p]
ExecTime = max(p in hosts: HostTime[p])
"""
    body = {
        "grammar": text,
        "params": {"n": 1000, "I": 20},
        "allocation": [{"host": "h0", "rows": 600}, {"host": "h1", "rows": 400}],
    }
    r = fed.client.post(PREDICTIONS, json=body, headers=fed.h("app"))
    assert r.status_code == 200, r.text
    ms = r.json()["makespan"]
    assert ms["interval"][0] < ms["mean"] < ms["interval"][1]
    # the same prediction with the sweep written in as its fitted mean has the same mean
    sweep = fed.client.post(
        FIT, json={"app": "sor", "kernel": "sweep", "predict": [{"n": 1000}]}, headers=fed.h("app")
    ).json()["predictions"][0]["mean"]
    body["grammar"] = text.replace('empirical("sor", "sweep", n = n)', repr(sweep))
    plain = fed.client.post(PREDICTIONS, json=body, headers=fed.h("app")).json()["makespan"]
    assert ms["mean"] == pytest.approx(plain["mean"], rel=0.02)
    assert ms["interval"][1] - ms["interval"][0] > plain["interval"][1] - plain["interval"][0]


def test_a_grammar_reads_a_saved_model_by_name(fed) -> None:  # noqa: F811
    post_kernels(fed)
    saved = fed.client.post(
        FIT,
        json={"app": "sor", "kernel": "sweep", "save_as": "sweep-v1", "predict": [{"n": 800}]},
        headers=fed.h("app"),
    )
    assert saved.status_code == 200, saved.text
    text = """
param n
HostTime[p] = empirical("sweep-v1", n = n) * rows[p] / n / FracAvailCPU[p]
ExecTime = max(p in hosts: HostTime[p])
"""
    body = {"grammar": text, "params": {"n": 800}, "allocation": [{"host": "h0", "rows": 800}]}
    r = fed.client.post(PREDICTIONS, json=body, headers=fed.h("app"))
    assert r.status_code == 200, r.text
    assert r.json()["makespan"]["mean"] > saved.json()["predictions"][0]["mean"]  # cpu < 1


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ('empirical("nobody", "row", n = n)', None, "no completed runs"),
        ('empirical("no-such-model", n = n)', None, "no stored empirical model"),
        ('empirical("sor", "sweep", m = n)', None, "no parameter 'm'"),
        ('empirical("sor", "sweep", n = rows[p])', None, "parameters, P and numbers only"),
    ],
)
def test_a_model_whose_fit_cannot_be_read_is_refused(fed, text, field, says) -> None:  # noqa: F811
    post_kernels(fed)
    grammar = f"param n\nHostTime[p] = {text} * rows[p]\nExecTime = max(p in hosts: HostTime[p])"
    body = {"grammar": grammar, "params": {"n": 800}, "allocation": [{"host": "h0", "rows": 800}]}
    r = fed.client.post(PREDICTIONS, json=body, headers=fed.h("app"))
    assert r.status_code == 422, r.text
    assert says in r.text, r.text


def test_an_unknown_application_says_what_would_make_it_known(fed) -> None:  # noqa: F811
    r = schedule(fed, app="heat")
    assert r.status_code == 422, r.text
    assert "'row' kernel" in r.text


def test_a_fit_that_extrapolates_to_a_negative_time_is_refused(fed) -> None:  # noqa: F811
    """The search's matmul model (a negative n^3 log2(n)^2 term) turns negative far beyond
    its range; a run's value is never negative, so a performance model reading it there is
    a 422 naming the point, not a schedule of negative times."""
    post_kernels(fed)
    grammar = (
        'param n\nHostTime[p] = empirical("numpy", "matmul", n = n) * rows[p]\n'
        "ExecTime = max(p in hosts: HostTime[p])"
    )
    alloc = [{"host": "h0", "rows": 65536}]
    body = {"grammar": grammar, "params": {"n": 65536}, "allocation": alloc}
    r = fed.client.post(PREDICTIONS, json=body, headers=fed.h("app"))
    assert r.status_code == 422, r.text
    assert "negative" in r.text and "n=65536" in r.text, r.text
    body = {**body, "params": {"n": 2048}, "allocation": [{"host": "h0", "rows": 2048}]}
    assert fed.client.post(PREDICTIONS, json=body, headers=fed.h("app")).status_code == 200


def row_stds(app: str, means_only: bool = False) -> list[dict[str, Any]]:
    """Runs of one row whose std grows like n^(1/2) while the mean grows like n (seeded)."""
    import numpy as np

    rng = np.random.default_rng(4)
    out = []
    for n in (64, 96, 128, 192, 256, 384, 512, 768, 1024):
        mean = 2e-6 * n
        values = mean + 4e-6 * np.sqrt(n / 64) * rng.standard_normal(10)
        kept = [float(values.mean())] if means_only else [float(v) for v in values]
        out.append({"app": app, "kernel": ROW_KERNEL, "params": {"n": n}, "values": kept})
    return out


def one_host(env: Any, app: str, n: int) -> dict[str, Any]:
    """The time of ``n`` rows of ``app`` on one host: ``n * empirical(app, "row", n)``."""
    text = f'param n\nHostTime[p] = empirical("{app}", "row", n = n) * rows[p]\n'
    text += "ExecTime = max(p in hosts: HostTime[p])\n"
    body = {"grammar": text, "params": {"n": n}, "allocation": [{"host": "h0", "rows": n}]}
    r = env.client.post(PREDICTIONS, json=body, headers=env.h("app"))
    assert r.status_code == 200, r.text
    return dict(r.json()["makespan"])


def test_runs_with_repetitions_give_the_calibrated_spread(fed) -> None:  # noqa: F811
    """With repetitions, `empirical(...)` reads the calibrated spread model: a time's std at
    each n is the std the fit reports there (n rows of it), so it grows in proportion to the
    spread model's, not to the mean model's; without them, the mean model's stays."""
    post_runs(fed, row_stds("spready"))
    post_runs(fed, row_stds("plain", means_only=True))
    small, large = 128, 4096  # measured 64..1024
    answers = {}
    for app in ("spready", "plain"):
        r = fed.client.post(
            FIT,
            json={"app": app, "kernel": ROW_KERNEL, "predict": [{"n": small}, {"n": large}]},
            headers=fed.h("app"),
        )
        assert r.status_code == 200, r.text
        answers[app] = r.json()
    spread = answers["spready"]["spread"]
    assert spread["used"] and spread["coverage"]["0.95"] >= 0.85 and spread["model"]
    assert answers["plain"]["spread"]["used"] is False
    assert "repetitions" in answers["plain"]["spread"]["reason"]
    at = {p["point"]["n"]: p for p in answers["spready"]["predictions"]}
    stds = {n: one_host(fed, "spready", n)["std"] for n in (small, large)}
    for n in (small, large):
        assert stds[n] == pytest.approx(n * at[n]["spread"]["std"], rel=1e-6)
    assert stds[large] / large > stds[small] / small  # a row's spread grows with n
    plain = {p["point"]["n"]: p for p in answers["plain"]["predictions"]}
    for n in (small, large):
        assert plain[n].get("spread") is None
        sd = one_host(fed, "plain", n)["std"]
        # the mean model's normal: its 95 % t interval as a normal
        assert sd == pytest.approx(
            n * (plain[n]["interval"][1] - plain[n]["mean"]) / 1.959964, rel=1e-5
        )

    # a conservative schedule reads the same spread: wider per host at the large n, and at
    # the small n wider than the mean model's (whose relative noise is pooled over sizes
    # where the runs' std is a smaller share of the mean)
    def hosts(app: str, n: int) -> dict[str, dict[str, float]]:
        r = schedule(fed, app=app, n=n, strategy="conservative", k=2)
        assert r.status_code == 200, r.text
        return {a["host"]: a["time"] for a in r.json()["allocation"]}

    few, many, plain_few = hosts("spready", small), hosts("spready", large), hosts("plain", small)
    for h, t in few.items():
        assert many[h]["std"] > t["std"]
        assert t["std"] / t["mean"] > plain_few[h]["std"] / plain_few[h]["mean"]
