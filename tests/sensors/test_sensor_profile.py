"""The profile probe, kept small and fast: its output is a valid profile with every curve,
its curves are monotone where the memory hierarchy makes them so (with room for a loaded
machine: no speed is asserted), sharing adds the 2-copy curves, and `ppe profile` writes a
file the convolution reads. Tolerances are wide on purpose: other work shares the cores."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sensors.profile as probe
from ppe.pmac import KINDS, PATTERNS, profile_from_json
from sensors.profile import MIN_BYTES, ProbeConfig, format_profile, main, measure_profile

SMALL = ProbeConfig(max_bytes=32 << 20, reps=2, min_time=0.002, copies=1, dense_n=64)


@pytest.fixture(scope="module")
def profile() -> Any:
    return measure_profile(SMALL, quick=True, host="test-host")


def test_probe_measures_every_curve_at_every_size(profile: Any) -> None:
    sizes = SMALL.sizes()
    assert sizes[0] == MIN_BYTES and sizes[-1] <= SMALL.max_bytes and len(sizes) == 7
    assert {(c.pattern, c.kind, c.copies) for c in profile.memory} == {
        (p, k, 1) for p in PATTERNS for k in KINDS
    }
    for c in profile.memory:
        assert [pt.bytes for pt in c.points] == sizes
        for pt in c.points:
            assert len(pt.rate.samples) == SMALL.reps and pt.rate.seconds > 0
            assert 0 <= pt.overhead_fraction < 1
    assert set(profile.flops) == {"dense", "stencil"} and set(profile.overheads) == {"call", "view"}
    assert profile.host == "test-host" and profile.quick


def test_overhead_dominates_small_calls_and_vanishes_at_large_ones(profile: Any) -> None:
    """Why the probe subtracts the per-call cost: it is most of a call at 8 KiB."""
    read = next(c for c in profile.memory if (c.pattern, c.kind) == ("unit", "read"))
    assert read.points[0].overhead_fraction > 0.2
    assert read.points[-1].overhead_fraction < 0.1
    assert read.points[0].overhead_fraction > read.points[-1].overhead_fraction


def test_curves_do_not_get_faster_beyond_the_caches(profile: Any) -> None:
    """32 MiB is past the private caches: no curve is faster there than at its best cached
    size (a 50 % allowance absorbs a loaded machine), and random access never beats the
    unit-stride stream by more than that allowance at sizes past 128 KiB."""
    for c in profile.memory:
        best_cached = max(pt.rate.value for pt in c.points if pt.bytes <= 512 << 10)
        assert c.points[-1].rate.value <= 1.5 * best_cached, c.name
    by = {(c.pattern, c.kind): c for c in profile.memory}
    for kind in KINDS:
        for rnd, unit in zip(by[("random", kind)].points, by[("unit", kind)].points, strict=True):
            if rnd.bytes >= 128 << 10:
                assert rnd.rate.value <= 1.5 * unit.rate.value


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="sharing needs 2 CPUs")
def test_sharing_adds_the_two_copy_curves() -> None:
    cfg = ProbeConfig(max_bytes=4 * MIN_BYTES, reps=1, min_time=0.001, copies=2, dense_n=32)
    p = measure_profile(cfg)
    assert p.copies_measured() == (1, 2)
    two = [c for c in p.memory if c.copies == 2]
    assert len(two) == len(PATTERNS) * len(KINDS)
    assert all(len(pt.rate.samples) == 2 for c in two for pt in c.points)  # one per copy


@pytest.mark.parametrize(
    ("copies", "cpus", "counts"),
    [
        (16, 2, (2,)),
        (16, 1, ()),
        (1, 8, ()),
        (16, 8, (2, 4, 8)),
        (16, 12, (2, 4, 8, 12)),
        (16, 64, (2, 4, 8, 16)),
        (4, 3, (2, 3)),
    ],
)
def test_sharing_counts_double_up_to_the_cores(
    copies: int, cpus: int, counts: tuple[int, ...]
) -> None:
    cfg = ProbeConfig(max_bytes=MIN_BYTES, reps=1, min_time=0.001, copies=copies, dense_n=16)
    assert cfg.sharing_counts(cpus) == counts


def test_more_copies_than_two_are_measured_and_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 3 usable CPUs (pretended) a profile holds 2- and 3-copy curves, and the
    convolution reads the 3-copy curve for 3 ranks and the 2-copy one, with a note, for 4."""
    monkeypatch.setattr(probe, "_usable_cpus", lambda: 3)
    cfg = ProbeConfig(max_bytes=4 * MIN_BYTES, reps=1, min_time=0.001, copies=3, dense_n=32)
    p = measure_profile(cfg)
    assert p.copies_measured() == (1, 2, 3)
    curve, note = p.curve("unit", "read", 3)
    assert curve.copies == 3 and note is None
    curve, note = p.curve("unit", "read", 4)
    assert curve.copies == 3 and note is not None and "4 copies not measured" in note


def test_profile_command_writes_a_readable_profile(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "host.json"
    argv = ["--quick", "--max-bytes", str(4 * MIN_BYTES), "--copies", "1", "--out", str(out)]
    assert main(argv) == 0
    p = profile_from_json(out.read_text())
    assert p.quick and p.method.startswith("numpy kernels")
    printed = capsys.readouterr().out
    assert "read unit x1" in printed and "overhead share" in printed
    assert main(["--max-bytes", "100"]) == 2


def test_format_profile_lists_every_curve(profile: Any) -> None:
    text = format_profile(profile)
    assert all(c.name in text for c in profile.memory)


def test_full_profile_sizes_are_finer_where_the_last_cache_ends() -> None:
    full = ProbeConfig.full().sizes()
    assert full[:6] == [MIN_BYTES * 4**k for k in range(6)]  # 8 KiB .. 8 MiB in steps of 4
    assert full[5:] == [8 << 20 << k for k in range(7)]  # then steps of 2 to 512 MiB
    assert ProbeConfig.quick().sizes()[-1] == 128 << 20


def test_profile_command_sweeps_messages_to_the_peers_given(tmp_path: Path, capsys: Any) -> None:
    from sensors.config import Endpoint
    from sensors.netprobe import HostLock, Responder

    r = Responder("peer-a", Endpoint("127.0.0.1", 0), HostLock())
    r.start()
    out = tmp_path / "host.json"
    try:
        argv = ["--quick", "--max-bytes", str(4 * MIN_BYTES), "--copies", "1", "--out", str(out),
                "--host", "h1", "--message-max", "4096",
                "--peers", f"127.0.0.1:{r.port},127.0.0.1:1"]  # fmt: skip
        assert main(argv) == 0
    finally:
        r.stop()
    p = profile_from_json(out.read_text())
    assert [m.peer for m in p.messages] == ["peer-a"]  # the dead one is left out, and said so
    assert [size for size, _ in p.messages[0].points] == [8, 32, 128, 512, 2048, 4096]
    captured = capsys.readouterr()
    assert "messages to peer-a" in captured.out and "127.0.0.1:1" in captured.err
    assert main(["--message-max", "4"]) == 2 and main(["--peers", "h2"]) == 2


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="sharing needs 2 CPUs")
def test_rounds_take_every_figure_once_each_so_samples_span_the_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Repetitions run in rounds (single copy, then sharing, then again), not back to back:
    a figure's samples then come from the whole probe, and its single-copy and sharing
    samples from the same stretch of time."""
    order: list[str] = []
    single, shared = probe.memory_round, probe.sharing_round

    def logged_single(cfg: ProbeConfig, barrier: Any = None) -> Any:
        if barrier is None:  # the parent's sweep (the copies' own sweeps pass a barrier)
            order.append("single")
        return single(cfg, barrier)

    def logged_shared(cfg: ProbeConfig, copies: int) -> Any:
        order.append(f"x{copies}")
        return shared(cfg, copies)

    monkeypatch.setattr(probe, "memory_round", logged_single)
    monkeypatch.setattr(probe, "sharing_round", logged_shared)
    monkeypatch.setattr(probe, "_usable_cpus", lambda: 2)
    cfg = ProbeConfig(max_bytes=4 * MIN_BYTES, reps=3, min_time=0.001, copies=2, dense_n=32)
    p = measure_profile(cfg)
    assert order == ["single", "x2"] * 3
    for c in p.memory:
        assert all(len(pt.rate.samples) == 3 * c.copies for pt in c.points)
        assert all(
            pt.rate.value == sorted(pt.rate.samples)[len(pt.rate.samples) // 2]
            for pt in c.points
            if c.copies == 1
        )
    assert len(p.flops["stencil"].samples) == 3 and len(p.overheads["call"].samples) == 3


@pytest.mark.parametrize("pattern", ["unit", "stride2"])
def test_a_read_is_one_more_operand_of_a_pass_inside_the_working_set(pattern: str) -> None:
    """A read's operand and the pass's accumulator are disjoint views of the one working-set
    array (so the size a figure is filed under is what the caches held), and the kernel adds
    the operand into the accumulator: its baseline is the same pass without it."""
    a = np.zeros(MIN_BYTES // 8)
    kernel = probe._kernel(pattern, "read", a, np.random.default_rng(0))
    v, acc = probe._operand_and_accumulator(pattern, a)
    assert kernel.baseline is not None and kernel.nbytes == 8 * v.size
    assert np.shares_memory(v, a) and np.shares_memory(acc, a)
    assert not np.shares_memory(v, acc) and acc.shape == v.shape
    side = 2 * v.shape[0] if pattern == "stride2" else 1
    spanned = side * side + v.size if pattern == "stride2" else 2 * v.size
    assert spanned >= 0.9 * a.size  # the grid (or operand) and the accumulator fill the set
    v[...] = 2.0
    kernel.run()
    assert np.all(acc == 2.0)
    kernel.baseline()
    assert np.all(acc == 3.0)
    assert probe._kernel(pattern, "rmw", a, np.random.default_rng(0)).baseline is None


def test_a_read_figure_subtracts_the_pass_without_the_operand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rate is the operand's bytes over (pass - its per-call cost) - (baseline - its
    per-call cost): timed calls are faked so the arithmetic is checked by hand."""
    a = np.zeros(MIN_BYTES // 8)
    times = {"tiny": 1e-6, "tiny_base": 0.8e-6, "run": 9e-6, "base": 4.8e-6}
    tiny = probe._kernel("unit", "read", np.ones(16), np.random.default_rng(0))
    big = probe._kernel("unit", "read", a, np.random.default_rng(0))
    names = {
        tiny.run: "tiny",
        tiny.baseline: "tiny_base",
        big.run: "run",
        big.baseline: "base",
    }
    kernels = iter([tiny, big])
    monkeypatch.setattr(probe, "_kernel", lambda *args: next(kernels))
    monkeypatch.setattr(probe, "_per_call", lambda fn, _t: times[names[fn]])
    sample = probe._memory_sample("unit", "read", a, SMALL)
    expected = big.nbytes / ((9e-6 - 1e-6) - (4.8e-6 - 0.8e-6))
    assert sample.value == pytest.approx(expected)
    assert sample.overhead_fraction == pytest.approx(1 / 9)
    assert "one more operand" in sample.method
