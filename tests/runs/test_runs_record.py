"""The run record: its content key (what makes re-posts idempotent) and its checks."""

from __future__ import annotations

import math

import pytest

from ppe.empirical.runs import (
    MAX_BATCH,
    MAX_REPORT_BYTES,
    MAX_REPORT_DEPTH,
    MAX_VALUES,
    RunRecord,
    check_batch,
    check_record,
)


def run(**kw: object) -> RunRecord:
    base: dict[str, object] = {"app": "sor", "values": (1.5, 1.6), "params": {"n": 1000, "p": 2}}
    return RunRecord(**{**base, **kw})  # type: ignore[arg-type]


def test_the_same_content_has_the_same_key_whatever_the_spelling() -> None:
    a = run(params={"n": 1000, "p": 2}, values=(1, 2))
    b = run(params={"p": 2.0, "n": 1000.0}, values=(1.0, 2.0))
    assert a.content_key() == b.content_key()
    assert len(a.content_key()) == 64 and a.idempotency_key == a.content_key()


@pytest.mark.parametrize(
    "change",
    [
        {"values": (1.5, 1.7)},
        {"params": {"n": 1001, "p": 2}},
        {"kernel": "sweep"},
        {"system": "h0,h1"},
        {"metric": "energy"},
        {"schedule_id": 3},
        {"status": "failed"},
        {"report": {"ranks": [1.0, 2.0]}},
        {"app": "jacobi"},
    ],
)
def test_any_change_of_content_changes_the_key(change: dict[str, object]) -> None:
    assert run(**change).content_key() != run().content_key()


def test_a_client_key_is_the_key() -> None:
    r = run(key="job-17")
    assert r.idempotency_key == "job-17"
    assert r.content_key() == run().content_key()  # the content hash ignores the key


def test_a_good_record_has_no_problem() -> None:
    assert check_record(run(report={"ranks": [{"rank": 0, "times": [0.1, 0.2]}]})) == []


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"values": ()}, "values", "at least one"),
        ({"values": (1.0, math.nan)}, "values", "values[1] is nan"),
        ({"values": (math.inf,)}, "values", "finite"),
        ({"values": (0.0, -0.5)}, "values", "values[1] is -0.5"),
        ({"values": (1.0,) * (MAX_VALUES + 1)}, "values", f"at most {MAX_VALUES}"),
        ({"params": {"n": math.nan}}, "params", "'n'"),
        ({"params": {"n": 1e16}}, "params", "at most"),
        ({"params": {f"p{i}": 1 for i in range(65)}}, "params", "at most 64"),
        ({"status": "crashed"}, "status", "completed, failed"),
        ({"schedule_id": 0}, "schedule_id", "positive"),
        ({"app": ""}, "app", "empty"),
        ({"system": ""}, "system", "empty"),
        ({"key": ""}, "key", "empty"),
        ({"report": {"t": math.nan}}, "report", "report.t: numbers must be finite"),
        ({"report": {"big": 2**64}}, "report", "64 bits"),
        ({"report": {"s": "a\x00b"}}, "report", "NUL"),
        ({"report": {"s": "\ud800"}}, "report", "Unicode"),
        ({"report": {"blob": "x" * MAX_REPORT_BYTES}}, "report", f"at most {MAX_REPORT_BYTES}"),
    ],
)
def test_each_bad_field_is_named(change: dict[str, object], field: str, words: str) -> None:
    problems = check_record(run(**change))
    assert [f for f, _ in problems] == [field]
    assert words in problems[0][1]


def test_a_deep_report_is_refused_without_recursion() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(10 * MAX_REPORT_DEPTH):
        node["x"] = {}
        node = node["x"]  # type: ignore[assignment]
    [(field, why)] = check_record(run(report=deep))
    assert field == "report" and "deeper" in why


def test_a_batch_names_each_bad_run_and_refuses_empty_and_huge_batches() -> None:
    problems = check_batch([run(), run(values=(-1.0,)), run(status="x")])
    assert [(p.index, p.field) for p in problems] == [(1, "values"), (2, "status")]
    assert [(p.index, p.field) for p in check_batch([])] == [(None, "runs")]
    assert check_batch([run()] * (MAX_BATCH + 1))[0].field == "runs"
