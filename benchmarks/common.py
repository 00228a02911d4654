"""What several benchmark scripts share (they run as scripts: `python benchmarks/bench_x.py`)."""

from __future__ import annotations

import subprocess
import sys


def token(db: str, role: str) -> str:
    """A token as an operator makes one: `ppe token create`, whose last line is the token."""
    out = subprocess.run(
        [sys.executable, "-m", "ppe", "token", "create", "--role", role, "--db", db],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]
