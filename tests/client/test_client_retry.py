"""Retries: 503 (Retry-After honoured), a server that comes up late, and what is never retried."""

from __future__ import annotations

import random
import threading
from typing import Any

import httpx
import pytest

from ppe.client import PPEClient, PPERequestError, PPEServerError, PPEUnavailable, RetryPolicy
from ppe.client.retry import retry_after_s

from .conftest import ThreadServer, free_port, make_tokens, service_app


def test_503_is_retried_after_the_servers_retry_after(flaky_service: Any) -> None:
    service, gate = flaky_service
    with PPEClient(service.url, service.tokens["app"], retries=3, backoff_s=0.0) as c:
        models = c.models()
    assert any(m["name"] == "sor" for m in models)  # the real answer, after two 503s
    assert gate.refused == 2 and len(gate.arrivals) == 3
    gaps = [b - a for a, b in zip(gate.arrivals, gate.arrivals[1:], strict=False)]
    assert min(gaps) >= 0.9  # waited as told (Retry-After: 1), although its own backoff is 0


def test_503_after_the_retries_is_a_server_error(flaky_service: Any) -> None:
    service, gate = flaky_service
    gate.retry_after = None
    with PPEClient(service.url, service.tokens["app"], retries=1, backoff_s=0.01) as c:
        with pytest.raises(PPEServerError) as err:
            c.models()
    assert err.value.status == 503 and "restarting" in str(err.value)
    assert gate.refused == 2


def test_other_5xx_is_a_server_error_at_once(flaky_service: Any) -> None:
    service, gate = flaky_service
    gate.status = 500
    with PPEClient(service.url, service.tokens["app"], retries=4, backoff_s=0.01) as c:
        with pytest.raises(PPEServerError) as err:
            c.models()
    assert err.value.status == 500 and len(gate.arrivals) == 1


def test_4xx_is_never_retried(flaky_service: Any) -> None:
    service, gate = flaky_service
    gate.count = 0
    with PPEClient(service.url, "ppe_app_unknown", retries=4, backoff_s=0.01) as c:
        with pytest.raises(PPERequestError):
            c.models()
    assert len(gate.arrivals) == 1


def test_a_server_that_comes_up_late_is_waited_for(db: str, servers: list[ThreadServer]) -> None:
    tokens = make_tokens(db)
    port = free_port()
    late = ThreadServer(service_app(db), port=port)
    servers.append(late)
    timer = threading.Timer(1.0, late.start)
    timer.start()
    try:
        with PPEClient(f"http://127.0.0.1:{port}", tokens["app"], retries=10, backoff_s=0.1) as c:
            assert any(m["name"] == "sor" for m in c.models())  # refused at first
    finally:
        timer.join()
    assert late.server.started


def test_nobody_listening_is_unavailable_after_the_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with PPEClient(url, "t", retries=2, backoff_s=0.01) as c, pytest.raises(PPEUnavailable) as err:
        c.health()
    assert "3 attempts" in str(err.value) and "ConnectError" in str(err.value)


def test_lost_answers_retry_idempotent_calls_only(dropping_server: Any) -> None:
    with PPEClient(dropping_server.url, "t", retries=2, backoff_s=0.01) as c:
        with pytest.raises(PPEUnavailable):
            c.models()  # GET: tried 3 times
        assert dropping_server.connections == 3
        with pytest.raises(PPEUnavailable) as err:
            c.request("POST", "/api/v1/tokens", json={"role": "app"})  # may have been done
        assert dropping_server.connections == 4
        assert "not idempotent" in str(err.value)
        with pytest.raises(PPEUnavailable):
            c.post_measurements([])  # keyed on the server: safe to send again
        assert dropping_server.connections == 7


def test_backoff_grows_with_jitter_and_a_cap() -> None:
    policy = RetryPolicy(retries=10, backoff_s=0.5, max_delay_s=4.0, rng=random.Random(1))
    for attempt in range(8):
        base = min(4.0, 0.5 * 2**attempt)
        waits = {policy.delay(attempt) for _ in range(20)}
        assert all(base / 2 <= w <= base for w in waits)
        assert len(waits) > 1  # jittered
    assert policy.delay(0, retry_after=3.0) >= 3.0  # the server's wait is a lower bound
    assert policy.delay(0, retry_after=3600.0) == 4.0  # ... capped


def test_retry_after_header_forms() -> None:
    def answer(value: str) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": value})

    assert retry_after_s(answer("7")) == 7.0
    assert retry_after_s(answer("Wed, 21 Oct 2015 07:28:10 GMT"), now=1445412480.0) == 10.0
    assert retry_after_s(answer("soon")) is None
    assert retry_after_s(httpx.Response(503)) is None


def test_policy_refuses_negative_settings() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(retries=-1)
