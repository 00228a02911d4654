"""TCP latency and bandwidth probes between sensors, as the Network Weather Service made them.

Each sensor may run a responder; each probes its peers. One experiment on one connection:
the responder greets with its resource name, the prober times a few small echoes (latency is
half the median round trip: one-way, what a message costs in the models) and then the
transfer of `size` bytes up to the responder's one-byte acknowledgement (bandwidth is bytes
over that time; 64 KiB by default, as NWS used).

The message sweep of a machine profile (PingPong over sizes, ``message_sweep``) uses the
same two operations on one connection, so any responder serves it: the one-way time of an
n-byte message is the bulk transfer of n bytes up to the acknowledgement, less the
acknowledgement's own one-way time (half a small echo's round trip, measured just before).

Experiments on one host never overlap, or they would measure each other: a HostLock is held by
the outgoing probe, by the responder while it serves one, and by the active CPU probe. A
responder that is busy answers BUSY and the prober retries a little later, within its slot.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import socket
import statistics
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sensors.config import Endpoint, Peer

log = logging.getLogger("ppe.sensor.net")

HELLO = b"PPE-PROBE/1 "
BUSY = b"PPE-BUSY\n"
OP_PING, OP_BULK, OP_QUIT, ACK = b"P", b"B", b"Q", b"A"
MAX_LINE = 512
CHUNK = 64 * 1024


class ProbeBusy(Exception):
    """The responder is serving another experiment; try again shortly."""


class ProbeError(Exception):
    """The other end does not speak the probe protocol."""


class HostLock:
    """At most one active experiment (network or CPU) on this host at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, timeout: float) -> bool:
        return self._lock.acquire(timeout=max(timeout, 0.0))

    def release(self) -> None:
        self._lock.release()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), CHUNK))
        if not chunk:
            raise ConnectionError("peer closed the connection")
        buf += chunk
    return bytes(buf)


def _drain(sock: socket.socket, n: int) -> None:
    """Read and discard n bytes without keeping them."""
    view = memoryview(bytearray(CHUNK))
    while n > 0:
        got = sock.recv_into(view, min(n, CHUNK))
        if not got:
            raise ConnectionError("peer closed the connection")
        n -= got


def _recv_line(sock: socket.socket) -> bytes:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        if len(buf) >= MAX_LINE:
            raise ProbeError("greeting too long")
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError("peer closed the connection")
        buf += chunk
    return bytes(buf)


class Responder:
    """Serves probes one connection at a time, so incoming experiments never overlap."""

    def __init__(
        self,
        name: str,
        endpoint: Endpoint,
        lock: HostLock,
        io_timeout: float = 5.0,
        max_transfer: int = 64 * 1024 * 1024,
        busy_wait: float = 0.05,
    ) -> None:
        self.name = name
        self.endpoint = endpoint
        self.lock = lock
        self.io_timeout = io_timeout
        self.max_transfer = max_transfer
        self.busy_wait = busy_wait
        self.served = 0
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._sock is not None
        return int(self._sock.getsockname()[1])

    def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.endpoint.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.endpoint.host, self.endpoint.port))
        sock.listen(16)
        sock.settimeout(2.0)  # stop() also shuts the socket down; this is the fallback
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="probe-responder", daemon=True)
        self._thread.start()
        log.info("probe responder %s listening on %s:%d", self.name, self.endpoint.host, self.port)

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)  # wakes accept() at once on Linux
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=self.io_timeout + 1.0)
        if self._sock is not None:
            self._sock.close()

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, addr = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._stop.is_set():
                    log.exception("probe responder accept failed")
                    time.sleep(0.5)
                continue
            with conn:
                try:
                    self._handle(conn)
                except (OSError, ProbeError, struct.error) as e:
                    log.debug("probe from %s ended: %s", addr, e)

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(self.io_timeout)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self.lock.acquire(self.busy_wait):
            conn.sendall(BUSY)
            return
        try:
            conn.sendall(HELLO + self.name.encode() + b"\n")
            self.served += 1
            while not self._stop.is_set():
                op = conn.recv(1)
                if not op or op == OP_QUIT:
                    return
                if op == OP_PING:
                    conn.sendall(OP_PING + _recv_exact(conn, 8))
                elif op == OP_BULK:
                    (n,) = struct.unpack("!I", _recv_exact(conn, 4))
                    if n > self.max_transfer:
                        raise ProbeError(f"transfer of {n} bytes refused")
                    _drain(conn, n)
                    conn.sendall(ACK)
                else:
                    raise ProbeError(f"unknown operation {op!r}")
        finally:
            self.lock.release()


@dataclass(frozen=True)
class ProbeResult:
    peer: str  # the responder's announced resource name
    timestamp: float  # wall clock at the start of the experiment
    rtt: float  # median round trip of a small message, seconds
    latency: float  # one way: rtt / 2
    bandwidth: float  # bytes per second


def _ping(sock: socket.socket) -> float:
    nonce = random.getrandbits(64).to_bytes(8, "big")
    t0 = time.perf_counter()
    sock.sendall(OP_PING + nonce)
    if _recv_exact(sock, 9) != OP_PING + nonce:
        raise ProbeError("bad echo")
    return time.perf_counter() - t0


def _connect(endpoint: Endpoint, timeout: float) -> tuple[socket.socket, str]:
    """A connection past the responder's greeting, and the name it announced."""
    sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
    try:
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        line = _recv_line(sock)
        if line == BUSY:
            raise ProbeBusy(str(endpoint))
        if not line.startswith(HELLO):
            raise ProbeError(f"{endpoint} is not a PPE probe responder")
    except BaseException:
        sock.close()
        raise
    return sock, line[len(HELLO) :].strip().decode(errors="replace")


def probe(
    endpoint: Endpoint, size: int = 64 * 1024, pings: int = 3, timeout: float = 5.0
) -> ProbeResult:
    """One experiment against a responder. The caller holds this host's HostLock."""
    sock, name = _connect(endpoint, timeout)
    with sock:
        timestamp = time.time()
        _ping(sock)  # warm the path; the first echo pays for cold caches
        rtt = statistics.median(_ping(sock) for _ in range(max(pings, 1)))
        payload = bytes(size)
        t0 = time.perf_counter()
        sock.sendall(OP_BULK + struct.pack("!I", size))
        sock.sendall(payload)
        if _recv_exact(sock, 1) != ACK:
            raise ProbeError("bad acknowledgement")
        elapsed = time.perf_counter() - t0
        sock.sendall(OP_QUIT)
    return ProbeResult(name, timestamp, rtt, rtt / 2.0, size / max(elapsed, 1e-9))


def message_sizes(max_bytes: int, min_bytes: int = 8) -> list[int]:
    """``min_bytes`` times powers of 4 up to ``max_bytes``, and ``max_bytes`` itself last."""
    if min_bytes < 1 or max_bytes <= min_bytes:
        raise ValueError(f"message sizes need 1 <= min < max, got {min_bytes}..{max_bytes}")
    out, size = [], min_bytes
    while size < max_bytes:
        out.append(size)
        size *= 4
    return [*out, max_bytes]


@dataclass(frozen=True)
class SweepConfig:
    """The message sweep of a profile: sizes 8 B .. ``max_bytes`` (powers of 4), ``reps``
    timed messages of each; a busy peer is retried for up to ``busy_for`` seconds."""

    max_bytes: int = 4 << 20
    reps: int = 5
    busy_for: float = 30.0

    def sizes(self) -> list[int]:
        return message_sizes(self.max_bytes)


def _one_way(sock: socket.socket, message: bytes) -> float:
    """One-way seconds of ``message`` (a bulk operation): the transfer up to the 1-byte
    acknowledgement less the acknowledgement's own way, half a small echo's round trip; at
    small sizes, where message and acknowledgement are alike, never under half the exchange."""
    rtt = _ping(sock)
    t0 = time.perf_counter()
    sock.sendall(message)
    if _recv_exact(sock, 1) != ACK:
        raise ProbeError("bad acknowledgement")
    exchange = time.perf_counter() - t0
    return max(exchange - rtt / 2.0, exchange / 2.0)


@dataclass(frozen=True)
class MessagePoint:
    size: int
    samples: tuple[float, ...]  # one-way seconds of each timed message
    seconds: float  # wall time this size took to measure
    method: str


@dataclass(frozen=True)
class MessageSweep:
    """One-way times of messages of each size to ``peer``. ``to_json`` is a message curve of
    a machine profile (``ppe.pmac.profile``, format version 1), written here so that the
    daemon need not import numpy and ``ppe.pmac``; a test reads it back with ppe.pmac."""

    peer: str
    points: tuple[MessagePoint, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "peer": self.peer,
            "points": [
                {
                    "bytes": p.size,
                    "value": statistics.fmean(p.samples),
                    "samples": list(p.samples),
                    "seconds": p.seconds,
                    "method": p.method,
                }
                for p in self.points
            ],
        }


def message_sweep(
    endpoint: Endpoint, sizes: list[int], reps: int = 5, timeout: float = 5.0
) -> MessageSweep:
    """One-way time of a message of each size to the responder at ``endpoint`` (PingPong-
    like, over the existing probe operations), named by the name the responder announces.
    The caller holds this host's HostLock."""
    sock, name = _connect(endpoint, timeout)
    points = []
    with sock:
        _one_way(sock, OP_BULK + struct.pack("!I", sizes[0]) + bytes(sizes[0]))  # warm the path
        for size in sizes:
            message = OP_BULK + struct.pack("!I", size) + bytes(size)
            t0 = time.perf_counter()
            samples = tuple(_one_way(sock, message) for _ in range(max(reps, 1)))
            method = f"TCP, {size} B bulk to its 1-byte ack less half a 9 B echo round trip"
            points.append(MessagePoint(size, samples, time.perf_counter() - t0, method))
        sock.sendall(OP_QUIT)
    return MessageSweep(name, tuple(points))


class Prober:
    """Probes each peer once per period, one at a time, at a random point in its own slot.

    The period is cut into one slot per peer (order reshuffled each round); the random offset
    keeps sensors that started together from probing each other in lock-step.
    """

    def __init__(
        self,
        peers: tuple[Peer, ...],
        lock: HostLock,
        period: float,
        on_result: Callable[[Peer, ProbeResult], None],
        stop: threading.Event,
        size: int = 64 * 1024,
        timeout: float = 5.0,
        rng: random.Random | None = None,
    ) -> None:
        self.peers = peers
        self.lock = lock
        self.period = period
        self.on_result = on_result
        self.stop = stop
        self.size = size
        self.timeout = timeout
        self.rng = rng or random.Random()
        self.down: set[Peer] = set()
        self.busy_skips = 0

    def run(self) -> None:
        next_round = time.monotonic()
        while not self.stop.is_set():
            order = list(self.peers)
            self.rng.shuffle(order)
            slot = self.period / len(order)
            for j, peer in enumerate(order):
                start = next_round + (j + self.rng.uniform(0.0, 0.5)) * slot
                if self.stop.wait(max(start - time.monotonic(), 0.0)):
                    return
                result = self.experiment(peer, deadline=next_round + (j + 1) * slot)
                if result is not None:
                    self.on_result(peer, result)
            next_round += self.period
            if self.stop.wait(max(next_round - time.monotonic(), 0.0)):
                return
            next_round = max(next_round, time.monotonic() - self.period / 2)  # never burst

    def experiment(self, peer: Peer, deadline: float) -> ProbeResult | None:
        """Run one experiment, retrying while the peer or this host is busy until `deadline`."""
        while not self.stop.is_set():
            if self.lock.acquire(min(0.5, deadline - time.monotonic())):
                try:
                    result = probe(peer.endpoint, self.size, timeout=self.timeout)
                    self._mark(peer, up=True)
                    return result
                except ProbeBusy:
                    pass
                except (OSError, ProbeError) as e:
                    self._mark(peer, up=False, why=str(e) or type(e).__name__)
                    return None
                finally:
                    self.lock.release()
            pause = self.rng.uniform(0.02, 0.25) * min(self.period, 1.0)
            if time.monotonic() + pause >= deadline:
                break
            self.stop.wait(pause)
        self.busy_skips += 1
        log.debug("probe of %s skipped this round: busy", peer)
        return None

    def _mark(self, peer: Peer, up: bool, why: str = "") -> None:
        """Log a peer going down or coming back once, not every period."""
        if up and peer in self.down:
            self.down.discard(peer)
            log.info("probe peer %s answers again", peer)
        elif not up and peer not in self.down:
            self.down.add(peer)
            log.warning("probe peer %s unreachable (%s); will keep trying quietly", peer, why)


def sweep_peer(
    peer: Peer,
    lock: HostLock,
    cfg: SweepConfig,
    stop: threading.Event,
    timeout: float = 5.0,
    rng: random.Random | None = None,
) -> MessageSweep:
    """The message sweep to ``peer`` as one experiment (this host's lock held, retried while
    either end is busy for up to ``cfg.busy_for`` s), named as the prober names the peer.
    Raises ProbeBusy when it never got a turn, OSError or ProbeError when the peer fails."""
    rng = rng or random.Random()
    deadline = time.monotonic() + cfg.busy_for
    while not stop.is_set():
        if lock.acquire(min(0.5, deadline - time.monotonic())):
            try:
                curve = message_sweep(peer.endpoint, cfg.sizes(), cfg.reps, timeout)
                return dataclasses.replace(curve, peer=peer.name or curve.peer)
            except ProbeBusy:
                pass
            finally:
                lock.release()
        if time.monotonic() >= deadline:
            break
        stop.wait(rng.uniform(0.05, 0.5))
    raise ProbeBusy(f"{peer}: no turn for the message sweep within {cfg.busy_for:g} s")


def sweep_peers(
    peers: tuple[Peer, ...],
    lock: HostLock,
    cfg: SweepConfig,
    stop: threading.Event,
    *,
    me: str,
    timeout: float = 5.0,
    warn: Callable[[str], None] = log.warning,
) -> list[MessageSweep]:
    """A sweep to each peer that answers, in order; one that does not is reported through
    ``warn`` and left out, and a peer that turns out to be this host (``me``) is skipped."""
    out = []
    for peer in peers:
        if stop.is_set():
            break
        try:
            sweep = sweep_peer(peer, lock, cfg, stop, timeout)
        except (OSError, ProbeError, ProbeBusy) as exc:
            warn(f"no message sweep to {peer}: {exc or type(exc).__name__}")
            continue
        if sweep.peer != me:
            out.append(sweep)
    return out
