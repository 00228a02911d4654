"""The convolution of a hand-made signature and profile equals the hand computation; signature
validation refuses negative counts, unknown patterns and unknown parameters; the shipped
signatures read; the `ppe convolve` command prints and refuses as documented."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ppe.convolve_cli import main as convolve_main
from ppe.pmac import (
    Curve,
    CurvePoint,
    Figure,
    MachineProfile,
    SignatureError,
    builtin_signature,
    convolve,
    parse_signature,
    profile_to_json,
)
from ppe.pmac.convolve import combine, fit_overlap
from ppe.pmac.profile import MessageCurve

from .conftest import fig, hand_profile

HAND = """
format = "ppe-pmac-signature"
version = 1
name = "hand"
unit = "cell"
units_per_iteration = "n * n"

[parameters]
n = { doc = "side" }
Size = { default = 8 }

[[memory]]
pattern = "unit"
kind = "read"
count = 2
bytes = "Size"
working_set = "32 * n * Size"   # n = 128: 32 KiB, halfway in log size: 1 / 2.5 ns per byte

[[memory]]
pattern = "stride2"
kind = "read"
count = 1
bytes = 8
working_set = 1024              # 2 GB/s

[[flops]]
kind = "stencil"
count = 10                      # at 1 GFLOP/s

[[overhead]]
kind = "call"
count = "100 / (n * n)"         # 1 us each

[[messages]]
count = 2
bytes = "n * Size"
"""
NS = 1e-9
MEM = 2 * 8 * 2.5 * NS + 8 / 2e9  # 40 ns + 4 ns
FLOP = 10 * NS
OVH = 100 / 128**2 * 1e-6


def test_hand_signature_convolves_to_the_hand_computation() -> None:
    sig, prof = parse_signature(HAND), hand_profile()
    none = convolve(sig, prof, {"n": 128}, overlap="none")
    assert none.memory_seconds == pytest.approx(MEM)
    assert none.flop_seconds == pytest.approx(FLOP)
    assert none.overhead_seconds == pytest.approx(OVH)
    assert none.per_unit.mean() == pytest.approx(MEM + FLOP + OVH)
    assert none.per_iteration.mean() == pytest.approx((MEM + FLOP + OVH) * 128 * 128)
    assert none.notes == ()
    full = convolve(sig, prof, {"n": 128}, overlap="full")
    assert full.per_unit.mean() == pytest.approx(MEM + OVH)
    half = convolve(sig, prof, {"n": 128}, overlap="fraction", fraction=0.5)
    assert half.per_unit.mean() == pytest.approx(MEM + 0.5 * FLOP + OVH)
    assert [t.op_class for t in none.terms] == ["memory", "memory", "flops", "overhead"]
    assert none.terms[0].seconds == pytest.approx(40 * NS)
    assert none.breakdown() == pytest.approx({"memory": MEM, "flops": FLOP, "overhead": OVH})


def test_spread_follows_the_repetitions_and_the_overlap() -> None:
    base = hand_profile()
    spread = tuple(
        Curve(
            c.pattern,
            c.kind,
            1,
            tuple(CurvePoint(p.bytes, fig(p.rate.value, 0.1)) for p in c.points),
        )
        if (c.pattern, c.kind) == ("unit", "read")
        else c
        for c in base.memory
    )
    flops = {"dense": fig(1e10), "stencil": fig(1e9, 0.2)}
    prof = hand_profile(memory=spread, flops=flops)
    sig = parse_signature(HAND)
    # unit read: 40 ns at 10 % (std of 0.9v, v, 1.1v is 0.1v) -> 4 ns; flops 10 ns at 20 % -> 2 ns
    none = convolve(sig, prof, {"n": 128}, overlap="none")
    assert none.per_unit.std() == pytest.approx((4**2 + 2**2) ** 0.5 * NS)
    full = convolve(sig, prof, {"n": 128}, overlap="full")  # flops hidden: their spread too
    assert full.per_unit.std() == pytest.approx(4 * NS)
    assert full.per_iteration.std() == pytest.approx(4 * NS * 128 * 128)


def test_extrapolated_working_set_is_reported_not_clamped_silently() -> None:
    c = convolve(parse_signature(HAND), hand_profile(), {"n": 1 << 16})
    assert c.extrapolated
    assert any("unit: working set" in n and "extrapolated" in n for n in c.notes)


def test_messages_add_per_iteration_when_the_profile_has_them() -> None:
    msgs = (MessageCurve("h1", ((8, fig(1e-5)), (8192, fig(2e-5)))),)
    prof = hand_profile(messages=msgs)
    c = convolve(parse_signature(HAND), prof, {"n": 128}, neighbours=2, overlap="full")
    one = 1e-5 + (1024 - 8) / (8192 - 8) * 1e-5
    assert c.message_seconds_per_iteration == pytest.approx(2 * 2 * one)
    assert c.per_iteration.mean() == pytest.approx((MEM + OVH) * 128**2 + 4 * one)
    bare = convolve(parse_signature(HAND), hand_profile(), {"n": 128}, neighbours=2)
    assert any("no message figures" in n for n in bare.notes)


def test_ranks_per_host_use_the_sharing_curve() -> None:
    base = hand_profile()
    shared = tuple(
        Curve(
            c.pattern,
            c.kind,
            2,
            tuple(CurvePoint(p.bytes, fig(p.rate.value / 2)) for p in c.points),
        )
        for c in base.memory
    )
    prof = hand_profile(memory=base.memory + shared)
    one = convolve(parse_signature(HAND), prof, {"n": 128}, overlap="full")
    two = convolve(parse_signature(HAND), prof, {"n": 128}, overlap="full", ranks_per_host=2)
    assert two.memory_seconds == pytest.approx(2 * one.memory_seconds)
    assert two.notes == ()


def test_combine_and_fit_overlap() -> None:
    assert combine(3.0, 1.0, "none", None) == 4.0
    assert combine(3.0, 1.0, "full", None) == 3.0
    assert combine(1.0, 3.0, "fraction", 0.25) == pytest.approx(3.75)
    with pytest.raises(ValueError, match="fraction in"):
        combine(1.0, 1.0, "fraction", 1.5)
    with pytest.raises(ValueError, match="unknown overlap"):
        combine(1.0, 1.0, "some", None)
    cases = [(m, f, max(m, f) + 0.7 * min(m, f)) for m, f in [(1, 2), (3, 1), (2, 2.5)]]
    assert fit_overlap(cases) == pytest.approx(0.3)
    assert fit_overlap([(1, 1, 10.0)]) == 0.0  # slower than no overlap: clipped to [0, 1]


BAD = [
    ('pattern = "unit"', 'pattern = "diagonal"', "unknown pattern 'diagonal'"),
    ('kind = "read"', 'kind = "write"', "unknown kind 'write'"),
    ("count = 2", "count = -2", "negative"),
    ('working_set = "32 * n * Size"', 'working_set = "32 * m"', "unknown parameter 'm'"),
    ('count = "100 / (n * n)"', 'count = "100 / (n * k)"', "unknown parameter 'k'"),
    ('format = "ppe-pmac-signature"', 'format = "x"', "not a signature"),
    ("version = 1", "version = 9", "version"),
    ('working_set = "32 * n * Size"', 'working_set = "32 * * n"', "working_set"),
    ('kind = "stencil"', 'kind = "vector"', "unknown kind 'vector'"),
    ("count = 2", "cout = 2", "unknown key 'cout'"),
    ("working_set = 1024 ", "working-set = 1024 ", "unknown key 'working-set'"),
    ('unit = "cell"', 'unti = "cell"', "unknown key 'unti'"),
    ("Size = { default = 8 }", 'Size = "eight"', "default must be a number"),
    ("[[flops]]", "[[flop]]", "unknown key 'flop'"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD)
def test_bad_signatures_are_refused(old: str, new: str, message: str) -> None:
    assert old in HAND
    with pytest.raises(SignatureError, match=message):
        parse_signature(HAND.replace(old, new, 1))


def test_a_missing_entry_field_is_named() -> None:
    with pytest.raises(SignatureError, match=r"memory\[1\].working_set is missing"):
        parse_signature(HAND.replace("working_set = 1024 ", "", 1))


def test_a_bare_number_is_a_parameter_default() -> None:
    sig = parse_signature(HAND.replace("Size = { default = 8 }", "Size = 4"))
    assert sig.parameters["Size"] == 4.0
    c = convolve(sig, hand_profile(), {"n": 128}, overlap="full")
    # the working set 32 * n * Size is 16 KiB now: 0.4 of the way in log size from 1 KiB to
    # 1 MiB, so 1 + 0.4 * 3 = 2.2 ns per byte, for 2 reads of 4 bytes
    assert c.terms[0].seconds == pytest.approx(2 * 4 * 2.2 * NS)


def test_values_are_checked_at_convolution_time() -> None:
    sig = parse_signature(HAND.replace("count = 2\n", 'count = "2 - n"\n', 1))
    with pytest.raises(SignatureError, match="must be >= 0"):
        convolve(sig, hand_profile(), {"n": 128})
    with pytest.raises(SignatureError, match="needs a value for 'n'"):
        convolve(parse_signature(HAND), hand_profile(), {})
    with pytest.raises(SignatureError, match="no parameter 'q'"):
        convolve(parse_signature(HAND), hand_profile(), {"n": 1, "q": 2})
    with pytest.raises(SignatureError, match="not TOML"):
        parse_signature("= nope")


@pytest.mark.parametrize("name", ["sor", "jacobi2d"])
def test_shipped_signatures_read_and_convolve(name: str) -> None:
    sig = builtin_signature(name)
    c = convolve(sig, hand_profile(), {"n": 1000, "rows": 500}, overlap="full")
    assert c.per_unit.mean() > 0
    assert c.units_per_iteration == 500_000
    # working sets scale with the rank's rows: 500 rows of a 1000-wide grid are megabytes
    assert all("MB" in t.name for t in c.terms if t.op_class == "memory")


def test_sor_signature_counts_what_the_kernel_does() -> None:
    """Read off ppe/apps/sor/numerics.half_sweep: 5 stride-2 reads (one of them reusing the
    rows another loaded), 1 stride-2 rmw, 7 rmw and 2 reads of the two temporaries, 8 flops
    per element; 32 calls, 20 views per iteration."""
    sig = builtin_signature("sor")
    counts: dict[tuple[str, str], float] = {}
    for m in sig.memory:
        key = (m.pattern, m.kind)
        counts[key] = counts.get(key, 0.0) + m.count.value({}, "c")
    assert counts == {
        ("stride2", "read"): 5,
        ("stride2", "rmw"): 1,
        ("unit", "rmw"): 7,
        ("unit", "read"): 2,
    }
    assert [f.count.value({}, "c") for f in sig.flops] == [8]
    per = {
        o.kind: o.count.value({"n": 10, "rows": 10, "Size": 8}, "c") * 100 for o in sig.overheads
    }
    assert per == pytest.approx({"call": 32, "view": 20})


def _half_sweep_peak(n: int) -> int:
    import tracemalloc

    from ppe.apps.sor.numerics import Problem, half_sweep, initial_strip

    problem = Problem(n)
    u = initial_strip(problem, 0, n)
    half_sweep(u, 0, 0, problem)
    tracemalloc.start()
    try:
        half_sweep(u, 0, 0, problem)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_sor_working_set_holds_the_kernels_temporaries() -> None:
    """The signature's working set is the strip plus what half_sweep allocates at its peak
    (numpy reports its allocations to tracemalloc): two temporaries of a piece, plus numpy's
    fixed iterator buffers (under 256 KiB at any size), so the peak grows with n as the
    formula's temporaries do."""
    sig = builtin_signature("sor")

    def temporaries(n: int) -> float:
        params = {"n": n, "rows": n, "Size": 8}
        largest = max(m.working_set.value(params, "ws") for m in sig.memory)
        return largest - (n + 2) * (n + 2) * 8

    small, large = _half_sweep_peak(400), _half_sweep_peak(800)
    assert 0 <= small - temporaries(400) < 256 * 1024
    assert large - small == pytest.approx(temporaries(800) - temporaries(400), rel=0.05)
    params = {"n": 400, "rows": 400, "Size": 8}
    smallest = min(m.working_set.value(params, "ws") for m in sig.memory)
    assert smallest == 2 * 402 * 8  # `down` reads the rows `up` loaded: two rows


def _profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "host.json"
    path.write_text(profile_to_json(hand_profile()))
    return path


def test_convolve_command_prints_the_breakdown(tmp_path: Path, capsys: Any) -> None:
    sig = tmp_path / "hand.toml"
    sig.write_text(HAND)
    prof = _profile_file(tmp_path)
    assert (
        convolve_main(
            ["--signature", str(sig), "--profile", str(prof), "--n", "128", "--overlap", "none"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"{(MEM + FLOP + OVH) * 1e9:.3f} ns" in out
    assert "read unit @ 0.0328 MB" in out
    assert (
        convolve_main(["--signature", "sor", "--profile", str(prof), "--n", "4000", "--json"]) == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["params"] == {"n": 4000.0, "rows": 4000.0, "Size": 8.0}
    assert d["extrapolated"] is True and d["notes"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--signature", "sor"], "needs a value for 'n'"),
        (["--signature", "nosuch.toml", "--n", "5"], "nosuch.toml"),
        (["--signature", "sor", "--n", "5", "--overlap", "fraction"], "--fraction"),
        (["--signature", "sor", "--n", "5", "--param", "x=1"], "no parameter 'x'"),
    ],
)
def test_convolve_command_refuses_bad_input(
    tmp_path: Path, capsys: Any, argv: list[str], message: str
) -> None:
    assert convolve_main([*argv, "--profile", str(_profile_file(tmp_path))]) == 2
    assert message in capsys.readouterr().err


def test_bad_profile_file_is_refused(tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "bad.json"
    d = json.loads(profile_to_json(hand_profile()))
    d["memory"][0]["points"].reverse()
    bad.write_text(json.dumps(d))
    assert convolve_main(["--signature", "sor", "--n", "5", "--profile", str(bad)]) == 2
    assert "non-monotone" in capsys.readouterr().err


def test_a_figure_needs_positive_samples() -> None:
    with pytest.raises(ValueError):
        MachineProfile(
            **{**hand_profile().__dict__, "flops": {"dense": Figure(1.0, ()), "stencil": fig(1.0)}}
        )
