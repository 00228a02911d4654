"""The performance grammar: parsing, validation errors that point at the
culprit, and evaluation semantics."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.core import (
    EvaluationError,
    GrammarError,
    HostInputs,
    Normal,
    ParameterError,
    Point,
    compile_model,
    predict,
    validate_model,
)

TAIL = "HostTime[p] = X[p]\nExecTime = max(p in hosts: HostTime[p])\n"


def hosts(k: int, cpu: float = 0.5, bw: float = 1e6, latency: float = 0.0) -> list[HostInputs]:
    return [
        HostInputs(
            f"h{i}",
            1.0,
            Point(cpu),
            Point(bw) if i < k - 1 else None,
            Point(bw) if i > 0 else None,
            latency,
        )
        for i in range(k)
    ]


def value(text: str, params: dict[str, float] | None = None, k: int = 4) -> list[float]:
    """Per-host HostTime of a model whose X[p] is under test (point inputs)."""
    pred = predict(text + TAIL, params or {}, hosts(k), [0] * k)
    return [t.mean() for t in pred.per_host]


@pytest.mark.parametrize(
    ("text", "line", "column", "token", "fragment"),
    [
        ("X[p] = rows[p] * Benchmrk[p]\n", 1, 18, "Benchmrk", "did you mean 'Benchmark'"),
        ("X[p] = FracAvailCPU[p, p]\n", 1, 8, "FracAvailCPU", "takes 1 index(es), got 2"),
        ("X[p] = BWAvail[p]\n", 1, 8, "BWAvail", "takes 2 index(es), got 1"),
        ("X[p] = rows\n", 1, 8, "rows", "needs 1 index"),
        ("X[p] = 3 / (2 - 2)\n", 1, 13, "2", "division by zero"),
        ("X[p] = rows[p] / (0 * P)\n", 1, 19, "0", "always 0"),
        ("X[p] = Y[p]\nY[p] = Z[p]\nZ[p] = X[p] + 1\n", 3, 8, "X", "recursive definition"),
        ("X[p] = rows[p] * (2 + )\n", 1, 23, ")", "unexpected ')'"),
        ("X[p] = rows[p] * (2 + 1\n", 1, 18, "(", "never closed"),
        ("X[p] = rows[p] $ 2\n", 1, 16, "$", "unexpected character"),
        ("X[p] = if FracAvailCPU[p] > 0.5 then 1 else 0\n", 1, 11, "FracAvailCPU", "stochastic"),
        ("X[p] = rows[p] > 1\n", 1, 8, "rows", "expected a number"),
        ("X[p] = sqrt(rows[p])\n", 1, 8, "sqrt", "unknown name 'sqrt'"),
        ("X[p] = 1\nX[q] = 2\n", 2, 1, "X", "defined twice"),
        ("param rows\nX[p] = 1\n", 1, 7, "rows", "reserved"),
        ("X[p] = sum(q in hosts rows[q])\n", 1, 23, "rows", "expected ':'"),
        ("X[p] = FracAvailCPU[rows[p] * FracAvailCPU[p]]\n", 1, 21, "rows", "index of"),
        ("X[p] = Undefined[p] * 2\n", 1, 8, "Undefined", "unknown name"),
        ("X[p] = __import__('os')\n", 1, 19, "'", "unexpected character"),
    ],
)
def test_errors_point_at_the_culprit(
    text: str, line: int, column: int, token: str, fragment: str
) -> None:
    with pytest.raises(GrammarError) as info:
        compile_model(text + TAIL)
    err = info.value
    assert (err.line, err.column, err.token) == (line, column, token)
    assert fragment in err.message
    body = err.to_dict()
    assert body["type"] == "grammar" and body["line"] == line and body["token"] == token


def test_all_errors_are_reported_in_text_order() -> None:
    text = "X[p] = nope\nY = 1 / 0\nZ[p] = rows[p, p]\n" + TAIL
    errors = validate_model(text)
    assert [(e.line, e.token) for e in errors] == [(1, "nope"), (2, "0"), (3, "rows")]
    assert validate_model("X[p] = 1\n" + TAIL) == []


def test_required_components() -> None:
    errors = validate_model("X[p] = 1\n")
    assert {e.name for e in errors} == {"HostTime", "ExecTime"}
    errors = validate_model("HostTime = 1\nExecTime = 2\n")
    assert [e.name for e in errors] == ["HostTime"]
    assert validate_model("") and validate_model("# only a comment\n")


def test_arithmetic_precedence_and_conditionals() -> None:
    assert value("X[p] = 1 + 2 * 3 - 8 / 4 / 2\n") == [6.0] * 4
    assert value("X[p] = -(2 - 5) * -1\n") == [-3.0] * 4
    ends = "X[p] = if p == 0 or p == P - 1 then 1 else if not p > 1 then 2 else 3\n"
    assert value(ends) == [1.0, 2.0, 3.0, 1.0]
    assert value("X[p] = max(p, 2, 1) + min(p, 1)\n") == [2.0, 3.0, 3.0, 4.0]


def test_aggregations() -> None:
    assert value("X[p] = sum(q in neighbours(p): 1)\n") == [1.0, 2.0, 2.0, 1.0]
    assert value("X[p] = sum(q in neighbours(p): q)\n") == [1.0, 2.0, 4.0, 2.0]
    assert value("X[p] = sum(i in 1..p: i)\n") == [0.0, 1.0, 3.0, 6.0]
    assert value("X[p] = max(q in hosts: q * p)\n") == [0.0, 3.0, 6.0, 9.0]
    assert value("X[p] = min(i in 2..5: i) + sum(q in hosts: 2)\n") == [10.0] * 4
    # continuation lines and a component used by another
    text = "Y[p] = p\n  + 1\nX[p] = Y[p] *\n  2\n"
    assert value(text) == [2.0, 4.0, 6.0, 8.0]


def test_parameters_aliases_defaults_and_requires() -> None:
    text = 'param n alias size, side\nparam k = 3\nrequire n >= 1 : "n too small"\nX[p] = n * k\n'
    assert value(text, {"side": 2}) == [6.0] * 4
    assert value(text, {"n": 2, "k": 1}) == [2.0] * 4
    with pytest.raises(ParameterError) as info:
        value(text, {"n": 0})
    assert info.value.name == "n" and "n too small" in info.value.message
    assert info.value.line == 3
    with pytest.raises(ParameterError) as info:
        value(text, {"m": 1, "n": 1})
    assert info.value.name == "m"
    with pytest.raises(ParameterError) as info:
        value(text, {})
    assert info.value.name == "n"
    with pytest.raises(ParameterError) as info:
        value(text, {"n": "4"})  # type: ignore[dict-item]
    assert info.value.name == "n"
    with pytest.raises(ParameterError):
        value(text, {"n": 1, "size": 2})  # same parameter twice


def test_evaluation_errors_point_at_the_expression() -> None:
    with pytest.raises(EvaluationError) as info:
        value("X[p] = BWAvail[p, p]\n")
    assert info.value.name == "BWAvail" and "not neighbours" in info.value.message
    assert (info.value.line, info.value.column) == (1, 8)
    with pytest.raises(EvaluationError) as info:
        value("X[p] = rows[p + 1]\n")
    assert "out of range" in info.value.message
    with pytest.raises(EvaluationError) as info:
        value("param d\nX[p] = 1 / d\n", {"d": 0})
    assert "division by zero" in info.value.message and info.value.line == 2
    with pytest.raises(EvaluationError) as info:
        value("X[p] = rows[p / 2]\n")
    assert "integer" in info.value.message
    with pytest.raises(EvaluationError) as info:
        value("X[p] = max(i in 1..0: i)\n")
    assert "empty" in info.value.message


def test_missing_link_is_named() -> None:
    hs = hosts(3)
    hs[1] = HostInputs("h1", 1.0, Point(0.5), None, Point(1e6))
    with pytest.raises(EvaluationError) as info:
        predict("sor", {"n": 10, "I": 1}, hs, [1, 1, 1])
    assert info.value.name == "hosts[1].bw_next" and "'h1'" in info.value.message


def test_components_are_shared_so_identical_formulas_are_one_value() -> None:
    """A[p] and B[p] with the same formula are the same draw (fully correlated)."""
    text = (
        "A[p] = 1 / FracAvailCPU[p]\nB[q] = 1 / FracAvailCPU[q]\n"
        "HostTime[p] = A[p] - B[p]\nExecTime = max(p in hosts: HostTime[p])\n"
    )
    hs = [HostInputs("h", 1.0, Normal(0.5, 0.02))]
    for engine in ("analytic", "mc"):
        assert predict(text, {}, hs, [1], engine=engine).per_host[0].std() == 0.0


def test_iteration_sum_of_a_run_constant_is_a_multiple() -> None:
    """One draw per run: sum over iterations of an i-free term is I times it."""
    text = (
        "param I\nT[p] = 1 / FracAvailCPU[p]\nHostTime[p] = sum(i in 1..I: T[p])\n"
        "ExecTime = sum(i in 1..I: max(p in hosts: T[p]))\n"
    )
    hs = [HostInputs(f"h{k}", 1.0, Normal(0.5, 0.02)) for k in range(3)]
    one = predict(text, {"I": 1}, hs, [1, 1, 1])
    many = predict(text, {"I": 50}, hs, [1, 1, 1])
    assert many.makespan.mean() == pytest.approx(50 * one.makespan.mean(), rel=1e-12)
    assert many.makespan.std() == pytest.approx(50 * one.makespan.std(), rel=1e-12)
    assert np.isclose(many.per_host[0].std(), 50 * one.per_host[0].std(), rtol=1e-12)


def test_overflow_is_an_evaluation_error_not_a_crash() -> None:
    with pytest.raises(EvaluationError) as info:
        value("X[p] = 1e300 * 1e300\n")
    assert "non-finite" in info.value.message
