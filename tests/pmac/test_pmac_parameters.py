"""A profile as named system parameters: the figures they are, names a template can use."""

from __future__ import annotations

import pytest

from ppe.core.grammar import RESERVED
from ppe.empirical.templates import compile_template
from ppe.pmac import (
    KINDS,
    PATTERNS,
    PROFILE_PARAMETERS,
    Curve,
    CurvePoint,
    Figure,
    profile_parameters,
)

from .conftest import curve, fig, hand_profile


def test_a_hand_made_profile_gives_its_figures_by_name() -> None:
    params = profile_parameters(hand_profile())
    assert set(params) == set(PROFILE_PARAMETERS)
    assert len(params) == 4 + 2 * len(KINDS) * len(PATTERNS) == 16
    assert params["flops_dense"] == pytest.approx(1e10, rel=1e-12)
    assert params["flops_stencil"] == pytest.approx(1e9, rel=1e-12)
    assert params["call_s"] == pytest.approx(1e-6, rel=1e-12)
    assert params["view_s"] == pytest.approx(2e-7, rel=1e-12)
    # every curve: 1 GB/s at 1 KiB, 0.25 GB/s at 1 MiB; stride2 read twice that
    assert params["mem_read_unit_smallest"] == pytest.approx(1e9, rel=1e-12)
    assert params["mem_rmw_random_largest"] == pytest.approx(0.25e9, rel=1e-12)
    assert params["mem_read_stride2_smallest"] == pytest.approx(2e9, rel=1e-12)
    assert params["mem_read_stride2_largest"] == pytest.approx(0.5e9, rel=1e-12)


def test_the_ends_of_the_single_copy_curve_and_the_median_of_the_repetitions() -> None:
    base = hand_profile()
    points = curve("unit", "rmw", {1024: 3e9, 1 << 16: 2e9, 1 << 24: 5e8}).points
    skewed = CurvePoint(1 << 30, Figure.of([1e8, 2e8, 6e8], 0.1, "hand"))
    three = Curve("unit", "rmw", 1, (*points, skewed))
    shared = curve("unit", "rmw", {1024: 7e7, 1 << 20: 7e6}, copies=2)  # must not be read
    memory = tuple(c for c in base.memory if (c.pattern, c.kind) != ("unit", "rmw"))
    params = profile_parameters(hand_profile(memory=(*memory, three, shared)))
    assert params["mem_rmw_unit_smallest"] == pytest.approx(3e9, rel=1e-12)
    assert params["mem_rmw_unit_largest"] == pytest.approx(2e8, rel=1e-12)  # median of 1, 2, 6


def test_the_names_are_grammar_builtins_and_free_names_for_templates() -> None:
    for name, p in PROFILE_PARAMETERS.items():
        assert p.name == name and name in RESERVED  # host-indexed in models: flops_dense[p]
        assert compile_template(f"2 * {name}").names == (name,)
        assert p.worst == ("max" if p.unit == "s" else "min"), name
        assert p.doc and p.unit in ("flop/s", "s", "B/s")


def test_an_extra_flop_kind_is_not_a_parameter() -> None:
    params = profile_parameters(
        hand_profile(flops={"dense": fig(1e10), "stencil": fig(1e9), "fma": fig(3e9)})
    )
    assert "flops_fma" not in params and set(params) == set(PROFILE_PARAMETERS)
