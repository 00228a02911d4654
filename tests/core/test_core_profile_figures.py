"""Machine-profile figures inside grammars: ``flops_dense[p]`` and its kin are host-indexed
system parameters (``HostInputs.system``), named once in ``PROFILE_PARAMETERS``."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

from ppe.core import (
    EvaluationError,
    GrammarError,
    HostInputs,
    Normal,
    ParameterError,
    compile_model,
    linear_host_models,
    predict,
)
from ppe.core.grammar import BUILTINS, PROFILE_BUILTINS, RESERVED
from ppe.core.profile_figures import PROFILE_PARAMETERS

MODEL = """
param n
param I alias iterations
param Flop = 6
param Bytes = 24
RowTime[p] = n * (Flop / flops_dense[p] + Bytes / mem_read_unit_largest[p]) + call_s[p]
HostTime[p] = I * rows[p] * RowTime[p] / FracAvailCPU[p]
ExecTime = max(p in hosts: HostTime[p])
"""

FIGS = {
    "a": {"flops_dense": 2e10, "mem_read_unit_largest": 1e9, "call_s": 1e-6},
    "b": {"flops_dense": 5e9, "mem_read_unit_largest": 4e8, "call_s": 3e-6, "view_s": 1.0},
}
CPU = {"a": 0.5, "b": 0.8}


def hosts(cpu: Mapping[str, object] | None = None) -> list[HostInputs]:
    cpu = cpu or dict(CPU)
    return [HostInputs(h, 1.0, cpu[h], system=FIGS[h]) for h in FIGS]


def hand(host: str, rows: int, n: float = 400.0, iterations: float = 10.0) -> float:
    f = FIGS[host]
    row = n * (6 / f["flops_dense"] + 24 / f["mem_read_unit_largest"]) + f["call_s"]
    return iterations * rows * row / CPU[host]


@pytest.mark.parametrize("engine", ["numeric", "analytic", "mc", "auto"])
def test_a_model_reads_each_hosts_figures(engine: str) -> None:
    pred = predict(MODEL, {"n": 400, "I": 10}, hosts(), [300, 100], engine=engine)
    want = [hand("a", 300), hand("b", 100)]
    for got, w in zip(pred.per_host, want, strict=True):
        assert math.isclose(got.mean(), w, rel_tol=1e-12)
    assert math.isclose(pred.makespan.mean(), max(want), rel_tol=1e-9)
    assert want[0] != want[1]  # the hosts' figures differ, so a mix-up would show


@pytest.mark.parametrize("engine", ["analytic", "mc"])
def test_figures_are_deterministic_factors_of_a_stochastic_time(engine: str) -> None:
    """With a normal CPU forecast, the slope the scheduler balances is the hand row time on an
    idle host over the forecast (the figures are deterministic factors), in both engines."""
    cpu = {"a": Normal(0.5, 0.02), "b": Normal(0.8, 0.02)}
    lin = linear_host_models(MODEL, {"n": 400, "I": 10}, hosts(cpu), engine=engine)
    for (a, b), host in zip(lin, FIGS, strict=True):
        dedicated = hand(host, 1) * CPU[host]  # seconds per row on an idle host
        assert math.isclose(b.mean(), 0.0, abs_tol=1e-18)
        # E[1/X] of a normal with sigma/mu = 0.04 or less is 1/mu within 0.2 %
        assert a.mean() == pytest.approx(dedicated / CPU[host], rel=2e-3)
        assert a.std() > 0


def test_names_come_from_the_profile_catalogue() -> None:
    assert set(PROFILE_BUILTINS) == set(PROFILE_PARAMETERS)
    for name, p in PROFILE_PARAMETERS.items():
        b = BUILTINS[name]
        assert (b.arity, b.stochastic, b.profile, b.unit) == (1, False, True, p.unit)
        assert name in RESERVED
    used = compile_model(MODEL).profile_names()
    assert used == ("flops_dense", "call_s", "mem_read_unit_largest")  # catalogue order
    assert compile_model(MODEL).describe()["profile"] == list(used)  # GET /models shows them
    assert compile_model(MODEL.replace("call_s[p]", "0")).uses("call_s") is False


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("flops_dense[p]", "flops_dens[p]"),
            "unknown name 'flops_dens'; did you mean 'flops_dense'?",
        ),
        (("flops_dense[p]", "flops_dense"), "'flops_dense' needs 1 index(es)"),
        (("flops_dense[p]", "flops_dense[p, p]"), "'flops_dense' takes 1 index(es), got 2"),
        (("param Flop = 6", "param flops_dense = 6"), "'flops_dense' is a reserved name"),
        (("mem_read_unit_largest[p]", "mem_read_unit_biggest[p]"), "unknown name"),
    ],
)
def test_unknown_or_misused_figures_are_grammar_errors(
    change: tuple[str, str], message: str
) -> None:
    with pytest.raises(GrammarError) as info:
        compile_model(MODEL.replace(*change))
    assert message in str(info.value)
    assert info.value.line is not None


def test_a_host_without_a_figure_the_model_reads_is_named() -> None:
    bare = HostInputs("c", 1.0, 0.5, system={"flops_dense": 1e9, "call_s": 1e-6})
    for engine in ("numeric", "analytic", "mc"):
        with pytest.raises(EvaluationError) as info:
            predict(MODEL, {"n": 400, "I": 10}, [hosts()[0], bare], [1, 1], engine=engine)
        err = info.value
        assert err.name == "hosts[1].system.mem_read_unit_largest"
        assert "host 'c'" in err.message and "'mem_read_unit_largest'" in err.message
        assert "ppe profile" in err.message and "/api/v1/resources/c/profiles" in err.message
        assert "HostInputs.system" in err.message


def test_a_figure_is_needed_only_where_the_model_reads_it() -> None:
    model = MODEL.replace("+ call_s[p]", "+ (if p == 0 then call_s[p] else 0)")
    second = HostInputs("c", 1.0, 0.8, system={k: v for k, v in FIGS["b"].items() if k != "call_s"})
    pred = predict(model, {"n": 400, "I": 10}, [hosts()[0], second], [300, 100])
    assert math.isclose(pred.per_host[0].mean(), hand("a", 300), rel_tol=1e-12)
    assert math.isclose(
        pred.per_host[1].mean(), hand("b", 100) - 10 * 100 * 3e-6 / 0.8, rel_tol=1e-12
    )


@pytest.mark.parametrize(
    ("system", "name", "message"),
    [
        ({"flops_dence": 1e9}, "hosts[0].system", "did you mean 'flops_dense'?"),
        ({"flops_dense": -1.0}, "hosts[0].system.flops_dense", "finite number > 0"),
        ({"flops_dense": float("nan")}, "hosts[0].system.flops_dense", "finite number > 0"),
        ({"flops_dense": "fast"}, "hosts[0].system.flops_dense", "must be a number"),
    ],
)
def test_bad_figures_are_refused(system: dict[str, object], name: str, message: str) -> None:
    bad = HostInputs("a", 1.0, 0.5, system=system)  # type: ignore[arg-type]
    with pytest.raises(ParameterError) as info:
        predict(MODEL, {"n": 400, "I": 10}, [bad], [1])
    assert info.value.name == name and message in info.value.message


def test_models_without_figures_need_none() -> None:
    assert (
        compile_model(
            MODEL.replace("flops_dense[p]", "1e9")
            .replace("mem_read_unit_largest[p]", "1e9")
            .replace("call_s[p]", "0")
        ).profile_names()
        == ()
    )
    pred = predict("sor", {"n": 100, "I": 2}, [HostInputs("a", 1e-8, 0.5)], [100])
    assert pred.makespan.mean() > 0
