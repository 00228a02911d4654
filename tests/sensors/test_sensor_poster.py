from __future__ import annotations

import random
import threading
from pathlib import Path

import httpx
import pytest

from sensors.measurement import Measurement
from sensors.poster import (
    Backoff,
    MeasurementPoster,
    Outcome,
    Uploader,
    classify,
)
from sensors.spool import DeadLetter, Spool


def cpu(t: float) -> Measurement:
    return Measurement("h1", "cpu", t, 0.5)


@pytest.mark.parametrize(
    "status, outcome",
    [
        (200, Outcome.STORED),
        (201, Outcome.STORED),
        (500, Outcome.RETRY),
        (503, Outcome.RETRY),
        (429, Outcome.RETRY),
        (408, Outcome.RETRY),
        (400, Outcome.REJECTED),
        (401, Outcome.REJECTED),
        (403, Outcome.REJECTED),
        (422, Outcome.REJECTED),
        (404, Outcome.REJECTED),
    ],
)
def test_classify(status: int, outcome: Outcome) -> None:
    assert classify(status) is outcome


def test_poster_sends_the_contract_body_and_token(fake_service) -> None:
    poster = MeasurementPoster("http://ppe", "sensor-token", transport=fake_service.transport())
    ms = [cpu(1.25), Measurement("h1", "bandwidth", 2.5, 1e8, peer="h2")]
    result = poster.post(ms)
    assert result.outcome is Outcome.STORED and result.inserted == 2
    assert fake_service.posts == [
        [
            {"resource": "h1", "metric": "cpu", "timestamp": 1.25, "value": 0.5},
            {"resource": "h1", "metric": "bandwidth", "timestamp": 2.5, "value": 1e8, "peer": "h2"},
        ]
    ]
    assert poster.post(ms).inserted == 0  # the fake is idempotent like the service


def test_poster_maps_failures(fake_service) -> None:
    poster = MeasurementPoster("http://ppe", "sensor-token", transport=fake_service.transport())
    fake_service.set_mode("down")
    assert poster.post([cpu(1)]).outcome is Outcome.RETRY
    fake_service.set_mode("503")
    assert poster.post([cpu(1)]).outcome is Outcome.RETRY
    fake_service.set_mode("422")
    r = poster.post([cpu(1)])
    assert r.outcome is Outcome.REJECTED and r.status == 422 and "fake 422" in r.detail
    fake_service.set_mode("up")
    wrong = MeasurementPoster("http://ppe", "nope", transport=fake_service.transport())
    assert wrong.post([cpu(1)]).status == 401


def test_retry_after_is_read() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": "7"})

    poster = MeasurementPoster("http://ppe", "t", transport=httpx.MockTransport(handler))
    r = poster.post([cpu(1)])
    assert (r.outcome, r.retry_after) == (Outcome.RETRY, 7.0)


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    b = Backoff(initial=1.0, maximum=30.0, rng=random.Random(3))
    delays = [b.next() for _ in range(10)]
    for k, d in enumerate(delays):
        cap = min(30.0, 2.0**k)
        assert cap / 2 <= d <= cap
    assert len({round(d, 6) for d in delays[5:]}) > 1  # jittered, not constant at the cap
    b.reset()
    assert b.next() <= 1.0


def make_uploader(tmp_path: Path, fake, batch_size: int = 5, batch_delay: float = 60.0):
    spool = Spool(tmp_path / "spool")
    poster = MeasurementPoster("http://ppe", "sensor-token", transport=fake.transport())
    up = Uploader(
        spool,
        poster,
        DeadLetter(tmp_path / "dead.jsonl"),
        threading.Event(),
        batch_size=batch_size,
        batch_delay=batch_delay,
        backoff=Backoff(0.01, 0.05),
    )
    return spool, up


def test_batching_by_count_and_by_age(tmp_path: Path, fake_service) -> None:
    spool, up = make_uploader(tmp_path, fake_service, batch_size=3, batch_delay=60.0)
    spool.append([cpu(1), cpu(2)])
    assert up.due_in() > 50  # two pending, young: wait
    spool.append([cpu(3)])
    assert up.due_in() == 0  # count reached
    up.send_one()
    spool.append([cpu(4)])
    up.batch_delay = 0.0
    assert up.due_in() == 0  # old enough
    up.send_one()
    assert [len(b) for b in fake_service.posts] == [3, 1]
    assert spool.pending == 0
    spool.close()


def test_outage_then_recovery_delivers_everything_once_in_order(
    tmp_path: Path, fake_service
) -> None:
    spool, up = make_uploader(tmp_path, fake_service, batch_size=4, batch_delay=0.0)
    t = threading.Thread(target=up.run)
    fake_service.set_mode("down")
    t.start()
    for i in range(1, 11):
        spool.append([cpu(float(i))])
        up.notify()
    fake_service.set_mode("500")
    for i in range(11, 21):
        spool.append([cpu(float(i))])
    fake_service.set_mode("up")
    for i in range(21, 31):
        spool.append([cpu(float(i))])
        up.notify()
    deadline = 200
    while spool.pending and deadline:
        threading.Event().wait(0.05)
        deadline -= 1
    up.stop.set()
    up.notify()
    t.join(10)
    stamps = [m["timestamp"] for m in fake_service.received()]
    assert stamps == [float(i) for i in range(1, 31)]  # in order, none twice, none missing
    assert up.stats.failures >= 1
    spool.close()


def test_rejection_goes_to_dead_letter_and_is_not_retried(
    tmp_path: Path, fake_service, caplog
) -> None:
    spool, up = make_uploader(tmp_path, fake_service, batch_size=2)
    spool.append([cpu(1), cpu(2), cpu(3)])
    fake_service.set_mode("422")
    with caplog.at_level("ERROR"):
        assert up.send_one().outcome is Outcome.REJECTED
    assert "REJECTED" in caplog.text and "422" in caplog.text
    assert spool.pending == 1  # the refused batch left the spool...
    (dead,) = up.dead_letter.read()
    assert [m["timestamp"] for m in dead["measurements"]] == [1.0, 2.0]  # ...for the file
    fake_service.set_mode("up")
    up.send_one()
    assert [m["timestamp"] for m in fake_service.received()] == [3.0]
    assert spool.counters() == {"dead_lettered": 2, "posted": 1}
    spool.close()


def test_flush_posts_everything_or_keeps_it(tmp_path: Path, fake_service) -> None:
    spool, up = make_uploader(tmp_path, fake_service, batch_size=2)
    spool.append([cpu(float(i)) for i in range(1, 6)])
    fake_service.set_mode("down")
    assert up.flush(timeout=5) is False
    assert spool.pending == 5
    fake_service.set_mode("up")
    assert up.flush(timeout=5) is True
    assert len(fake_service.received()) == 5
    spool.close()
