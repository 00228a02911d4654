"""The daemon's machine profile: real daemon threads, a real probe process (a tiny probe
configuration), real responders on localhost, and the fake service (or the real service
app) behind an httpx transport. Nothing asserts a speed."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from ppe.pmac import profile_from_dict
from ppe.pmac.profile import FORMAT
from sensors.config import Endpoint
from sensors.daemon import SensorDaemon
from sensors.netprobe import HostLock, Responder, SweepConfig
from sensors.probe_config import MIN_BYTES, ProbeConfig
from sensors.profiler import PROFILE_FORMAT
from tests.sensors.test_sensor_daemon import config

TINY = ProbeConfig(max_bytes=4 * MIN_BYTES, reps=1, min_time=0.001, copies=1, dense_n=16)
SWEEP = SweepConfig(max_bytes=32 << 10, reps=2, busy_for=5.0)


@pytest.fixture
def responders() -> Iterator[list[Responder]]:
    """Two peers' responders on localhost, each with its own host lock."""
    rs = [Responder(n, Endpoint("127.0.0.1", 0), HostLock(), io_timeout=2.0) for n in ("p1", "p2")]
    for r in rs:
        r.start()
    yield rs
    for r in rs:
        r.stop()


def daemon(tmp_path: Path, fake_service, *extra: str, name: str = "h1") -> SensorDaemon:  # type: ignore[no-untyped-def]
    return SensorDaemon(
        config(tmp_path, name, *extra), fake_service.transport(), probe=TINY, sweep=SWEEP
    )


def pending(tmp_path: Path, name: str = "h1") -> list[Path]:
    return sorted((tmp_path / name).glob("profile-pending-*.json"))


def test_the_daemon_profiles_at_start_with_a_message_sweep_per_peer(
    tmp_path: Path, fake_service, responders, poll
) -> None:
    peers = f"named=127.0.0.1:{responders[0].port},127.0.0.1:{responders[1].port}"
    d = daemon(tmp_path, fake_service, "--no-cpu", "--profile-every", "3600", "--peers", peers)
    d.start()
    try:
        assert poll(lambda: fake_service.profiles, timeout=60)
    finally:
        d.stop(flush_timeout=2)
    [body] = fake_service.profiles
    profile = profile_from_dict(body)
    assert profile.host == "h1" and profile.quick
    assert [m.peer for m in profile.messages] == ["named", "p2"]
    for m in profile.messages:
        assert [size for size, _ in m.points] == SWEEP.sizes()
        assert all(len(f.samples) == SWEEP.reps for _, f in m.points)
    assert pending(tmp_path) == []  # acknowledged, so forgotten
    assert d.profiler.stats.measured == 1 and d.profiler.stats.posted == 1
    assert PROFILE_FORMAT == FORMAT


def test_cpu_readings_and_probes_pause_while_the_probe_runs_and_sigusr1_asks_for_one(
    tmp_path: Path, fake_service, responders, poll
) -> None:
    """No CPU reading (nor latency/bandwidth probe) is stamped inside the probe's window:
    the probe's own load would read as the host's. Readings go on before and after it."""
    from sensors.cli import install_signals

    period = 0.2
    d = daemon(
        tmp_path, fake_service, "--period", str(period), "--profile-every", "0",
        "--peers", f"127.0.0.1:{responders[0].port}",
    )  # fmt: skip
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}

    def stamps(metric: str) -> list[float]:
        return [m["timestamp"] for m in fake_service.received() if m["metric"] == metric]

    d.start()
    try:
        assert poll(lambda: len(stamps("cpu")) >= 3 and stamps("latency"), timeout=30)
        assert fake_service.profiles == []  # profile_every 0: none at start
        install_signals(d)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert poll(lambda: fake_service.profiles, timeout=60)
        [(start, end)] = d.quiet.windows
        assert poll(lambda: sum(t > end for t in stamps("cpu")) >= 3, timeout=30)
        assert poll(lambda: any(t > end for t in stamps("latency")), timeout=30)
    finally:
        d.stop(flush_timeout=5)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert end - start > 2 * period  # the window spans readings (else this test shows nothing)
    cpu, latency = stamps("cpu"), stamps("latency")
    assert [t for t in cpu if start <= t <= end] == []
    assert [t for t in latency if start <= t <= end] == []
    assert min(cpu) < start and max(cpu) > end
    assert [m.peer for m in profile_from_dict(fake_service.profiles[0]).messages] == ["p1"]


def test_a_profile_survives_an_outage_and_a_restart_and_goes_first(
    tmp_path: Path, fake_service, poll
) -> None:
    fake_service.set_mode("down")
    d = daemon(tmp_path, fake_service, "--no-cpu", "--profile-every", "3600")
    d.start()
    try:
        assert poll(lambda: pending(tmp_path) and fake_service.profile_posts >= 2, timeout=60)
    finally:
        d.stop(flush_timeout=0)
    [kept] = pending(tmp_path)
    first = json.loads(kept.read_text())
    assert first["host"] == "h1" and fake_service.profiles == []

    fake_service.set_mode("up")
    again = daemon(tmp_path, fake_service, "--no-cpu", "--profile-every", "3600")
    again.start()  # posts the kept profile, then measures its own start profile
    try:
        assert poll(lambda: len(fake_service.profiles) == 2, timeout=60)
    finally:
        again.stop(flush_timeout=2)
    old, new = fake_service.profiles
    assert old["measured_at"] == first["measured_at"] < new["measured_at"]
    assert pending(tmp_path) == []


def test_a_refused_profile_goes_to_the_dead_letter_file_and_is_not_retried(
    tmp_path: Path, fake_service, poll
) -> None:
    fake_service.set_mode("422")
    d = daemon(tmp_path, fake_service, "--no-cpu", "--profile-every", "3600")
    dead = tmp_path / "h1" / "profile-dead-letter.jsonl"
    d.start()
    try:
        assert poll(dead.exists, timeout=60)
        d.request_profile()  # a second profile, to see that the first is not tried again
        assert poll(lambda: d.profiler.stats.rejected == 2, timeout=60)
    finally:
        d.stop(flush_timeout=0)
    lines = [json.loads(line) for line in dead.read_text().splitlines()]
    assert [line["status"] for line in lines] == [422, 422]
    assert all(profile_from_dict(line["profile"]).host == "h1" for line in lines)
    assert fake_service.profile_posts == 2 and pending(tmp_path) == []


def test_429_is_retried_until_the_service_takes_the_profile(
    tmp_path: Path, fake_service, poll
) -> None:
    fake_service.set_mode("429")
    d = daemon(tmp_path, fake_service, "--no-cpu", "--profile-every", "3600")
    d.start()
    try:
        assert poll(lambda: fake_service.profile_posts >= 3, timeout=60)
        fake_service.set_mode("up")
        assert poll(lambda: fake_service.profiles, timeout=30)
    finally:
        d.stop(flush_timeout=0)
    assert d.profiler.stats.rejected == 0 and pending(tmp_path) == []
    assert not (tmp_path / "h1" / "profile-dead-letter.jsonl").exists()


def test_an_unreadable_pending_profile_is_set_aside(tmp_path: Path, fake_service, poll) -> None:
    (tmp_path / "h1").mkdir()
    (tmp_path / "h1" / "profile-pending-000000000000001.json").write_text('{"format": "x"')
    d = daemon(tmp_path, fake_service, "--no-cpu")
    dead = tmp_path / "h1" / "profile-dead-letter.jsonl"
    d.start()
    try:
        assert poll(dead.exists, timeout=30)
    finally:
        d.stop(flush_timeout=0)
    [line] = [json.loads(x) for x in dead.read_text().splitlines()]
    assert line["reason"].startswith("unreadable") and pending(tmp_path) == []
    assert fake_service.profile_posts == 0


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="sharing copies need 2 CPUs")
def test_stopping_ends_a_running_probe_and_its_sharing_copies(
    tmp_path: Path, fake_service, poll
) -> None:
    slow = ProbeConfig(max_bytes=32 << 20, reps=2, min_time=0.02, copies=2, dense_n=64)
    d = SensorDaemon(
        config(tmp_path, "h1", "--no-cpu", "--profile-every", "3600"),
        fake_service.transport(),
        probe=slow,
    )
    me = psutil.Process()
    others = {p.pid for p in me.children(recursive=True)}  # earlier tests' servers, browsers

    def new_children() -> list[psutil.Process]:
        return [p for p in me.children(recursive=True) if p.pid not in others]

    d.start()
    try:
        # the probe process and its two sharing copies (forked by it) are running
        assert poll(lambda: len(new_children()) >= 3, timeout=120)
        probe = new_children()
    finally:
        d.stop(flush_timeout=0)

    def gone(p: psutil.Process) -> bool:
        try:
            return p.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    assert poll(lambda: all(gone(p) for p in probe), timeout=10)  # no orphan goes on
    assert fake_service.profiles == [] and pending(tmp_path) == []


def test_the_service_stores_the_posted_profile(
    tmp_path: Path, db_url: str, responders, poll
) -> None:
    """The real service app (in-process) takes what the daemon posts, messages included."""
    from fastapi.testclient import TestClient

    from ppe.service.app import create_app
    from ppe.service.config import Settings
    from tests.service.conftest import make_tokens

    tokens = make_tokens(db_url)
    with TestClient(create_app(Settings(database_url=db_url))) as client:

        def forward(request: httpx.Request) -> httpx.Response:
            r = client.request(
                request.method, request.url.path, content=request.content,
                headers={k: v for k, v in request.headers.items() if k != "host"},
            )  # fmt: skip
            return httpx.Response(r.status_code, content=r.content, headers=r.headers)

        cfg = config(
            tmp_path, "h1", "--no-cpu", "--profile-every", "3600",
            "--token", tokens["sensor"], "--peers", f"127.0.0.1:{responders[0].port}",
        )  # fmt: skip
        d = SensorDaemon(cfg, httpx.MockTransport(forward), probe=TINY, sweep=SWEEP)
        d.start()
        try:
            assert poll(lambda: d.profiler.stats.posted == 1, timeout=60)
        finally:
            d.stop(flush_timeout=2)
        auth = {"Authorization": f"Bearer {tokens['operator']}"}
        r = client.get("/api/v1/resources/h1/profile", headers=auth)
    assert r.status_code == 200, r.text
    stored = profile_from_dict(r.json()["profile"])
    assert r.json()["version"] == 1 and [m.peer for m in stored.messages] == ["p1"]
    assert stored.message_seconds("p1", 1000) is not None
