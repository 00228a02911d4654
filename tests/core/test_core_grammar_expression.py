"""The grammar's power operator and stand-alone expressions (parameterization templates):
parsed by the model parser, evaluated by the model evaluator, errors in the model's shape."""

from __future__ import annotations

import math

import pytest

from ppe.core import EvaluationError, GrammarError, HostInputs, Normal, ParameterError, predict
from ppe.core.evaluate import evaluate_expression, expression_names
from ppe.core.grammar import (
    MAX_DEPTH,
    GrammarLimitError,
    compile_expression,
    compile_model,
    define_function,
)

MODEL = """param n
HostTime[p] = rows[p] * Benchmark[p] * {work} / FracAvailCPU[p]
ExecTime = max(p in hosts: HostTime[p])
"""


def value(text: str, **values: float) -> float:
    return evaluate_expression(compile_expression(text), values)


# ------------------------------------------------------------------ the power operator


@pytest.mark.parametrize(
    ("text", "python"),
    [
        ("2^3", "2**3"),
        ("-2^2", "-2**2"),  # '^' binds tighter than a prefix '-'
        ("2^3^2", "2**3**2"),  # and groups to the right
        ("2^-1", "2**-1"),  # the exponent may carry a sign
        ("2^-x*3", "2**-x*3"),
        ("x^0.5 * 4", "x**0.5 * 4"),
        ("(1 + x)^2 / 3 - x", "(1 + x)**2 / 3 - x"),
        ("3 * x^2^0.5", "3 * x**2**0.5"),
        ("x^\n2", "x**2"),  # a line ending with '^' continues
    ],
)
def test_power_precedence_and_grouping_follow_python(text: str, python: str) -> None:
    x = 2.5
    assert value(text, x=x) == pytest.approx(eval(python, {"x": x}), rel=1e-15)  # noqa: S307


def test_power_in_a_model_predicts_as_repeated_products() -> None:
    hosts = [HostInputs("a", 1e-8, Normal(0.5, 0.05)), HostInputs("b", 2e-8, Normal(0.7, 0.05))]
    power = predict(MODEL.format(work="n^2"), {"n": 300}, hosts, [100, 200], engine="analytic")
    times = predict(MODEL.format(work="n*n"), {"n": 300}, hosts, [100, 200], engine="analytic")
    assert power.makespan.mean() == pytest.approx(times.makespan.mean(), rel=1e-12)
    assert power.makespan.std() == pytest.approx(times.makespan.std(), rel=1e-12)


def test_power_of_a_random_value_is_refused_when_compiling() -> None:
    text = MODEL.format(work="n").replace("/ FracAvailCPU[p]", "/ FracAvailCPU[p]^2")
    with pytest.raises(GrammarError, match=r"'\^' needs deterministic operands") as info:
        compile_model(text)
    assert info.value.line == 2


@pytest.mark.parametrize(
    ("text", "values", "message"),
    [
        ("x^0.5", {"x": -8.0}, "not a real number"),
        ("x^-1", {"x": 0.0}, "division by zero"),
        ("10^x", {"x": 400.0}, "not finite"),
    ],
)
def test_powers_that_are_not_real_numbers_are_evaluation_errors(
    text: str, values: dict[str, float], message: str
) -> None:
    with pytest.raises(EvaluationError, match=message) as info:
        evaluate_expression(compile_expression(text), values)
    assert (info.value.line, info.value.column) == (1, 1)


def test_negative_base_with_an_integer_exponent_is_fine() -> None:
    assert value("x^3", x=-2.0) == -8.0


# ------------------------------------------------------------------ expressions


def test_names_and_calls_in_order_of_first_appearance() -> None:
    expr = compile_expression(
        "ADDM*N^3/(P-1) + 2*N*MPISR(L)/(P-1) + N*MPIBC(L) + max(N, L)",
        {"MPISR": 1, "MPIBC": 1},
    )
    assert expr.names == ("ADDM", "N", "P", "L")
    assert expr.calls == ("MPISR", "MPIBC")


def test_named_functions_bind_their_formals_and_use_free_names() -> None:
    sr = define_function("SR", ("L",), "lat + L / bw")
    bc = define_function("BC", ("L",), "rounds * SR(L)", {"SR": 1})
    expr = compile_expression("N * BC(L * 2) + SR(1)", {"SR": 1, "BC": 1})
    functions = {"SR": sr, "BC": bc}
    assert set(expression_names(expr, functions)) == {"N", "L", "lat", "bw", "rounds"}
    v = {"N": 10.0, "L": 1e6, "lat": 1e-4, "bw": 1e8, "rounds": 3.0}
    got = evaluate_expression(expr, v, functions)
    expected = 10 * 3 * (1e-4 + 2e6 / 1e8) + (1e-4 + 1 / 1e8)
    assert got == pytest.approx(expected, rel=1e-14)


def test_conditions_and_min_max() -> None:
    text = "if N > 100 and not P == 1 then min(N, 3 * P) else max(N, P, 7)"
    assert value(text, N=200, P=4) == 12
    assert value(text, N=5, P=2) == 7


@pytest.mark.parametrize(
    ("text", "messages"),
    [
        ("", ["the expression is empty"]),
        ("N +", ["expression ends too early"]),
        ("a = 3", ["unexpected '=' after the end of the expression"]),
        ("N > 1", ["the expression is a condition, not a number"]),
        ("N / (2 - 2)", ["division by zero: (2 - 2) is always 0"]),
        (
            "X[1] + FOO(2) + max",
            [
                "an expression has no indexed names",
                "unknown function 'FOO'",
                "'max' is a function",
            ],
        ),
        ("MPSIR(L)", ["unknown function 'MPSIR'; did you mean 'MPISR'?"]),
        ("MPISR(L, 2)", ["MPISR() takes 1 argument(s), got 2"]),
        ("sum(i in 1..3: i)", ["aggregations need hosts"]),
        ("if N > 1 then 2 else N > 3", ["expected a number, got a condition"]),
        ('N * "x"', ["unexpected"]),
    ],
)
def test_every_problem_is_reported_with_its_place(text: str, messages: list[str]) -> None:
    with pytest.raises(GrammarError) as info:
        compile_expression(text, {"MPISR": 1})
    found = [e.message for e in info.value.errors]
    assert len(found) == len(messages), found
    for got, want in zip(found, messages, strict=True):
        assert want in got
    assert all(e.line is not None for e in info.value.errors)


def test_nesting_beyond_the_limit_is_refused_and_just_under_it_evaluates() -> None:
    over = "(" * (MAX_DEPTH + 1) + "N" + ")" * (MAX_DEPTH + 1)
    with pytest.raises(GrammarLimitError) as info:
        compile_expression(over)
    assert info.value.limit == "depth"
    under = "(" * (MAX_DEPTH - 2) + "N" + ")" * (MAX_DEPTH - 2)
    assert value(under, N=3.0) == 3.0
    chain = " + ".join(["N"] * (MAX_DEPTH - 1))
    assert value(chain, N=1.5) == pytest.approx(1.5 * (MAX_DEPTH - 1))


def test_missing_and_non_finite_values_name_the_name() -> None:
    expr = compile_expression("N * ADDM")
    with pytest.raises(ParameterError) as info:
        evaluate_expression(expr, {"N": 3.0})
    assert info.value.name == "ADDM"
    with pytest.raises(ParameterError) as info:
        evaluate_expression(expr, {"N": 3.0, "ADDM": math.nan})
    assert info.value.name == "ADDM"


def test_recursive_functions_are_an_error_not_a_hang() -> None:
    a = define_function("A", ("x",), "B(x) + 1", {"B": 1})
    b = define_function("B", ("x",), "A(x) * 2", {"A": 1})
    expr = compile_expression("A(1)", {"A": 1})
    with pytest.raises(EvaluationError, match="recursive function definitions: A -> B -> A"):
        evaluate_expression(expr, {}, {"A": a, "B": b})
