"""The client is installed in applications: importing it loads neither the service nor its stack."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_client_imports_only_httpx_and_the_standard_library() -> None:
    code = (
        "import sys, ppe.client\n"
        "heavy = ('ppe.service', 'ppe.core', 'sensors', 'numpy', 'sqlalchemy', 'fastapi')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
