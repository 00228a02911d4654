"""The daemon in-process against the fake service: threads, batching, outage, shutdown."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from sensors.config import load_config
from sensors.daemon import SensorDaemon
from sensors.measurement import Measurement
from sensors.spool import Spool


def config(tmp_path: Path, name: str, *extra: str):  # type: ignore[no-untyped-def]
    return load_config(
        [
            "--server", "http://ppe.test", "--token", "sensor-token", "--name", name,
            "--period", "0.3", "--batch-delay", "0.3", "--batch-size", "10",
            "--cpu-probe-interval", "1", "--cpu-probe-duration", "0.05",
            "--backoff-initial", "0.05", "--backoff-max", "0.2", "--profile-every", "0",
            "--spool", str(tmp_path / name), "--record", *extra,
        ],
        environ={},
    )  # fmt: skip


def spool_contents(directory: Path) -> tuple[list[Measurement], list[Measurement]]:
    """(pending, journal) as a restarted daemon finds them; the daemon must have stopped."""
    spool = Spool(directory)
    try:
        return [e.measurement for e in spool.peek(spool.pending)], spool.journal()
    finally:
        spool.close()


def keys(ms) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(m["resource"], m["metric"], m.get("peer") or "", m["timestamp"]) for m in ms]


def test_two_daemons_measure_probe_each_other_and_deliver_everything(
    tmp_path: Path, fake_service, port_factory, poll
) -> None:
    pa, pb = port_factory(), port_factory()
    a = SensorDaemon(
        config(tmp_path, "ha", "--listen", f"127.0.0.1:{pa}", "--peers", f"127.0.0.1:{pb}"),
        transport=fake_service.transport(),
    )
    b = SensorDaemon(
        config(tmp_path, "hb", "--listen", f"127.0.0.1:{pb}", "--peers", f"127.0.0.1:{pa}"),
        transport=fake_service.transport(),
    )
    a.start()
    b.start()

    def series() -> set[tuple[str, str, str]]:
        return {k[:3] for k in keys(fake_service.received())}

    wanted = {
        ("ha", "cpu", ""), ("ha", "latency", "hb"), ("ha", "bandwidth", "hb"),
        ("hb", "cpu", ""), ("hb", "latency", "ha"), ("hb", "bandwidth", "ha"),
    }  # fmt: skip
    try:
        assert poll(lambda: wanted <= series(), timeout=30), series()
    finally:
        assert a.stop(flush_timeout=10)
        assert b.stop(flush_timeout=10)
    received = keys(fake_service.received())
    assert max(Counter(received).values()) == 1  # nothing posted twice
    taken = []
    for name in ("ha", "hb"):
        pending, journal = spool_contents(tmp_path / name)
        assert pending == []  # shutdown flushed everything
        taken += [m.key for m in journal]
    assert sorted(taken) == sorted(received)  # every measurement taken arrived, once
    values = {(r, m): v for (r, m, _, _), v in fake_service.stored.items()}
    assert 0.0 <= values[("ha", "cpu")] <= 1.0
    assert values[("ha", "bandwidth")] > 1e5 and 0 < values[("ha", "latency")] < 1


def test_outage_spools_and_a_restarted_daemon_drains_in_order(
    tmp_path: Path, fake_service, poll
) -> None:
    fake_service.set_mode("down")
    d = SensorDaemon(config(tmp_path, "h1"), transport=fake_service.transport())
    d.start()
    assert poll(lambda: d.spool.pending >= 5, timeout=20)
    assert d.stop(flush_timeout=2) is False  # could not flush: kept for the next start
    pending, journal = spool_contents(tmp_path / "h1")
    assert len(pending) == len(journal) >= 5

    fake_service.set_mode("up")
    again = SensorDaemon(config(tmp_path, "h1", "--no-cpu"), transport=fake_service.transport())
    again.start()
    try:
        assert poll(lambda: len(fake_service.received()) >= len(journal), timeout=20)
    finally:
        again.stop(flush_timeout=5)
    got = [m["timestamp"] for m in fake_service.received()]
    assert got == [m.timestamp for m in journal]  # all of it, once, oldest first


def test_rejected_batches_go_to_the_dead_letter_file(tmp_path: Path, fake_service, poll) -> None:
    fake_service.set_mode("403")
    d = SensorDaemon(config(tmp_path, "h1"), transport=fake_service.transport())
    d.start()
    try:
        assert poll(lambda: d.dead_letter.read() != [], timeout=20)
    finally:
        d.stop(flush_timeout=1)
    dead = d.dead_letter.read()
    assert dead[0]["status"] == 403
    assert all(m["metric"] == "cpu" for line in dead for m in line["measurements"])
    assert d.uploader.stats.rejected_batches >= 1


def test_timestamps_stay_increasing_when_the_clock_steps_back(tmp_path: Path, fake_service) -> None:
    from sensors.measurement import Measurement

    d = SensorDaemon(config(tmp_path, "h1", "--no-cpu"), transport=fake_service.transport())
    try:
        d.emit([Measurement("h1", "cpu", 100.0, 0.5)])
        d.emit([Measurement("h1", "cpu", 99.0, 0.6)])  # NTP stepped the clock back
        d.emit([Measurement("h1", "latency", 99.0, 0.001, peer="h2")])  # another series: as is
        stamps = [e.measurement.timestamp for e in d.spool.peek(10)]
    finally:
        d.stop(flush_timeout=0)
    assert stamps[0] == 100.0 and stamps[1] > 100.0 and stamps[2] == 99.0


def test_cli_exit_codes(tmp_path: Path) -> None:
    from sensors.cli import main

    assert main(["--help"]) == 0
    assert main(["--server", "ppe:8000", "--token", "t"]) == 2  # not a URL
    assert main(["--bogus-flag"]) == 2
    held = SensorDaemon(config(tmp_path, "h1", "--no-cpu"))
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:  # a second sensor on the same spool refuses to start
        assert main(["--server", "http://p", "--token", "t", "--spool", str(tmp_path / "h1")]) == 1
    finally:
        held.stop(flush_timeout=0)
        root.handlers[:], root.level = handlers, level  # main() configured logging
