"""Contract fuzzing: every operation in /openapi.json, fed its documented examples and
schema-valid and schema-invalid requests with a valid admin token, answers only with the
statuses, media types and bodies it documents, and never with a 5xx (schemathesis).

The budget is fixed (``MAX_EXAMPLES`` per operation and generation mode, derandomized), so a
run is repeatable and takes a minute or two; every failure is collected before the test
fails, so one run lists them all.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ppe.service.app import create_app
from ppe.service.config import Settings

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 40
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
BASE_URL = "http://testserver"
#: Routes being rewritten in other branches (tokens and models: auth; replays: uploads).
#: They are fuzzed and their failures printed, but only the others fail this test.
#: TODO(merge): empty this once those branches are in.
REWRITTEN_ELSEWHERE: set[str] = set()


@dataclass
class Tally:
    cases: int = 0
    failures: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)


@pytest.fixture
def fuzz_client(db_url: str, env_tokens_factory) -> Iterator[tuple[TestClient, str]]:  # type: ignore[no-untyped-def]
    tokens = env_tokens_factory(db_url)
    app = create_app(Settings(database_url=db_url))
    with TestClient(app, base_url=BASE_URL, raise_server_exceptions=False) as client:
        _seed(client, tokens["admin"])
        yield client, tokens["admin"]


def _seed(client: TestClient, token: str) -> None:
    """Hosts h0 and h1 with data and benchmarks (the schemas' examples use them), so that some
    requests get past 'unknown host' into planning."""
    t0 = time.time() - 3600
    items = [
        {"resource": h, "metric": "cpu", "timestamp": t0 + 30 * k, "value": 0.5 + 0.01 * (k % 7)}
        for h in ("h0", "h1")
        for k in range(60)
    ] + [
        {"resource": "h0", "metric": m, "peer": "h1", "timestamp": t0 + 30 * k, "value": v}
        for m, v in (("bandwidth", 1e7), ("latency", 1e-3))
        for k in range(60)
    ]
    auth = {"Authorization": f"Bearer {token}"}
    r = client.post("/api/v1/measurements", json={"measurements": items}, headers=auth)
    assert r.status_code == 200, r.text
    for h in ("h0", "h1"):
        r = client.put(
            f"/api/v1/resources/{h}", json={"properties": {"benchmark": 2e-8}}, headers=auth
        )
        assert r.status_code == 200, r.text


def _send(client: TestClient, kwargs: dict[str, Any]) -> Any:
    """Requests-style transport arguments (what schemathesis prepares) sent through httpx."""
    extra: dict[str, Any] = {}
    if "json" in kwargs:
        extra["json"] = kwargs["json"]
    elif "data" in kwargs:
        data = kwargs["data"]
        extra["content" if isinstance(data, bytes | str) else "data"] = data
    if kwargs.get("files"):
        extra["files"] = kwargs["files"]
    return client.request(
        kwargs["method"],
        kwargs["url"],
        headers=kwargs.get("headers"),
        params=kwargs.get("params"),
        cookies=kwargs.get("cookies") or None,
        **extra,
    )


def _fuzz(client: TestClient, token: str, strategy: Any, label: str, tally: Tally) -> None:
    """Send what ``strategy`` generates and check each answer against the schema."""
    elsewhere = any(label.split(" ", 1)[1].startswith(p) for p in REWRITTEN_ELSEWHERE)

    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        tally.cases += 1
        headers = {"Authorization": f"Bearer {token}"}
        kwargs = case.as_transport_kwargs(base_url=BASE_URL, headers=headers)
        response = _send(client, kwargs)
        tally.statuses[(case.operation.label, response.status_code)] += 1
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (AssertionError, BaseExceptionGroup) as exc:
            found = exc.exceptions if isinstance(exc, BaseExceptionGroup) else (exc,)
            for failure in found:
                title = str(failure).strip().splitlines()[0]
                line = f"{label} {response.status_code} {title}: {response.text[:200]!r}"
                (tally.elsewhere if elsewhere else tally.failures).append(line)
                tally.kinds[title] += 1

    try:
        run()
    except Unsatisfiable:  # nothing to get wrong: no parameters, no body
        pass


def test_every_operation_keeps_its_contract(fuzz_client) -> None:  # type: ignore[no-untyped-def]
    client, token = fuzz_client
    schema = schemathesis.openapi.from_dict(client.get("/openapi.json").json())
    tally = Tally()
    started = time.monotonic()
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the schema has an invalid operation: {result.err()}"
        operation = result.ok()
        examples = schema.get_strategies_from_examples(operation)
        if examples:
            _fuzz(client, token, st.one_of(examples), f"{operation.label} [examples]", tally)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)
            _fuzz(client, token, strategy, f"{operation.label} [{mode}]", tally)
    elapsed = time.monotonic() - started
    print(
        f"\nschemathesis: {tally.cases} cases in {elapsed:.0f} s; {len(tally.failures)} failures, "
        f"{len(tally.elsewhere)} on routes rewritten elsewhere"
    )
    print("\n".join(f"{n:5d} {kind}" for kind, n in tally.kinds.most_common()))
    print("\n".join(f"{n:5d} {op} -> {code}" for (op, code), n in sorted(tally.statuses.items())))
    print("\n".join(sorted(set(tally.elsewhere))))
    unique = sorted(set(tally.failures))
    assert not tally.failures, f"{len(tally.failures)} failures:\n" + "\n".join(unique[:80])
