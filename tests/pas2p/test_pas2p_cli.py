"""`ppe pas2p analyze` on the shipped ppe-sor trace: table, JSON, the timeline page, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppe.cli import main as ppe_main
from tests.pas2p.conftest import DATA

FILES = [str(p) for p in sorted(DATA.glob("sor-n800-i100-r10.jsonl.*.gz"))]


def test_table_and_timeline_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "timeline.html"
    assert ppe_main(["pas2p", "analyze", *FILES, "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "1234 events, 2 ranks, 201 segments" in out
    assert "traced 1.62383 s, predicted" in out
    first_row = out.splitlines()[2].split()
    assert first_row[2] == "180" and first_row[-1] == "yes"  # the steady half-sweep, heaviest
    text = page.read_text()
    assert "PAS2P phases" in text and "Plotly" in text
    assert "<script src=" not in text.replace(" ", "") and "src='http" not in text
    assert "phase 2 (x180)" in text


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert ppe_main(["pas2p", "analyze", *FILES, "--json", "--keep", "0.6"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["signature"] == [2]  # 66 % of the run: enough for 0.6 alone
    assert report["kept_share"] >= 0.6
    phase = report["phases"][2]
    assert phase["weight"] == 180 and phase["kept"] is True
    assert report["predicted_s"] == pytest.approx(180 * phase["mean_s"])
    assert report["error"] == pytest.approx(report["kept_share"] - 1)


def test_errors_exit_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "t.0"
    bad.write_text('{"rank": 0, "kind": "compute", "start": 1, "end": 2}\nnope\n')
    assert ppe_main(["pas2p", "analyze", str(bad)]) == 2
    assert f"{bad}:2: not JSON" in capsys.readouterr().err
    assert ppe_main(["pas2p", "analyze", *FILES, "--keep", "1.5"]) == 2
    assert "--keep" in capsys.readouterr().err
