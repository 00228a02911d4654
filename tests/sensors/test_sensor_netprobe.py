from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from sensors.config import Endpoint, Peer
from sensors.netprobe import (
    HELLO,
    HostLock,
    ProbeBusy,
    Prober,
    ProbeResult,
    Responder,
    SweepConfig,
    message_sizes,
    probe,
    sweep_peer,
    sweep_peers,
)


@pytest.fixture
def responder() -> Iterator[Responder]:
    r = Responder("h2", Endpoint("127.0.0.1", 0), HostLock(), io_timeout=2.0)
    r.start()
    yield r
    r.stop()


def test_probe_measures_latency_and_bandwidth(responder: Responder) -> None:
    result = probe(Endpoint("127.0.0.1", responder.port), size=64 * 1024, timeout=5.0)
    assert result.peer == "h2"  # the responder announces its resource name
    assert 0 < result.latency < 1.0
    assert result.latency == pytest.approx(result.rtt / 2)
    assert result.bandwidth > 1e6  # loopback moves far more than 1 MB/s even on a busy box
    assert abs(result.timestamp - time.time()) < 60
    assert responder.served == 1


def test_bigger_transfer_is_accepted(responder: Responder) -> None:
    result = probe(Endpoint("127.0.0.1", responder.port), size=1024 * 1024, timeout=5.0)
    assert result.bandwidth > 1e6


def test_responder_answers_busy_while_this_host_runs_an_experiment() -> None:
    lock = HostLock()
    r = Responder("h2", Endpoint("127.0.0.1", 0), lock, io_timeout=2.0, busy_wait=0.01)
    r.start()
    try:
        assert lock.acquire(1.0)  # e.g. our own outgoing probe or the CPU probe
        try:
            with pytest.raises(ProbeBusy):
                probe(Endpoint("127.0.0.1", r.port), timeout=2.0)
        finally:
            lock.release()
        assert probe(Endpoint("127.0.0.1", r.port), timeout=2.0).peer == "h2"
    finally:
        r.stop()


def _closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_responder_refuses_oversized_transfers_and_survives(responder: Responder) -> None:
    with socket.create_connection(("127.0.0.1", responder.port), timeout=2.0) as s:
        assert s.recv(64).startswith(HELLO)
        s.sendall(b"B" + struct.pack("!I", 2**31))
        assert _closed_by_peer(s)
    with socket.create_connection(("127.0.0.1", responder.port), timeout=2.0) as s:
        assert s.recv(64).startswith(HELLO)
        s.sendall(b"Xjunk")
        assert _closed_by_peer(s)
    assert probe(Endpoint("127.0.0.1", responder.port), timeout=2.0).peer == "h2"


def test_prober_never_overlaps_experiments_and_spreads_them() -> None:
    """Three peers, short period: every experiment holds the host lock; none overlap."""
    responders = [Responder(f"p{i}", Endpoint("127.0.0.1", 0), HostLock()) for i in range(3)]
    for r in responders:
        r.start()
    lock = HostLock()
    stop = threading.Event()
    results: list[tuple[Peer, ProbeResult, float]] = []

    def on_result(peer: Peer, result: ProbeResult) -> None:
        results.append((peer, result, time.monotonic()))
        if len(results) >= 9:
            stop.set()

    peers = tuple(Peer(Endpoint("127.0.0.1", r.port)) for r in responders)
    prober = Prober(peers, lock, period=0.3, on_result=on_result, stop=stop, rng=random.Random(1))
    t = threading.Thread(target=prober.run)
    t.start()
    t.join(timeout=30)
    stop.set()
    for r in responders:
        r.stop()
    assert not t.is_alive()
    assert len(results) >= 9
    assert {res.peer for _, res, _ in results} == {"p0", "p1", "p2"}
    # Each round probes every peer exactly once.
    for k in range(3):
        assert sorted(res.peer for _, res, _ in results[3 * k : 3 * k + 3]) == ["p0", "p1", "p2"]
    # Experiments are sequential: start times strictly increase, never two at once.
    starts = [res.timestamp for _, res, _ in results]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)


def test_two_sensors_probing_each_other_both_get_results() -> None:
    """Like the deployment: each side has a responder and a prober sharing one host lock.

    A collision (both probing at once) makes both responders answer BUSY; the random retry
    inside the slot must resolve it.
    """
    stop = threading.Event()
    got: dict[str, list[ProbeResult]] = {"a": [], "b": []}
    sides = {}
    for name in ("a", "b"):
        lock = HostLock()
        r = Responder(name, Endpoint("127.0.0.1", 0), lock, io_timeout=2.0)
        r.start()
        sides[name] = (lock, r)
    threads = []
    for me, other in (("a", "b"), ("b", "a")):
        lock, _ = sides[me]
        peer = Peer(Endpoint("127.0.0.1", sides[other][1].port))

        def record(p: Peer, res: ProbeResult, me: str = me) -> None:
            got[me].append(res)

        prober = Prober((peer,), lock, period=0.2, stop=stop, on_result=record)
        threads.append(threading.Thread(target=prober.run))
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and min(len(v) for v in got.values()) < 5:
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(timeout=10)
    for _, r in sides.values():
        r.stop()
    assert all(len(v) >= 5 for v in got.values()), {k: len(v) for k, v in got.items()}
    assert {res.peer for res in got["a"]} == {"b"}
    assert {res.peer for res in got["b"]} == {"a"}


def test_unreachable_peer_gives_no_result_and_no_exception(port_factory) -> None:
    stop = threading.Event()
    dead = Peer(Endpoint("127.0.0.1", port_factory()))
    prober = Prober(
        (dead,), HostLock(), period=1.0, on_result=lambda p, r: None, stop=stop, timeout=1.0
    )
    assert prober.experiment(dead, deadline=time.monotonic() + 1.0) is None
    assert dead in prober.down


# -- the message sweep of a machine profile ---------------------------------------------------


def test_message_sizes_are_powers_of_four_from_8_bytes_up_to_the_largest() -> None:
    assert message_sizes(4 << 20) == [8 * 4**k for k in range(10)] + [4 << 20]
    assert message_sizes(512) == [8, 32, 128, 512] and SweepConfig().sizes()[-1] == 4 << 20
    with pytest.raises(ValueError):
        message_sizes(8)


def test_sweep_against_two_responders_gives_a_curve_per_peer_the_profile_reads() -> None:
    """Two real responders on localhost, one named by the prober and one by its greeting;
    the sweeps are curves of a machine profile (format as ppe.pmac reads it)."""
    from ppe.pmac import profile_from_dict, profile_to_dict
    from sensors.profile import MIN_BYTES, ProbeConfig, measure_profile

    responders = [Responder(n, Endpoint("127.0.0.1", 0), HostLock()) for n in ("r1", "r2")]
    for r in responders:
        r.start()
    cfg = SweepConfig(max_bytes=256 << 10, reps=3)
    try:
        peers = (
            Peer(Endpoint("127.0.0.1", responders[0].port), "named"),
            Peer(Endpoint("127.0.0.1", responders[1].port)),
        )
        sweeps = sweep_peers(peers, HostLock(), cfg, threading.Event(), me="h1")
    finally:
        for r in responders:
            r.stop()
    assert [s.peer for s in sweeps] == ["named", "r2"]
    assert [r.served for r in responders] == [1, 1]  # one connection each: one experiment
    for s in sweeps:
        assert [p.size for p in s.points] == cfg.sizes()
        assert all(len(p.samples) == 3 and min(p.samples) > 0 for p in s.points)
    tiny = ProbeConfig(max_bytes=4 * MIN_BYTES, reps=1, min_time=0.001, copies=1, dense_n=16)
    body = profile_to_dict(measure_profile(tiny, host="h1"))
    body["messages"] = [s.to_json() for s in sweeps]
    profile = profile_from_dict(body)
    assert profile_to_dict(profile)["messages"] == body["messages"]
    estimate = profile.message_seconds("named", 100_000)
    assert estimate is not None and estimate.value > 0 and estimate.note is None


def test_sweep_waits_its_turn_at_a_busy_peer_and_gives_up_in_time() -> None:
    peer_lock = HostLock()
    r = Responder("r1", Endpoint("127.0.0.1", 0), peer_lock, busy_wait=0.01)
    r.start()
    peer = Peer(Endpoint("127.0.0.1", r.port))
    cfg = SweepConfig(max_bytes=512, reps=1, busy_for=0.5)
    warnings: list[str] = []
    try:
        assert peer_lock.acquire(1.0)  # the peer runs another experiment throughout
        try:
            with pytest.raises(ProbeBusy):
                sweep_peer(peer, HostLock(), cfg, threading.Event())
            assert sweep_peers((peer,), HostLock(), cfg, threading.Event(), me="h1",
                               warn=warnings.append) == []  # fmt: skip
        finally:
            peer_lock.release()
        assert sweep_peer(peer, HostLock(), cfg, threading.Event()).peer == "r1"
    finally:
        r.stop()
    assert len(warnings) == 1 and "no message sweep" in warnings[0]


def test_a_peer_that_is_this_host_is_left_out_of_the_sweep(responder: Responder) -> None:
    peer = Peer(Endpoint("127.0.0.1", responder.port))  # announces "h2"
    cfg = SweepConfig(max_bytes=512, reps=1)
    assert sweep_peers((peer,), HostLock(), cfg, threading.Event(), me="h2") == []
    assert len(sweep_peers((peer,), HostLock(), cfg, threading.Event(), me="h1")) == 1
