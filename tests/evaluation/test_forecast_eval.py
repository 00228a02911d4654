"""`ppe forecast-eval`: report shape, text table, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppe.evaluation.forecast_eval import main


def write_csv(path: Path, n: int, seed: int, header: bool = True) -> Path:
    rng = np.random.default_rng(seed)
    x = np.clip(0.7 + np.cumsum(rng.normal(0, 0.01, n)), 0.01, 1)
    lines = (["timestamp,value"] if header else []) + [f"{300 * i},{v}" for i, v in enumerate(x)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_json_report_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], traces_dir: Path
) -> None:
    a = write_csv(tmp_path / "a.csv", 500, 1)
    short = write_csv(tmp_path / "short.csv", 100, 2, header=False)
    out = tmp_path / "report.json"
    argv = [
        str(a),
        str(short),
        str(traces_dir / "195.csv.gz"),
        "--json",
        "--out",
        str(out),
        "--baselines",
        "ses,ar2",
        "--baseline-refit",
        "96",
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == report
    overall = report["overall"]
    assert set(overall["adaptive"]) == {"mae", "rmse", "coverage95"}
    assert set(overall["baselines"]) == {"ses", "ar2"}
    assert overall["best_member"]["name"] in overall["members"]
    assert overall["best_member"]["mae"] == min(m["mae"] for m in overall["members"].values())
    assert 0.0 <= overall["multimode_share"] <= 1.0
    assert overall["series"] == 2 and overall["skipped"] == 1
    series = {Path(s["file"]).name: s for s in report["series"]}
    assert "skipped" in series["short.csv"]
    bimodal = series["195.csv.gz"]
    assert {"file", "mae", "rmse", "coverage95", "multimode"} <= set(bimodal)
    assert bimodal["dead_dropped"] > 10000 and bimodal["multimode"] is True
    assert overall["samples"] == sum(s["evaluated"] for s in report["series"] if "evaluated" in s)
    pooled = (
        series["a.csv"]["mae"] * series["a.csv"]["evaluated"]
        + bimodal["mae"] * bimodal["evaluated"]
    ) / overall["samples"]
    assert overall["adaptive"]["mae"] == pytest.approx(pooled)


def test_text_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_csv(tmp_path / "a.csv", 400, 3)
    assert main([str(tmp_path), "--baselines", "", "--warmup", "50"]) == 0
    text = capsys.readouterr().out
    assert "adaptive (default)" in text and "a.csv" in text and "multi-mode share" in text
    assert a.exists()


def test_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("t,v\n1,0.5\n2,oops\n")
    assert main([str(bad)]) == 2
    assert "bad.csv:3" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.csv")]) == 2
    assert main([str(bad), "--baselines", "nope"]) == 2
