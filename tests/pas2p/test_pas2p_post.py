"""`ppe pas2p analyze --post` and the client's phase-signature calls against a real service
(the app served by uvicorn on loopback, as tests/client does)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ppe.cli import main as ppe_main
from ppe.client import AsyncPPEClient, PPEClient, PPERequestError
from ppe.pas2p import logical_trace, read_traces, signature
from ppe.pas2p.report import to_dict
from tests.client.conftest import Service, ThreadServer, make_tokens, service_app
from tests.pas2p.conftest import DATA

FILES = [str(p) for p in sorted(DATA.glob("sor-n800-i100-r10.jsonl.*.gz"))]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    db = f"sqlite:///{tmp_path / 'ppe.db'}"
    tokens = make_tokens(db)
    app = service_app(db)
    server = ThreadServer(app).start()
    try:
        yield Service(server.url, tokens, app)
    finally:
        server.stop()


def token_file(tmp_path: Path, service: Service, role: str) -> str:
    path = tmp_path / f"{role}.token"
    path.write_text(service.tokens[role] + "\n")
    return str(path)


def analyze(*args: str) -> int:
    return ppe_main(["pas2p", "analyze", *FILES, *args])


def test_post_stores_the_analysis(
    tmp_path: Path, service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    operator = ["--server", service.url, "--token-file", token_file(tmp_path, service, "operator")]
    params = ["--param", "n=800", "--param", "iterations=100", "--param", "order=red-black"]
    assert analyze("--post", "sor-n800", "--app", "sor", *params, *operator) == 0
    out = capsys.readouterr().out
    assert "201 segments" in out and out.rstrip().endswith(
        "stored phase signature sor-n800 version 1"
    )

    with PPEClient(service.url, service.tokens["app"]) as c:
        stored = c.phase_signature("sor-n800")
        assert stored["version"] == 1 and stored["app"] == "sor" and stored["ranks"] == 2
        assert stored["parameters"] == {"n": 800, "iterations": 100, "order": "red-black"}
        assert stored["analysis"] == to_dict(signature(logical_trace(read_traces(FILES, "sor"))))

    # the same again (--json on stdout, the version on stderr): nothing new
    assert analyze("--json", "--post", "sor-n800", "--app", "sor", *params, *operator) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["phases"][2]["weight"] == 180
    assert "stored phase signature sor-n800 version 1" in got.err

    # an infinite tolerance goes as null: a new version
    assert analyze("--tolerance", "inf", "--post", "sor-n800", "--app", "sor", *operator) == 0
    assert "version 2" in capsys.readouterr().out
    with PPEClient(service.url, service.tokens["app"]) as c:
        assert c.phase_signature("sor-n800")["analysis"]["tolerance"] is None
        assert c.phase_signature("sor-n800", version=1)["analysis"]["tolerance"] == 0.5
        assert [(s["name"], s["version"]) for s in c.phase_signatures()] == [("sor-n800", 2)]


def test_post_errors(tmp_path: Path, service: Service, capsys: pytest.CaptureFixture[str]) -> None:
    app = ["--server", service.url, "--token-file", token_file(tmp_path, service, "app")]
    assert analyze("--post", "sor-n800", "--app", "sor", *app) == 1  # an app token may not
    assert "posting 'sor-n800'" in capsys.readouterr().err
    assert analyze("--post", "sor-n800") == 2
    assert "--post needs --app" in capsys.readouterr().err
    assert analyze("--app", "sor") == 2
    assert "go with --post" in capsys.readouterr().err
    assert analyze("--post", "x", "--app", "sor", "--param", "n") == 2
    assert "NAME=VALUE" in capsys.readouterr().err
    missing = str(tmp_path / "nope")
    assert analyze("--post", "x", "--app", "sor", "--token-file", missing) == 2
    assert "no such file" in capsys.readouterr().err
    bad_name = ["--post", "9x", "--app", "sor", "--server", service.url]
    operator = ["--token-file", token_file(tmp_path, service, "operator")]
    assert analyze(*bad_name, *operator) == 1
    assert "name:" in capsys.readouterr().err  # the service's own words, naming the field


def test_client_probes_and_the_async_twin(service: Service) -> None:
    analysis = to_dict(signature(logical_trace(read_traces(FILES, "sor"))))
    with PPEClient(service.url, service.tokens["operator"]) as op:
        stored = op.post_phase_signature("sor-n800", "sor", analysis, {"n": 800})
        assert stored["version"] == 1 and stored["kept"] == analysis["signature"]
        op.put_resource("h0", {})
        probe = op.post_phase_probe("sor-n800", "h0", result={"predicted_s": 1.6})
        assert probe["host"] == "h0" and probe["version"] == 1
    with PPEClient(service.url, service.tokens["sensor"]) as sensor:
        sensor.post_phase_probe("sor-n800", "h0", "failed", error="mpiexec: lost rank 1")
        with pytest.raises(PPERequestError) as refused:
            sensor.post_phase_probe("sor-n800", "ghost")
        assert refused.value.status == 422 and refused.value.problems[0]["field"] == "host"

    async def read() -> list[dict[str, object]]:
        async with AsyncPPEClient(service.url, service.tokens["app"]) as c:
            assert (await c.phase_signature("sor-n800"))["parameters"] == {"n": 800}
            return await c.phase_probes("sor-n800", host="h0", limit=5)

    probes = asyncio.run(read())
    assert [p["status"] for p in probes] == ["failed", "ok"]
