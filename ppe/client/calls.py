"""The API's calls as data: what to send and how to read the answer, without any I/O.

The sync and async clients differ only in how they send; each typed method builds a
:class:`Call` here and hands it to its client's transport loop, so the two stay twins.
"""

from __future__ import annotations

import json as jsonlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from ppe import __version__
from ppe.client.errors import PPERequestError
from ppe.client.types import Measurement, RunReport, Schedule

T = TypeVar("T")

URL_ENV = "PPE_URL"
TOKEN_ENV = "PPE_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8000"
API = "/api/v1"


def json_body(response: httpx.Response) -> Any:
    """The answer's JSON (None for an empty answer such as a 204)."""
    return response.json() if response.content else None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the reader of its (2xx) answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    idempotent: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)

    def content(self) -> bytes | None:
        """The body as JSON. NaN and infinities are written as JavaScript literals, not refused
        here: the service refuses them itself, naming the item and field (422), so its checks
        stay the only ones and the caller learns exactly which value was wrong."""
        if self.json is None:
            return None
        return jsonlib.dumps(self.json, separators=(",", ":"), allow_nan=True).encode()

    def all_headers(self) -> dict[str, str]:
        if self.json is None:
            return dict(self.headers)
        return {"Content-Type": "application/json", **self.headers}


def base_url(url: str | None) -> str:
    return (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")


def auth_headers(token: str | None) -> dict[str, str]:
    """Bearer authentication from the argument, else ``$PPE_TOKEN`` (none: anonymous, which
    only ``/healthz`` and ``/metrics`` accept)."""
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    headers = {"User-Agent": f"ppe-client/{__version__}", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token.strip()}"
    return headers


def segment(value: str) -> str:
    """A path segment, escaped (names are restricted by the service, but never trust that)."""
    return quote(str(value), safe="")


def _query(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _as_json(item: Any) -> Any:
    to_json = getattr(item, "to_json", None)
    return to_json() if callable(to_json) else item


# ------------------------------------------------------------------------------ calls


def health() -> Call[dict[str, Any]]:
    return Call("GET", "/healthz", json_body)


def post_measurements(items: Sequence[Measurement | Mapping[str, Any]]) -> Call[dict[str, Any]]:
    """Idempotent: the service keys rows on (resource, metric, peer, timestamp)."""
    body = {"measurements": [_as_json(m) for m in items]}
    return Call("POST", f"{API}/measurements", json_body, json=body)


def forecast(
    resource: str,
    metric: str,
    *,
    horizon_s: float | None,
    at: float | None,
    peer: str | None,
    confidence: float | None,
) -> Call[dict[str, Any]]:
    params = _query(horizon=horizon_s, at=at, peer=peer, confidence=confidence)
    path = f"{API}/forecasts/{segment(resource)}/{segment(metric)}"
    return Call("GET", path, json_body, params=params)


def predict(fields: Mapping[str, Any]) -> Call[dict[str, Any]]:
    """Pure computation; a retry logs one more served prediction, nothing else."""
    return Call("POST", f"{API}/predictions", json_body, json=dict(fields))


def _rows(current: Sequence[tuple[str, int]] | Mapping[str, int]) -> list[dict[str, Any]]:
    pairs = current.items() if isinstance(current, Mapping) else current
    return [{"host": str(host), "rows": int(rows)} for host, rows in pairs]


def schedule(
    *,
    hosts: Sequence[str | Mapping[str, Any]],
    n: int,
    iterations: int,
    app: str,
    strategy: str,
    k: float,
    current: Sequence[tuple[str, int]] | Mapping[str, int] | None,
    replan_every_s: float | None,
    extra: Mapping[str, Any],
) -> Call[Schedule]:
    """A schedule, or a re-plan when ``current`` gives the running rows per host (chain
    order). A retry logs one more served schedule; runs link to the id they received."""
    body: dict[str, Any] = {
        "app": app,
        "n": n,
        "iterations": iterations,
        "hosts": [h if isinstance(h, str) else dict(h) for h in hosts],
        "strategy": strategy,
        "k": k,
        **extra,
    }
    if current is not None:
        body["current"] = _rows(current)
    if replan_every_s is not None:
        body["replan_every_s"] = replan_every_s
    return Call("POST", f"{API}/schedules", _schedule_answer, json=body)


def _schedule_answer(response: httpx.Response) -> Schedule:
    return Schedule.from_json(response.json())


def served_schedule(schedule_id: int) -> Call[dict[str, Any]]:
    return Call("GET", f"{API}/schedules/{int(schedule_id)}", json_body)


def post_runs(runs: Sequence[RunReport | Mapping[str, Any]]) -> Call[dict[str, Any]]:
    """Idempotent: the run store keys runs on their ``key`` (default: a hash of the content)."""
    return Call("POST", f"{API}/runs", json_body, json={"runs": [_as_json(r) for r in runs]})


def runs(filters: Mapping[str, Any]) -> Call[list[dict[str, Any]]]:
    return Call("GET", f"{API}/runs", json_body, params=_query(**filters))


def run(run_id: int) -> Call[dict[str, Any]]:
    return Call("GET", f"{API}/runs/{int(run_id)}", json_body)


def models() -> Call[list[dict[str, Any]]]:
    return Call("GET", f"{API}/models", json_body)


def model(name: str) -> Call[dict[str, Any]]:
    """One model by name, built-in or stored (the service lists them; there is no
    per-name route), or a 404 as the service words it."""

    def pick(response: httpx.Response) -> dict[str, Any]:
        for m in response.json():
            if m.get("name") == name:
                return dict(m)
        reason = f"no model {name!r}"
        raise PPERequestError(404, f"name: {reason}", [{"field": "name", "reason": reason}])

    return Call("GET", f"{API}/models", pick)


def put_model(name: str, text: str, description: str) -> Call[dict[str, Any]]:
    """Store or replace (same owner) a model: idempotent for the same text."""
    body = {"name": name, "text": text, "description": description}
    return Call("POST", f"{API}/models", json_body, json=body)


def resources() -> Call[list[dict[str, Any]]]:
    return Call("GET", f"{API}/resources", json_body)


def resource(name: str) -> Call[dict[str, Any]]:
    return Call("GET", f"{API}/resources/{segment(name)}", json_body)


def put_resource(name: str, properties: Mapping[str, Any]) -> Call[dict[str, Any]]:
    body = {"properties": dict(properties)}
    return Call("PUT", f"{API}/resources/{segment(name)}", json_body, json=body)


def post_phase_signature(
    name: str,
    app: str,
    analysis: Mapping[str, Any],
    parameters: Mapping[str, Any],
    ranks: int | None,
) -> Call[dict[str, Any]]:
    """Idempotent: the newest version's content again stores nothing (the service's 200)."""
    body = {
        "name": name,
        "app": app,
        "parameters": dict(parameters),
        "ranks": analysis.get("ranks") if ranks is None else ranks,
        "analysis": dict(analysis),
    }
    return Call("POST", f"{API}/signatures/phases", json_body, json=body)


def phase_signatures() -> Call[list[dict[str, Any]]]:
    return Call("GET", f"{API}/signatures/phases", json_body)


def phase_signature(name: str, version: int | None) -> Call[dict[str, Any]]:
    params = _query(version=version)
    return Call("GET", f"{API}/signatures/phases/{segment(name)}", json_body, params=params)


def post_phase_probe(
    name: str,
    host: str,
    status: str,
    error: str | None,
    result: Mapping[str, Any] | None,
    version: int | None,
) -> Call[dict[str, Any]]:
    """Not idempotent: every post is one more probe."""
    body: dict[str, Any] = {"host": host, "status": status}
    if error is not None:
        body["error"] = error
    if result is not None:
        body["result"] = dict(result)
    if version is not None:
        body["version"] = version
    path = f"{API}/signatures/phases/{segment(name)}/probes"
    return Call("POST", path, json_body, json=body, idempotent=False)


def phase_probes(
    name: str, host: str | None, version: int | None, limit: int | None
) -> Call[list[dict[str, Any]]]:
    params = _query(host=host, version=version, limit=limit)
    path = f"{API}/signatures/phases/{segment(name)}/probes"
    return Call("GET", path, json_body, params=params)


def raw(
    method: str,
    path: str,
    *,
    json: Any,
    params: Mapping[str, Any] | None,
    idempotent: bool | None,
) -> Call[Any]:
    """Any route; POST and PATCH count as not idempotent unless said otherwise."""
    method = method.upper()
    safe = method not in ("POST", "PATCH") if idempotent is None else idempotent
    path = path if path.startswith("/") else "/" + path
    return Call(method, path, json_body, json=json, params=params, idempotent=safe)
