"""The import graph keeps its shape: layers point downward, no package has an import cycle.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``); grimp, under import-linter,
reads every import, those inside functions included, so a lazy import cannot hide a cycle.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run(
        [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "BROKEN" not in out.stdout
    contracts = (ROOT / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert contracts >= 3  # layers, no cycles, applications only over HTTP
    assert f"{contracts} kept, 0 broken" in out.stdout


def test_replay_orchestration_stays_small() -> None:
    """experiment.py orchestrates; types, case preparation and workers have their own homes."""
    lines = (ROOT / "ppe" / "replay" / "experiment.py").read_text().splitlines()
    assert len(lines) < 250
