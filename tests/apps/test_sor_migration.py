"""Migration really moves rows: a rank's core becomes loaded mid-run (three busy processes
pinned to it), and the run that re-plans moves rows off that core and finishes sooner than the
same run that does not.

Two real `mpiexec -n 2 ppe-sor --pin` runs against a real `ppe serve`, one after the other, with
the load starting the same time after each run's first schedule is served, and a real `ppe sensor` on each core (new host
names for each run, so each starts from a history of its own). Real sensors, because this
machine is shared: the core the rows move to is loaded by other work too, which a figure
posted by the test would hide. The comparison is the runs' own reported
totals: the point of re-planning is that number, and the difference expected is about 2x (the
loaded rank gets a quarter of its core), far beyond what other work on the machine moves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import httpx
import pytest

from tests.apps.conftest import RANK_CWD, sor_command, sor_env
from tests.apps.test_sor_sensors import Sensed, server  # noqa: F401 - fixture

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU pinning"),
]
HOGS = 3
LOADED = 1  # the core the hogs load, and the rank pinned to it
LOAD_AFTER_S = 2.0
#: The runs fault their temporaries in every pass (``--no-keep-heap``, as ppe-sor did before
#: ppe/malloc.py): half-sweeps of several ms, long against the time slices the loaded rank
#: gets, so its time is its compute. With the heap kept, a 1000 x 1000 half-sweep takes about
#: 1 ms, and waiting for the loaded rank's slice at every halo exchange dominated both runs.
ATTEMPTS = 4


def spin_on(core: int) -> subprocess.Popen[bytes]:
    """A busy process on ``core``, in a session of its own: with the kernel's autogroup
    scheduling, CPU is shared between sessions first, so hogs started in the test's own session
    would take only its share and the rank would keep half of its core whatever their number."""
    code = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass\n"
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def schedules_served(sensed: Sensed) -> int:
    """The id of the newest schedule the server has served (0 for none)."""
    got = httpx.get(
        f"{sensed.url}/api/v1/schedules",
        params={"limit": 1},
        headers={"Authorization": f"Bearer {sensed.admin}"},
        timeout=10,
    )
    got.raise_for_status()
    return max((int(s["id"]) for s in got.json()), default=0)


class LoadLater:
    """HOGS busy processes on ``core`` from ``delay`` seconds after the run's first schedule
    is served, until the block ends. Timed from the schedule, not from the launch, because
    how long ranks take to start and plan depends on the machine: load that is already
    there when the run plans is planned around, and nothing is left to migrate."""

    def __init__(self, sensed: Sensed, core: int, delay: float) -> None:
        self.sensed, self.core, self.delay = sensed, core, delay
        self.before = schedules_served(sensed)
        self.hogs: list[subprocess.Popen[bytes]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while schedules_served(self.sensed) == self.before:
            if self.stop.wait(0.2):
                return
        if not self.stop.wait(self.delay):
            self.hogs = [spin_on(self.core) for _ in range(HOGS)]

    def __enter__(self) -> LoadLater:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        for hog in self.hogs:
            hog.kill()
            hog.wait(timeout=10)


def run_loaded(sensed: Sensed, hosts: tuple[str, str], replan: bool) -> dict[str, Any]:
    """One run over ``hosts`` with a sensor on each core; the second core is loaded
    LOAD_AFTER_S seconds after the run's first schedule."""
    args = [
        "--server", sensed.url, "--token-file", str(sensed.token_file),
        "--hosts", ",".join(hosts), "--benchmark", "1e-8",
        "--pin", "--n", "1000", "--iterations", "2000", "--strategy", "mean",
        "--check", "1", "--replan" if replan else "--no-replan", "--no-keep-heap",
    ]  # fmt: skip
    with sensed.sensors(hosts), LoadLater(sensed, LOADED, LOAD_AFTER_S):
        done = subprocess.run(
            sor_command(2, *args),
            capture_output=True,
            text=True,
            timeout=600,
            env=sor_env(),
            cwd=RANK_CWD,
        )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    summary = dict(json.loads(lines[-1]))
    if summary.get("schedule_id") is not None:  # the plan the run started from, for a failure
        got = httpx.get(
            f"{sensed.url}/api/v1/schedules/{summary['schedule_id']}",
            headers={"Authorization": f"Bearer {sensed.admin}"},
            timeout=10,
        )
        print(f"schedule {summary['schedule_id']}: {got.text[:1500]}")
    return summary


def fair_start(stays: dict[str, Any], moves: dict[str, Any], tolerance: float = 0.15) -> bool:
    """Whether the two runs are the same run with and without re-planning: the run that stays
    did not plan around the load (the core loaded later got no fewer than an even share,
    within ``tolerance``), and the run that re-plans started with no fewer rows there than it
    (within ``tolerance``), so nothing but re-planning favours it. Other work on this shared
    machine that loads a core when a run plans makes that run start around it, and so do a
    new sensor's few samples (a forecast from less history than the run is widened); such
    attempts are not the comparison. (One outlier among them once gave 0.95 +/- 0.75 and 77
    of 1000 rows, until the forecaster capped a widened spread: forecaster.analog.spread_cap.)
    """
    first, second = stays["initial_rows"][LOADED], moves["initial_rows"][LOADED]
    even = sum(stays["initial_rows"]) / len(stays["initial_rows"])
    return first >= (1 - tolerance) * even and second >= (1 - tolerance) * first


def test_a_run_that_replans_moves_rows_off_a_loaded_core_and_finishes_sooner(
    server: Sensed,  # noqa: F811 - the fixture
) -> None:
    """Every fair attempt must migrate rows off the loaded core; the time it saves is judged
    on the best fair attempt, as timings on a shared machine are (one fair attempt in CI
    once re-planned and finished at 0.868 of the run that stayed, against about 0.5 usually,
    while other work held the core the rows moved to)."""
    pairs, fair = [], []
    for attempt in range(ATTEMPTS):
        stays = run_loaded(server, (f"a{attempt}0", f"a{attempt}1"), replan=False)
        moves = run_loaded(server, (f"b{attempt}0", f"b{attempt}1"), replan=True)
        pairs.append([moves, stays])
        # shown with a failure (pytest prints captured output): how each attempt started
        print(f"attempt {attempt}: initial rows {stays['initial_rows']} (stays), "
              f"{moves['initial_rows']} (moves), totals {stays['total_s']} / "
              f"{moves['total_s']} s")  # fmt: skip
        if not (fair_start(stays, moves) and moves["replans"] > 0):
            continue
        summary = json.dumps([moves, stays])
        assert stays["checksum_ok"] is not False and moves["checksum_ok"] is not False
        assert stays["migrations"] == 0, summary
        assert moves["migrations"] >= 1, summary
        first, last = moves["initial_rows"], moves["rows"]
        assert last[1] < first[1] and last[0] > first[0], summary  # rows left the loaded core
        fair.append(moves["total_s"] / stays["total_s"])
        if fair[-1] < 0.85:
            return
    assert fair, (
        "no attempt started from a fair pair of plans that the loaded run then fell "
        "behind (a core loaded at plan time, or a host whose few CPU samples gave a "
        f"forecast so wide that it got few rows: see each plan printed above): "
        f"{json.dumps(pairs)}"
    )
    pytest.fail(
        f"re-planning never finished under 0.85 of the run that stayed: ratios {fair} in the "
        f"fair attempts; {json.dumps(pairs)}"
    )
