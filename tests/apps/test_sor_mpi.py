"""ppe-sor under mpiexec, offline: the strips compute what one process computes; bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from ppe.apps.sor.numerics import Problem, checksum, solve_reference
from tests.apps.conftest import RANK_CWD, run_sor, sor_command, sor_env

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("ranks", "n"), [(2, 64), (3, 31)])
def test_offline_run_matches_the_single_process_run(ranks: int, n: int) -> None:
    run = run_sor(ranks, "--offline", "--n", str(n), "--iterations", "40", "--omega", "1.8")
    assert run.code == 0, run.stderr
    s = run.summary
    reference = solve_reference(Problem(n, 1.8), 40)
    assert s["checksum_ok"] is True
    assert s["checksum"] == checksum(reference.grid)
    assert s["residual"] == pytest.approx(reference.residual, rel=1e-9)
    assert s["iterations"] == 40 and len(s["rows"]) == ranks and sum(s["rows"]) == n


def test_tolerance_stops_early_and_still_matches() -> None:
    run = run_sor(2, "--offline", "--n", "32", "--iterations", "5000", "--tolerance", "1e-4")
    assert run.code == 0, run.stderr
    s = run.summary
    assert s["iterations"] < 5000 and s["residual"] < 1e-4
    assert s["checksum"] == checksum(solve_reference(Problem(32), s["iterations"]).grid)


def test_trace_logs_every_rank_s_events(tmp_path: Path) -> None:
    trace = tmp_path / "events.jsonl"
    run = run_sor(2, "--offline", "--n", "16", "--iterations", "3", "--trace", str(trace))
    assert run.code == 0, run.stderr
    for rank, peer in ((0, 1), (1, 0)):
        events = [json.loads(line) for line in Path(f"{trace}.{rank}").read_text().splitlines()]
        kinds = {e["kind"] for e in events}
        assert {"compute", "send", "recv", "collective"} <= kinds
        sends = [e for e in events if e["kind"] == "send"]
        assert all(e["peer"] == peer and e["bytes"] == 18 * 8 for e in sends)
        assert all(e["end"] >= e["start"] and e["rank"] == rank for e in events)
        # 3 iterations x 2 half-sweeps, plus the first exchange: one send per exchange
        assert len(sends) == 7


def test_hosts_that_do_not_match_the_ranks_are_refused() -> None:
    run = run_sor(2, "--offline", "--hosts", "a,b,c", "--n", "16")
    assert run.code == 2
    assert "3 hosts" in run.stderr and "2 ranks" in run.stderr


def test_bad_arguments_are_refused() -> None:
    run = run_sor(2, "--offline", "--omega", "2.5")
    assert run.code == 2 and "--omega" in run.stderr


def test_unreachable_server_is_a_clear_error() -> None:
    run = run_sor(2, "--server", "http://127.0.0.1:9", "--hosts", "a,b", "--n", "16", timeout=60)
    assert run.code == 2
    assert "no schedule from the service" in run.stderr and "--offline" in run.stderr


def rank_process(launcher: psutil.Process, rank: int) -> psutil.Process | None:
    for child in launcher.children(recursive=True):
        try:
            if child.environ().get("PMI_RANK") == str(rank):
                return child
        except psutil.Error:
            continue
    return None


def start_and_kill_rank_1(*args: str) -> tuple[int, str, str]:
    """Start a long run under mpiexec.gforker (it stops the survivors with SIGINT when a rank
    dies; hydra's mpiexec SIGKILLs them, which nothing can report), kill rank 1 mid-run."""
    cmd = sor_command(2, *args, "--iterations", "100000", launcher="mpiexec.gforker")
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=sor_env(),
        cwd=RANK_CWD,
    )
    try:
        launcher = psutil.Process(proc.pid)
        victim = None
        for _ in range(300):  # until rank 1 is well into its iterations
            victim = rank_process(launcher, 1)
            if victim is not None and victim.cpu_times().user > 1.0:
                break
            time.sleep(0.1)
        assert victim is not None
        victim.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


def test_a_dying_rank_stops_the_others_with_a_clear_error() -> None:
    code, out, err = start_and_kill_rank_1("--offline", "--n", "200")
    assert "rank 0: stopped by SIG" in err, (code, out, err)
    assert code != 0
    assert not any(line.startswith("{") for line in out.splitlines())  # no summary: no result
