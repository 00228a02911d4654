from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sensors.measurement import InvalidMeasurement, Measurement
from sensors.spool import DeadLetter, Spool, SpoolLocked


def cpu(t: float, v: float = 0.5, host: str = "h1") -> Measurement:
    return Measurement(host, "cpu", t, v)


def test_fifo_ack_and_counters(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    s.append([cpu(1), cpu(2)])
    s.append([cpu(3)])
    assert s.pending == 3
    first = s.peek(2)
    assert [e.measurement.timestamp for e in first] == [1, 2]
    s.ack(first)
    assert [e.measurement.timestamp for e in s.peek(10)] == [3]
    assert s.pending == 1
    assert s.counters() == {"posted": 2}
    s.close()


def test_survives_reopen_in_order(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    s.append([cpu(t) for t in range(1, 6)])
    s.ack(s.peek(2))
    s.close()
    again = Spool(tmp_path)
    assert again.pending == 3
    assert [e.measurement.timestamp for e in again.peek(10)] == [3, 4, 5]
    again.close()


def test_bound_drops_the_oldest(tmp_path: Path) -> None:
    s = Spool(tmp_path, max_items=4)
    s.append([cpu(t) for t in range(1, 4)])
    assert s.append([cpu(4), cpu(5), cpu(6)]) == 2
    assert [e.measurement.timestamp for e in s.peek(10)] == [3, 4, 5, 6]
    assert s.pending == 4
    assert s.counters()["dropped"] == 2
    s.close()


def test_invalid_measurements_are_never_spooled(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    bad = [
        cpu(1, v=1.5),
        cpu(1, v=float("nan")),
        Measurement("h1", "latency", 1.0, 0.1),  # a link metric without a peer
        Measurement("h1", "bandwidth", 1.0, 5.0, peer="h1"),
        Measurement("h 1", "cpu", 1.0, 0.5),
        Measurement("h1", "disk", 1.0, 0.5),
    ]
    for m in bad:
        with pytest.raises(InvalidMeasurement):
            s.append([cpu(2), m])  # the whole call is refused, good neighbour included
    assert s.pending == 0
    s.close()


def test_journal_records_everything_taken(tmp_path: Path) -> None:
    s = Spool(tmp_path, journal=True)
    s.append([cpu(1), cpu(2)])
    s.ack(s.peek(1))
    assert [m.timestamp for m in s.journal()] == [1, 2]
    s.close()
    again = Spool(tmp_path)  # what the next start finds
    assert [e.measurement.timestamp for e in again.peek(10)] == [2]
    assert [m.timestamp for m in again.journal()] == [1, 2]
    again.close()


def test_one_process_per_spool(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    with pytest.raises(SpoolLocked):
        Spool(tmp_path)
    s.close()
    Spool(tmp_path).close()  # free again once closed


def test_threads_can_append_and_drain_concurrently(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    n = 100
    drained: list[float] = []

    def produce(base: int) -> None:
        for i in range(n):
            s.append([cpu(base + i)])

    producers = [threading.Thread(target=produce, args=(k * 10_000,)) for k in range(2)]
    for t in producers:
        t.start()
    while any(t.is_alive() for t in producers) or s.pending:
        batch = s.peek(17)
        drained += [e.measurement.timestamp for e in batch]
        s.ack(batch)
    assert sorted(drained) == sorted(
        [float(i) for i in range(n)] + [10_000.0 + i for i in range(n)]
    )
    s.close()


WRITER = """
import sys
from pathlib import Path
from sensors.measurement import Measurement
from sensors.spool import Spool
s = Spool(Path(sys.argv[1]), journal=True)
t = 0.0
while True:
    t += 1.0
    s.append([Measurement("h1", "cpu", t, 0.5)])
    if t == 20:
        print("ready", flush=True)
"""


def test_sigkill_mid_write_keeps_every_committed_measurement(tmp_path: Path) -> None:
    """Whatever a killed writer committed is in the spool, intact, with no gaps in order."""
    p = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        time.sleep(0.1)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    s = Spool(tmp_path)  # the dead writer's lock went with it
    stamps = [e.measurement.timestamp for e in s.peek(s.pending)]
    assert len(stamps) >= 20
    assert stamps == [float(i) for i in range(1, len(stamps) + 1)]
    assert [m.timestamp for m in s.journal()] == stamps
    s.close()


def test_dead_letter_lines_are_repostable(tmp_path: Path) -> None:
    d = DeadLetter(tmp_path / "dl.jsonl")
    d.write([cpu(1), Measurement("h1", "latency", 2.0, 0.001, peer="h2")], 422, "bad item 1")
    (line,) = d.read()
    assert line["status"] == 422 and line["reason"] == "bad item 1"
    assert line["measurements"][1] == {
        "resource": "h1",
        "metric": "latency",
        "timestamp": 2.0,
        "value": 0.001,
        "peer": "h2",
    }
    assert json.loads((tmp_path / "dl.jsonl").read_text())["measurements"][0]["metric"] == "cpu"


def test_pending_profiles_are_kept_whole_oldest_first_and_bounded(tmp_path: Path) -> None:
    from sensors.spool import PendingProfiles

    pending = PendingProfiles(tmp_path, max_items=2)
    first = pending.add('{"n": 1}', 1000.0)
    pending.add('{"n": 2}', 1000.0)  # the same millisecond: kept beside the first
    assert [p.read_text() for p in pending.paths()] == ['{"n": 1}', '{"n": 2}']
    pending.add('{"n": 0}', 999.0)  # measured earlier, so it sorts first, and the bound...
    assert [p.read_text() for p in pending.paths()] == ['{"n": 1}', '{"n": 2}']  # ...drops it
    pending.remove(first)
    assert [p.read_text() for p in pending.paths()] == ['{"n": 2}']
    assert not list(tmp_path.glob("*.tmp"))
