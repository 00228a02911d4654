"""ppe-cg under mpiexec: the result is the single-process CG's, the trace's PAS2P phases are the
planted steps, and ``--signature`` runs them alone and predicts the run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ppe.apps.cg.main import CG_WARMUP
from ppe.apps.cg.numerics import Problem, solve_reference
from ppe.apps.cg.steps import Schedule
from ppe.pas2p import logical_trace, read_traces, signature
from ppe.pas2p.execution import SETUP, execution_plan
from ppe.pas2p.report import to_dict
from tests.apps.conftest import RANK_CWD, SorRun, mpiexec, sor_env

pytestmark = pytest.mark.slow

RUN = ("--n", "64", "--iterations", "40", "--check-every", "10", "--checkpoint-every", "20")


def run_cg(ranks: int, *args: str, timeout: float = 180) -> SorRun:
    pytest.importorskip("mpi4py")
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppe.apps.cg", *args]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=sor_env(), cwd=RANK_CWD
    )
    return SorRun(done.returncode, done.stdout, done.stderr)


def test_cg_matches_one_process_its_phases_are_its_steps_and_its_signature_runs(
    tmp_path: Path,
) -> None:
    trace, checkpoints = tmp_path / "t.jsonl", tmp_path / "ckpt"
    run = run_cg(2, *RUN, "--trace", str(trace), "--checkpoint-dir", str(checkpoints))
    assert run.code == 0, run.stderr
    s = run.summary
    assert s["iterations"] == 40 and s["rows"] == [32, 32] and s["checkpoints"] == 2
    assert [i for i, _ in s["checks"]] == [10, 20, 30, 40]
    reference = solve_reference(Problem(64), 40)
    assert s["reference_error"] < 1e-12
    assert s["residual"] == pytest.approx(reference.residual, rel=1e-9)
    assert s["checks"][-1][1] < s["checks"][0][1]
    # the last checkpoint (iteration 40) is the run's x, the ranks' files in rank order
    x = np.concatenate([np.load(checkpoints / f"x.{r}.npy") for r in (0, 1)])
    np.testing.assert_allclose(x, reference.x[1:-1, 1:-1], rtol=1e-11, atol=1e-15)

    # PAS2P finds the planted steps: one phase per step kind, checks and checkpoints apart
    events = read_traces([Path(f"{trace}.0"), Path(f"{trace}.1")])
    sig = signature(logical_trace(events), keep=1.0, tolerance=math.inf)
    schedule = Schedule(40, 10, 20)
    found = sorted(
        (
            "setup" if p.first_step == SETUP else schedule.at(p.first_step).kind,
            p.weight,
            p.first_step,
        )
        for p in sig.phases
    )
    last = schedule.count - 1  # the checkpoint of iteration 40, with the run's closing collectives
    assert found == sorted(
        [
            ("setup", 1, SETUP),
            ("matvec", 40, 0),
            ("update", 40, 1),
            ("check", 4, 20),  # iterations 10, 20, 30, 40
            ("checkpoint", 1, 42),  # iteration 20
            ("checkpoint", 1, last),
        ]
    )
    assert sum(p.weight for p in sig.phases) == 1 + schedule.count

    # --signature runs each phase's first step and predicts the run
    sig_file = tmp_path / "sig.json"
    sig_file.write_text(json.dumps(to_dict(sig)))
    run = run_cg(
        2, *RUN, "--signature", str(sig_file), "--repeats", "2", "--warmup", "1", "--settle", "0"
    )
    assert run.code == 0, run.stderr
    out = run.summary
    # each phase's typical step as often as the plan says (at most twice, within half its
    # share of the run: tests/pas2p/test_pas2p_execution.py), each time right after the step
    # before it (untimed, except before step 0); the checkpoints seen once are scaled, not run
    plan = execution_plan(to_dict(sig), repeats=2, warmup=1)
    runs = {p.id: plan.runs(p) for p in plan.steps}
    assert set(runs) == {p.id for p in sig.phases if p.typical_step != SETUP and p.weight > 1}
    steps = {p.id: p.typical_step for p in sig.phases}
    warm = sum(r > 1 for r in runs.values())  # an untimed first round of those timed twice
    assert out["steps"] == warm + sum(r * (2 if steps[i] > 0 else 1) for i, r in runs.items())
    assert {p["id"] for p in out["phases"]} == {
        p.id for p in sig.phases if p.typical_step == SETUP or p.weight > 1
    }
    for p in out["phases"]:
        assert p["runs"] == (1 if p["step"] == SETUP else runs[p["id"]])
        assert all(t > 0 for t in p["times_s"])
    total = sum(p["weight"] * p["mean_s"] for p in out["phases"])
    assert out["predicted_s"] == pytest.approx(total + out["left_out_s"])
    low, high = out["interval_s"]
    assert math.isfinite(out["predicted_s"]) and low <= out["predicted_s"] <= high
    assert [r["rows"] for r in out["ranks"]] == [32, 32]
    assert all(set(r["compute_s"]) == {"matvec", "update", "check"} for r in out["ranks"])
    # by default ppe-cg warms each timed step up with the CG_WARMUP steps before it (here
    # without the limit on their share of the run)
    run = run_cg(2, *RUN, "--signature", str(sig_file), "--repeats", "2", "--warmup-share", "0")
    assert run.code == 0, run.stderr
    before = {i: min(CG_WARMUP, max(step, 0)) for i, step in steps.items()}
    assert run.summary["steps"] == warm + sum(r * (1 + before[i]) for i, r in runs.items())

    # a small grid converges: the checks stop the run below the tolerance
    run = run_cg(2, "--n", "16", "--iterations", "500", "--check-every", "1", "--tolerance", "1e-8")
    assert run.code == 0, run.stderr
    s = run.summary
    assert s["iterations"] < 500 and s["residual"] < 1e-8 <= s["checks"][-2][1]
    assert s["reference_error"] < 1e-9

    # a signature step the run does not have is refused
    run = run_cg(2, "--n", "64", "--iterations", "5", "--signature", str(sig_file))
    assert run.code == 2 and "steps must be 0.." in run.stderr
