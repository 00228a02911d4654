"""Running ``ppe-sor`` under the venv's ``mpiexec`` (the mpich wheel's) for the app tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: ``python -m`` puts its working directory first on sys.path: run the ranks away from any tree.
RANK_CWD = tempfile.gettempdir()


def mpiexec(name: str = "mpiexec") -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"no {name} (pip install mpich)")
    return found


@dataclass
class SorRun:
    code: int
    stdout: str
    stderr: str

    @property
    def summary(self) -> dict[str, Any]:
        lines = [line for line in self.stdout.splitlines() if line.startswith("{")]
        assert lines, f"no summary line; stderr:\n{self.stderr}"
        return dict(json.loads(lines[-1]))


def sor_command(ranks: int, *args: str, launcher: str = "mpiexec") -> list[str]:
    pytest.importorskip("mpi4py")
    pytest.importorskip("ppe.client")
    return [mpiexec(launcher), "-n", str(ranks), sys.executable, "-m", "ppe.apps.sor", *args]


def sor_env() -> dict[str, str]:
    """The ranks import what the tests import (a PYTHONPATH given to pytest, else this tree)."""
    return {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(ROOT)}


def run_sor(ranks: int, *args: str, timeout: float = 180, **kw: Any) -> SorRun:
    done = subprocess.run(
        sor_command(ranks, *args, **kw),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=sor_env(),
        cwd=RANK_CWD,
    )
    return SorRun(done.returncode, done.stdout, done.stderr)
