"""Parameterization templates and the systems database (pure): figures per system, groups,
message-cost functions, and per-system problems naming the missing parameter."""

from __future__ import annotations

import math
from typing import Literal

import pytest

from ppe.core import GrammarError, ParameterError
from ppe.empirical.systems import HostFigures, bcast_rounds, system_of
from ppe.empirical.templates import (
    MissingSystemParameter,
    compile_template,
    evaluate_on_systems,
    evaluate_template,
)

PROPHECY = "ADDM*N^3/(P-1) + 2*N*MPISR(L)/(P-1) + N*MPIBC(L)"

H0 = HostFigures(
    "h0",
    {"ADDM": 2e-9, "benchmark": 1e-8, "fast": True, "site": "lab", "cores": 8},
    {"latency": [1e-4, 3e-4], "bandwidth": [1e8, 3e8], "cpu": [0.5]},
)
H1 = HostFigures(
    "h1",
    {"ADDM": 4e-9, "latency": 9.0},
    {"latency": [5e-4], "bandwidth": [5e7], "cpu": [0.9]},
)
H2 = HostFigures("h2", {"latency": 2e-3, "bandwidth": 1e6})  # nothing measured


def test_one_resource_numbers_measured_means_and_derived_figures() -> None:
    s = system_of("h0", [H0])
    assert s.parameters == pytest.approx(
        {
            "ADDM": 2e-9,
            "benchmark": 1e-8,
            "cores": 8.0,
            "latency": 2e-4,  # mean over its links
            "bandwidth": 2e8,
            "cpu": 0.5,
            "hosts": 1.0,
            "bcast_rounds": 1.0,
        },
        rel=1e-12,
    )
    assert s.sources["ADDM"] == "property" and s.sources["latency"] == "measured"
    assert s.sources["hosts"] == "derived"


def test_a_property_is_the_fallback_of_a_measured_figure_never_its_override() -> None:
    assert system_of("h1", [H1]).parameters["latency"] == 5e-4  # measured wins
    fallback = system_of("h2", [H2])
    assert fallback.parameters["latency"] == 2e-3
    assert fallback.sources["latency"] == "property"


def test_a_group_takes_the_worst_link_and_cpu_and_the_mean_of_shared_properties() -> None:
    g = system_of("h0,h1", [H0, H1])
    assert g.hosts == ("h0", "h1")
    assert g.parameters["latency"] == 5e-4  # largest
    assert g.parameters["bandwidth"] == 5e7  # smallest
    assert g.parameters["cpu"] == 0.5  # smallest
    assert g.parameters["ADDM"] == pytest.approx(3e-9)  # mean
    assert "benchmark" not in g.parameters  # h1 lacks it
    assert g.parameters["hosts"] == 2.0


@pytest.mark.parametrize(("hosts", "rounds"), [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (64, 6)])
def test_broadcast_rounds_of_a_binomial_tree(hosts: int, rounds: int) -> None:
    assert bcast_rounds(hosts) == rounds


def test_prophecy_template_by_hand() -> None:
    t = compile_template(PROPHECY)
    assert set(t.names) == {"ADDM", "N", "P", "L", "latency", "bandwidth", "bcast_rounds"}
    assert t.describe()["functions"] == ["MPISR", "MPIBC"]
    g = system_of("h0,h1,h2x", [H0, H1, HostFigures("h2x", {"ADDM": 3e-9})])
    n, p, size = 400.0, 3.0, 8192.0
    sr = 5e-4 + size / 5e7
    bc = 2 * sr  # three hosts: two rounds
    expected = 3e-9 * n**3 / (p - 1) + 2 * n * sr / (p - 1) + n * bc
    got = evaluate_template(t, {"N": n, "P": p, "L": size}, g)
    assert got == pytest.approx(expected, rel=1e-13)


def test_each_system_gets_its_value_or_a_problem_naming_what_it_lacks() -> None:
    t = compile_template(PROPHECY)
    systems = [system_of("h0", [H0]), system_of("h2", [H2])]
    out = evaluate_on_systems(t, {"N": 100, "P": 4, "L": 1024}, systems)
    assert out[0].value is not None and out[0].problem is None
    assert out[1].value is None
    assert isinstance(out[1].problem, MissingSystemParameter)
    assert out[1].problem.name == "ADDM"
    body = out[1].to_dict()
    assert body["problem"]["status"] == 422 and body["problem"]["name"] == "ADDM"
    assert "PUT /api/v1/resources" in body["problem"]["message"]
    assert out[0].to_dict()["sources"]["latency"] == "measured"


def test_a_missing_measured_figure_says_what_would_supply_it() -> None:
    t = compile_template("MPISR(L)")
    [v] = evaluate_on_systems(t, {"L": 10}, [system_of("x", [HostFigures("x", {})])])
    assert v.problem is not None and v.problem.name == "latency"
    assert "measurements" in v.problem.message


def test_given_parameters_win_over_the_systems_and_unknown_ones_are_refused() -> None:
    t = compile_template("ADDM * N")
    s = system_of("h0", [H0])
    assert evaluate_template(t, {"N": 10, "ADDM": 1.0}, s) == 10.0
    with pytest.raises(ParameterError) as info:
        evaluate_on_systems(t, {"N": 1, "M": 2}, [s])
    assert info.value.name == "M"
    with pytest.raises(ParameterError):
        evaluate_on_systems(t, {"N": math.inf}, [s])


def test_a_division_by_zero_with_a_systems_figures_is_that_systems_problem() -> None:
    t = compile_template("N / (hosts - 1)")
    out = evaluate_on_systems(t, {"N": 5}, [system_of("h0", [H0]), system_of("g", [H0, H1])])
    assert out[0].problem is not None and "division by zero" in out[0].problem.message
    assert out[1].value == 5.0


def test_bad_templates_are_grammar_errors() -> None:
    with pytest.raises(GrammarError) as info:
        compile_template("N * MPISR(L, 2) + MPIBX(L)")
    assert [e.message for e in info.value.errors] == [
        "MPISR() takes 1 argument(s), got 2",
        "unknown function 'MPIBX'; did you mean 'MPIBC'?",
    ]


RULES: dict[str, Literal["min", "max"]] = {"flops_dense": "min", "call_s": "max"}


def test_profile_figures_beat_properties_and_a_group_takes_its_worst_member() -> None:
    fast = HostFigures("f", {"flops_dense": 1.0}, profile={"flops_dense": 4e9, "call_s": 1e-6})
    slow = HostFigures("s", {}, profile={"flops_dense": 1e9, "call_s": 3e-6})
    bare = HostFigures("b", {"flops_dense": 2e9})
    one = system_of("f", [fast], RULES)
    assert one.parameters["flops_dense"] == 4e9 and one.sources["flops_dense"] == "profile"
    g = system_of("f,s", [fast, slow], RULES)
    assert (g.parameters["flops_dense"], g.parameters["call_s"]) == (1e9, 3e-6)
    # a group with a member lacking a profile has none; a property is the fallback
    assert "call_s" not in system_of("f,b", [fast, bare], RULES).parameters
    fallback = system_of("b", [bare], RULES)
    assert fallback.sources["flops_dense"] == "property"
    [v] = evaluate_on_systems(compile_template("call_s * N"), {"N": 2}, [fallback])
    assert v.problem is not None and v.problem.name == "call_s"
    assert "resource b has no machine profile" in v.problem.message
    assert "/api/v1/resources/b/profiles" in v.problem.message
    with pytest.raises(ValueError, match="without a rule: view_s"):
        system_of("x", [HostFigures("x", profile={"view_s": 1e-7})], RULES)
