"""Machine profiles: the JSON form round-trips, validation names what is wrong, and rates are
read off the curves by interpolation in log working-set size, extrapolation said aloud."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from ppe.pmac import (
    Figure,
    ProfileError,
    profile_from_dict,
    profile_from_json,
    profile_to_dict,
    profile_to_json,
)

from .conftest import curve, fig, hand_profile


def test_json_round_trip_keeps_every_figure() -> None:
    p = hand_profile()
    back = profile_from_json(profile_to_json(p))
    assert back == p
    d = json.loads(profile_to_json(p))
    assert d["format"] == "ppe-pmac-profile" and d["version"] == 1
    assert d["memory"][0]["points"][0]["samples"] == [1e9, 1e9, 1e9]


def test_interpolation_is_linear_in_log_working_set_on_time_per_byte() -> None:
    p = hand_profile()
    # halfway in log size between 1 KiB and 1 MiB: 32 KiB; time per byte 1 ns and 4 ns -> 2.5
    est = p.memory_rate("unit", "read", 32 * 1024)
    assert est.value == pytest.approx(1 / 2.5e-9)
    assert est.note is None
    assert p.memory_rate("stride2", "read", 1024).value == pytest.approx(2e9)


def test_working_set_beyond_the_profile_is_extrapolated_and_said() -> None:
    p = hand_profile()
    big = p.memory_rate("unit", "rmw", 1 << 30)
    assert big.value == pytest.approx(0.25e9)
    assert big.note and "outside the measured" in big.note and "extrapolated" in big.note
    small = p.memory_rate("unit", "rmw", 64)
    assert small.note and "smallest" in small.note


def test_sharing_curve_is_used_for_its_copies_and_the_rest_is_noted() -> None:
    shared = curve("unit", "read", {1024: 0.5e9, 1 << 20: 0.1e9}, copies=2)
    p = hand_profile(memory=(*hand_profile().memory, shared))
    assert p.memory_rate("unit", "read", 1024, copies=2).value == pytest.approx(0.5e9)
    est = p.memory_rate("unit", "read", 1024, copies=4)
    assert est.value == pytest.approx(0.5e9) and est.note and "4 copies not measured" in est.note
    other = p.memory_rate("unit", "rmw", 1024, copies=2)  # no 2-copy rmw curve: the 1-copy one
    assert other.value == pytest.approx(1e9) and other.note


def test_relative_spread_comes_from_the_repetitions() -> None:
    f = fig(100.0, spread=0.1)
    assert f.rel_sd == pytest.approx(0.1)
    assert Figure.of([5.0]).rel_sd == 0.0


def _dict(**edit: Any) -> dict[str, Any]:
    d = profile_to_dict(hand_profile())
    d.update(edit)
    return d


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["memory"][0]["points"].reverse(), "non-monotone"),
        (lambda d: d["memory"].pop(3), "missing memory curves"),
        (lambda d: d["memory"][0]["points"].pop(), "at least 2 working-set sizes"),
        (lambda d: d["memory"][1]["points"][0].update(value=-1.0), "positive"),
        (lambda d: d["memory"][1]["points"][0].update(samples=[]), "no repetitions"),
        (lambda d: d["memory"][1]["points"][0].update(samples=[1.0, math.nan]), "finite"),
        (lambda d: d["memory"][2].update(pattern="diagonal"), "unknown pattern"),
        (lambda d: d["flops"].pop("stencil"), "missing flop rate 'stencil'"),
        (lambda d: d["overheads"].pop("call"), "missing overhead 'call'"),
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(format="other"), "not a machine profile"),
        (lambda d: d.pop("memory"), "lacks 'memory'"),
        (lambda d: d["memory"].append(dict(d["memory"][0])), "two curves"),
    ],
)
def test_bad_profiles_are_refused_with_a_clear_error(mutate: Any, message: str) -> None:
    d = json.loads(json.dumps(profile_to_dict(hand_profile())))
    mutate(d)
    with pytest.raises(ProfileError, match=message):
        profile_from_dict(d)


def test_not_json_is_a_profile_error() -> None:
    with pytest.raises(ProfileError, match="not JSON"):
        profile_from_json("{nope")
