"""Shared helpers for the sensor tests: an in-process fake of the measurements and the
machine-profile endpoints."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest


@dataclass
class FakeService:
    """POST /api/v1/measurements as the contract describes it, plus switchable failures.

    `mode` is "up" (store, idempotently), "down" (connection refused), "500", or any other
    status code as a string (answered with that code and nothing stored).
    """

    token: str = "sensor-token"
    mode: str = "up"
    stored: dict[tuple[str, str, str, float], float] = field(default_factory=dict)
    posts: list[list[dict]] = field(default_factory=list)  # every batch received, in order
    profiles: list[dict] = field(default_factory=list)  # every profile version stored, in order
    profile_posts: int = 0  # every profile post tried, stored or not
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            if request.url.path.endswith("/profiles"):
                self.profile_posts += 1
            if self.mode == "down":
                raise httpx.ConnectError("connection refused", request=request)
            if request.headers.get("authorization") != f"Bearer {self.token}":
                return httpx.Response(401, json={"detail": "missing or invalid token"})
            if self.mode != "up":
                return httpx.Response(int(self.mode), json={"detail": f"fake {self.mode}"})
            if request.url.path.endswith("/profiles"):
                return self._profile(request)
            assert request.url.path == "/api/v1/measurements"
            items = json.loads(request.content)["measurements"]
            self.posts.append(items)
            inserted = 0
            for m in items:
                key = (m["resource"], m["metric"], m.get("peer") or "", m["timestamp"])
                if key not in self.stored:
                    inserted += 1
                self.stored[key] = m["value"]
            return httpx.Response(
                200,
                json={
                    "accepted": len(items),
                    "inserted": inserted,
                    "duplicates": len(items) - inserted,
                },
            )

    def _profile(self, request: httpx.Request) -> httpx.Response:
        """POST /api/v1/resources/{name}/profiles as ppe/service/api/pmac.py answers it."""
        from ppe.pmac import ProfileError, profile_from_dict, profile_to_dict

        name = request.url.path.split("/")[-2]
        try:
            body = profile_to_dict(profile_from_dict(json.loads(request.content)))
        except ProfileError as exc:
            return httpx.Response(422, json={"detail": str(exc)})
        if body["host"] != name:
            return httpx.Response(422, json={"detail": f"the profile is of {body['host']!r}"})
        mine = [p for p in self.profiles if p["host"] == name]
        if mine and mine[-1] == body:
            return httpx.Response(200, json={"host": name, "version": len(mine)})
        self.profiles.append(body)
        return httpx.Response(201, json={"host": name, "version": len(mine) + 1})

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)

    def set_mode(self, mode: str) -> None:
        with self.lock:
            self.mode = mode

    def received(self) -> list[dict]:
        with self.lock:
            return [m for batch in self.posts for m in batch]


@pytest.fixture
def fake_service() -> FakeService:
    return FakeService()


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll until predicate() is true or the timeout passes (bounded; no wall-clock asserts)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@pytest.fixture
def poll() -> Callable[..., bool]:
    return wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def port_factory() -> Callable[[], int]:
    return free_port
