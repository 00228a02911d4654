"""docs/client.md runs as written: its ```python blocks, in order, in one namespace, against a
new server (with the demo traces, as `make run` serves them) and the tour's tokens."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import ThreadServer, make_tokens, service_app

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "client.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_python_tour_runs(
    db: str,
    servers: list[ThreadServer],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tokens = make_tokens(db)
    server = ThreadServer(service_app(db, trace_dirs=(str(ROOT / "examples" / "traces"),)))
    servers.append(server.start())
    monkeypatch.setenv("PPE_URL", server.url)
    monkeypatch.delenv("PPE_TOKEN", raising=False)
    for name, role in (("ADMIN", "admin"), ("SENSOR", "sensor"), ("APP", "app")):
        monkeypatch.setenv(name, tokens[role])
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 6
    namespace: dict[str, Any] = {"__name__": "tour"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # the doc's own code
    out = capsys.readouterr().out
    assert "{'accepted': 18, 'inserted': 18, 'duplicates': 0}" in out
    assert "422 1 value" in out and "404" in out and "nowhere" in out
    assert namespace["stored"]["stored"] == 1
    assert "{'mean': " in out and "'expected': " in out  # the async block's comparison
