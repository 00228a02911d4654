"""`empirical(...)` in the performance grammar: syntax, checks, binding and every engine."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from ppe.core import (
    CompiledModel,
    EmpiricalSource,
    GrammarError,
    HostInputs,
    ModelError,
    Normal,
    ParameterError,
    Point,
    StochasticValue,
    bind_empirical,
    compile_model,
    linear_host_models,
    predict,
)
from ppe.core.errors import EvaluationError
from ppe.core.grammar import compile_expression, unparse

TAIL = "\nExecTime = max(p in hosts: HostTime[p])\n"


class Linear:
    """A fitted model stand-in: time = 1e-3 * n seconds, 10 % spread; records its points."""

    def __init__(self) -> None:
        self.points: list[dict[str, float]] = []

    def to_stochastic(self, point: Mapping[str, float]) -> StochasticValue:
        self.points.append(dict(point))
        if point.get("n", 0) <= 0:
            raise ParameterError("n must be positive", name="n")
        mean = 1e-3 * point["n"]
        return Normal(mean, 0.1 * mean)


def model(body: str, params: str = "param n\nparam I = 1\n") -> CompiledModel:
    return compile_model(params + body + TAIL)


def hosts(cpu: float | None = None) -> list[HostInputs]:
    return [
        HostInputs(f"h{k}", 1.0, Point(1.0) if cpu is None else Normal(cpu, 0.05)) for k in range(2)
    ]


def test_calls_parse_into_references_and_points() -> None:
    m = compile_model(
        'param n\nparam I = 1\nA = empirical("app", "row", n = 2 * n, p = P)\n'
        'B = empirical("saved") + empirical("app", "row", n = 2 * n, p = P)\n'
        "HostTime[p] = I * rows[p] * (A + B)" + TAIL
    )
    assert [c.ref for c in m.empirical_calls] == [("app", "row"), ("saved",), ("app", "row")]
    assert m.empirical_refs() == (("app", "row"), ("saved",))
    assert unparse(m.empirical_calls[0]) == 'empirical("app", "row", n = (2 * n), p = P)'
    assert m.describe()["empirical"] == [["app", "row"], ["saved"]]
    assert m.stochastic["A"] and not m.uses("Benchmark")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('HostTime[p] = empirical("a", "k", n = rows[p])', "parameters, P and numbers only"),
        ('HostTime[p] = empirical("a", "k", n = p)', "parameters, P and numbers only"),
        ('HostTime[p] = empirical("a", "k", n = FracAvailCPU[p])', "parameters, P and numbers"),
        ('HostTime[p] = empirical("a", "k", n = 1, n = 2)', "names 'n' twice"),
        ('HostTime[p] = empirical("a", "A+B", n = 1)', "pair of kernels"),
        ("HostTime[p] = empirical(n = 1)", "a name in double quotes"),
        ('HostTime[p] = empirical("a", "k", 3)', "a parameter name"),
        ('HostTime[p] = empirical("a", "k", n = m)', "unknown name 'm'"),
        ("HostTime[p] = rows[p]\nempirical = 2", "reserved"),
    ],
)
def test_bad_calls_are_grammar_errors(body: str, says: str) -> None:
    with pytest.raises(GrammarError) as exc:
        model(body)
    assert any(says in e.message for e in exc.value.errors), exc.value.errors


def test_a_require_and_a_template_cannot_read_a_model() -> None:
    with pytest.raises(GrammarError, match="empirical"):
        model('HostTime[p] = rows[p]\nrequire empirical("a", "k") > 0')
    with pytest.raises(GrammarError, match="for performance models"):
        compile_expression('N * empirical("a", "k", n = N)')


def test_an_unbound_model_says_which_fit_is_missing() -> None:
    m = model('HostTime[p] = I * rows[p] * empirical("app", "row", n = n)')
    with pytest.raises(EvaluationError, match='no model is bound for empirical\\("app", "row"\\)'):
        predict(m, {"n": 100}, hosts(), [50, 50])
    with pytest.raises(ParameterError, match="no model is bound"):
        bind_empirical(m, {("app", "other"): Linear()})


@pytest.mark.parametrize(("engine", "chain"), [("numeric", 1), ("analytic", 2), ("mc", 2)])
def test_every_engine_reads_the_value_at_its_point(engine: str, chain: int) -> None:
    """(The numeric engine keeps maxima exact over independent hosts only: one host.)"""
    m = model('HostTime[p] = I * rows[p] * empirical("app", "row", n = n)')
    src = Linear()
    bound = bind_empirical(m, {("app", "row"): src})
    rows = [120, 80][:chain]
    pred = predict(bound, {"n": 200, "I": 10}, hosts()[:chain], rows, engine=engine, samples=40_000)
    row = Normal(0.2, 0.02)  # 1e-3 * 200 and its 10 %
    # one draw for both hosts: the makespan is the host with more rows, exactly
    assert pred.makespan.mean() == pytest.approx(10 * 120 * row.mean(), rel=1e-2)
    assert pred.makespan.std() == pytest.approx(10 * 120 * row.std(), rel=2e-2)
    assert pred.engine == engine
    assert src.points == [{"n": 200.0}]


def test_calls_at_one_point_are_one_draw_and_other_points_are_others() -> None:
    same = model(
        'HostTime[p] = rows[p] * (empirical("a", "k", n = n) - empirical("a", "k", n = n))'
        " + rows[p]"
    )
    other = model(
        'HostTime[p] = rows[p] * (empirical("a", "k", n = n) - empirical("a", "k", n = n + 0))'
        ' + rows[p] * (empirical("a", "k", n = 2 * n) - empirical("a", "k", n = n)) + rows[p]'
    )
    src: dict[tuple[str, ...], EmpiricalSource] = {("a", "k"): Linear()}
    p_same = predict(bind_empirical(same, src), {"n": 100}, hosts(), [10, 10], engine="mc")
    assert p_same.makespan.std() == pytest.approx(0.0, abs=1e-12)
    p_other = predict(bind_empirical(other, src), {"n": 100}, hosts(), [10, 10], engine="mc")
    # independent draws at n = 100 and 200: 10 * (N(0.2, .02) - N(0.1, .01)) + 10
    assert p_other.makespan.mean() == pytest.approx(11.0, rel=1e-2)
    assert p_other.makespan.std() == pytest.approx(10 * (0.02**2 + 0.01**2) ** 0.5, rel=3e-2)


def test_the_auto_engine_keeps_cpu_and_model_independent() -> None:
    m = model('HostTime[p] = I * rows[p] * empirical("a", "row", n = n) / FracAvailCPU[p]')
    bound = bind_empirical(m, {("a", "row"): Linear()})
    auto = predict(bound, {"n": 100, "I": 5}, hosts(cpu=0.5), [100, 0])
    mc = predict(bound, {"n": 100, "I": 5}, hosts(cpu=0.5), [100, 0], engine="mc", samples=100_000)
    assert auto.makespan.mean() == pytest.approx(mc.makespan.mean(), rel=1e-2)
    assert auto.makespan.std() == pytest.approx(mc.makespan.std(), rel=5e-2)
    lo, hi = mc.makespan.interval(0.95)
    assert lo < 5 * 100 * 0.1 / 0.5 < hi
    [(a, b), _] = linear_host_models(bound, {"n": 100, "I": 5}, hosts(cpu=0.5))
    assert a.mean() == pytest.approx(mc.makespan.mean() / 100, rel=2e-2) and b.mean() == 0


def test_a_bad_point_is_reported_at_the_call() -> None:
    m = model('HostTime[p] = rows[p] * empirical("app", "row", n = n - 100)')
    bound = bind_empirical(m, {("app", "row"): Linear()})
    with pytest.raises(ModelError) as exc:
        predict(bound, {"n": 100}, hosts(), [50, 50])
    assert exc.value.line == 3 and exc.value.name == "n"
    assert "n must be positive" in exc.value.message


def test_the_strip_model_of_an_application_compiles_for_any_parameters() -> None:
    from ppe.empirical.errors import EmpiricalError
    from ppe.empirical.strip import strip_model_text

    for params in ([], ["n"], ["n", "P", "iterations"], ["n", "p", "q", "h"]):
        m = compile_model(strip_model_text("heat", params))
        assert m.empirical_refs() == (("heat", "row"),)
        assert list(m.empirical_calls[0].names) == params
    for bad in (["rows"], ["Halo"], ["x-y"]):
        with pytest.raises(EmpiricalError):
            strip_model_text("heat", bad)
