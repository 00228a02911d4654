"""ppe-pas2p-replay under mpiexec: the ppe-sor fixture's signature replayed on 2 ranks with busy
work and its recorded messages, and the inputs it refuses (exit 2, every rank leaving)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ppe.pas2p import logical_trace, read_traces, signature
from ppe.pas2p.execution import SETUP
from ppe.pas2p.replay_plan import communicators, replay_plan
from tests.apps.conftest import RANK_CWD, SorRun, mpiexec, sor_env
from tests.pas2p.test_pas2p_formats import _write_otf2, _write_otf2_sub

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[1] / "pas2p" / "data"
TRACES = [str(DATA / f"sor-n800-i100-r10.jsonl.{r}.gz") for r in (0, 1)]


def run_replay(ranks: int, *args: str, timeout: float = 120) -> SorRun:
    pytest.importorskip("mpi4py")
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppe.apps.replay_phases", *args]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=sor_env(), cwd=RANK_CWD
    )
    return SorRun(done.returncode, done.stdout, done.stderr)


def test_the_fixture_signature_replays_every_kept_phase_and_predicts_the_run() -> None:
    sig = signature(logical_trace(read_traces(TRACES)), keep=0.9)
    run = run_replay(2, *TRACES, "--keep", "0.9", "--repeats", "2")
    assert run.code == 0, run.stderr
    s = run.summary
    # phases seen once are scaled, not replayed (ppe.pas2p.execution._worth_running)
    once = {p.id for p in sig.phases if p.weight == 1 and p.typical_step != SETUP}
    assert once and sorted(p["id"] for p in s["phases"]) == sorted(set(sig.kept) - once)
    weights = {p.id: p.weight for p in sig.phases}
    for p in s["phases"]:
        assert p["weight"] == weights[p["id"]]
        assert p["runs"] == len(p["times_s"]) == max(1, min(2, p["weight"] // 2))
        assert all(math.isfinite(t) and t >= 0 for t in p["times_s"])
    low, high = s["interval_s"]
    assert math.isfinite(s["predicted_s"]) and s["predicted_s"] > 0
    assert low <= s["predicted_s"] <= high
    assert s["left_out_s"] > 0  # keep 0.9 leaves phases out, added at the kept ones' ratio
    assert s["traced_s"] == pytest.approx(sig.total)
    assert s["rate"]["source"] == "measured here" and s["rate"]["value"] > 0
    assert s["cost_s"] > 0 and s["replays"] >= len(sig.kept)


def test_an_otf2_trace_replays(tmp_path: Path) -> None:
    """The case the replayer is for: a program that cannot run its own steps, traced in OTF2
    (two ranks swap a message each way, then allreduce 8 bytes)."""
    _write_otf2(tmp_path / "arch")
    anchor = str(tmp_path / "arch" / "traces.otf2")
    sig = signature(logical_trace(read_traces([anchor], "otf2")), keep=1.0)
    run = run_replay(2, anchor, "--format", "otf2", "--keep", "1")
    assert run.code == 0, run.stderr
    s = run.summary
    assert sorted(p["id"] for p in s["phases"]) == sorted(sig.kept) == [0, 1, 2]
    assert all(p["runs"] == 1 for p in s["phases"])  # each occurs once: replayed once
    assert s["left_out_s"] == 0
    low, high = s["interval_s"]
    assert math.isfinite(s["predicted_s"]) and low <= s["predicted_s"] <= high


def test_an_otf2_trace_with_a_sub_communicator_replays(tmp_path: Path) -> None:
    """Three ranks; ranks 0 and 2 allreduce on their own communicator while rank 1 computes,
    then all allreduce. Run on the world, the pair's allreduce would wait for rank 1 forever
    (or mix with the world one): the job would time out or fail."""
    _write_otf2_sub(tmp_path / "arch")
    anchor = str(tmp_path / "arch" / "traces.otf2")
    trace = logical_trace(read_traces([anchor], "otf2"))
    sig = signature(trace, keep=1.0)
    plans = replay_plan(sig, trace)
    assert communicators(plans) == [(0, 2)]
    assert any(("collective", 16, (0, 2)) in p.actions[2] for p in plans)
    run = run_replay(3, anchor, "--format", "otf2", "--keep", "1", "--repeats", "2", timeout=60)
    assert run.code == 0, run.stderr
    s = run.summary
    assert sorted(p["id"] for p in s["phases"]) == sorted(sig.kept)
    assert s["left_out_s"] == 0
    low, high = s["interval_s"]
    assert math.isfinite(s["predicted_s"]) and low <= s["predicted_s"] <= high


def test_a_given_rate_is_used_and_calibrate_prints_one() -> None:
    calib = run_replay(1, "--calibrate")
    assert calib.code == 0, calib.stderr
    rate = json.loads(calib.stdout.strip().splitlines()[-1])["rate"]
    assert rate > 0
    run = run_replay(2, *TRACES, "--keep", "0.5", "--repeats", "1", "--rate", str(rate))
    assert run.code == 0, run.stderr
    assert run.summary["rate"] == {
        "value": rate,
        "source": "given",
        "kernel": run.summary["rate"]["kernel"],
    }


@pytest.mark.parametrize(
    ("ranks", "args", "message"),
    [
        (3, TRACES, "the traces hold 2 ranks but this job has 3"),
        (1, TRACES, "the traces hold 2 ranks but this job has 1"),
        (2, [*TRACES, "--format", "nope"], "unknown trace format 'nope'"),
        (2, [TRACES[0]], "rank 0 recv names peer 1, not a rank of 0..0"),
    ],
)
def test_bad_input_exits_2_on_every_rank(ranks: int, args: list[str], message: str) -> None:
    run = run_replay(ranks, *args)
    assert run.code == 2, run.stdout + run.stderr
    assert message in run.stderr
    assert run.stderr.count(message) == 1  # rank 0 says it, once
    assert not run.stdout.strip()


def test_a_malformed_trace_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.0"
    bad.write_text('{"rank": 0, "kind": "compute"}\n')
    run = run_replay(2, str(bad))
    assert run.code == 2
    assert f"{bad}:1: missing" in run.stderr


def test_a_tag_beyond_the_mpi_bound_is_refused(tmp_path: Path) -> None:
    """An OTF2 trace from another MPI may carry tags this one cannot send."""
    tag = 2**62
    lines = {
        0: [
            {"kind": "compute", "start": 0.0, "end": 0.01},
            {"kind": "send", "peer": 1, "bytes": 8, "tag": tag, "start": 0.01, "end": 0.02},
        ],
        1: [{"kind": "recv", "peer": 0, "bytes": 8, "tag": tag, "start": 0.0, "end": 0.02}],
    }
    for r, items in lines.items():
        rows = [{"rank": r, "peer": None, "bytes": 0, "tag": None, **item} for item in items]
        (tmp_path / f"t.{r}").write_text("".join(json.dumps(row) + "\n" for row in rows))
    run = run_replay(2, str(tmp_path / "t.0"), str(tmp_path / "t.1"))
    assert run.code == 2, run.stdout + run.stderr
    assert f"tag {tag} is beyond this MPI's tags" in run.stderr
