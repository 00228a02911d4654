"""Signature probes: run an application's PAS2P signature on a candidate host and read its speed.

A schedule request with ``"probe": "signature"`` asks for it (docs/pas2p.md "Probes"). The
service launches the application's own ``--signature`` mode (``ppe-sor``, ``ppe-cg``) as one
rank holding the strip the host would get under an even split, through the operator's launcher
(``PPE_PROBE_LAUNCHER``, default ``mpiexec -n 1``; ``{host}`` in it is replaced, so a cluster
writes ``mpiexec -n 1 -host {host}``). The rank's measured compute per half-sweep, over its
elements, is the host's seconds per element update as the probe found it; planning divides
out the CPU share the host's sensor reported, so that the forecasts of that share are not
counted twice. A probe that fails or times out leaves the host unprobed: the schedule goes on
with the host's other speed, and the answer says why.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ProbeOutcome",
    "ProbeSpec",
    "finite_number",
    "planned_benchmark",
    "probe_command",
    "run_probe",
]

#: The applications a probe can launch, by the ``app`` of a stored phase signature.
PROGRAMS = {"sor": "ppe-sor", "cg": "ppe-cg"}
#: Stored run parameters passed on to the program (``--name value``); ``n`` and ``rows`` come
#: from the request.
PASSED = ("iterations", "tolerance", "residual_every", "check_every", "checkpoint_every", "omega")


@dataclass(frozen=True)
class ProbeSpec:
    """One probe: the signature (its analysis JSON and run parameters) on ``host`` with a strip
    of ``rows`` rows of an ``n``-column grid."""

    app: str
    analysis: Mapping[str, Any]
    parameters: Mapping[str, Any]
    host: str
    n: int
    rows: int


@dataclass(frozen=True)
class ProbeOutcome:
    host: str
    ok: bool
    benchmark: float | None  # seconds per element update as measured (load included)
    seconds: float  # wall time of the probe, launcher included
    error: str | None = None
    result: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """What the store keeps of it (``result`` trimmed to the figures)."""
        out: dict[str, Any] = {"seconds": self.seconds}
        if self.benchmark is not None:
            out["benchmark"] = self.benchmark
        if self.result is not None:
            out.update(
                {k: self.result[k] for k in ("predicted_s", "interval_s", "cost_s", "steps")}
            )
            out["phases"] = [
                {k: p[k] for k in ("id", "weight", "mean_s", "sd_s")}
                for p in self.result.get("phases", [])
            ]
        return out


def finite_number(value: Any) -> float | None:
    """A finite number of a stored probe result, else None (results may be posted by hand)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def planned_benchmark(measured: float, share: float | None) -> float:
    """The dedicated speed a schedule plans with: what the probe measured times the CPU share
    the host's sensor saw before it (no share known: as measured)."""
    return measured * share if share else measured


def _program(name: str) -> str:
    """The program next to the running interpreter (the service's venv), else on PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def probe_command(spec: ProbeSpec, launcher: str, signature_file: str) -> list[str]:
    if spec.app not in PROGRAMS:
        raise ValueError(f"no probe program for app {spec.app!r} (one of {sorted(PROGRAMS)})")
    words = [w.replace("{host}", spec.host) for w in shlex.split(launcher)]
    if words and words[0] == "mpiexec":
        words[0] = _program("mpiexec")
    cmd = [*words, _program(PROGRAMS[spec.app]), "--offline", "--signature", signature_file]
    cmd += ["--n", str(spec.n), "--rows", str(spec.rows), "--hosts", spec.host]
    for key in PASSED:
        value = spec.parameters.get(key)
        if value is not None:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd


def run_probe(spec: ProbeSpec, launcher: str, timeout_s: float) -> ProbeOutcome:
    """Launch the probe and read its JSON; every failure is an outcome, never an exception."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ppe-probe-") as tmp:
        sig = Path(tmp) / "signature.json"
        sig.write_text(json.dumps(dict(spec.analysis)), encoding="utf-8")
        try:
            cmd = probe_command(spec, launcher, str(sig))
            proc = subprocess.Popen(  # noqa: S603 - the operator's launcher, our own program
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,  # its own group: a timeout stops every rank it started
            )
        except (OSError, ValueError) as exc:
            return _failed(spec, t0, f"the probe could not start: {exc}")
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return _failed(spec, t0, f"the probe ran over {timeout_s:g} s")
    if proc.returncode != 0:
        tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
        return _failed(spec, t0, f"the probe exited with {proc.returncode}: {tail[0][:300]}")
    try:
        result = json.loads(stdout.strip().splitlines()[-1])
        benchmark = float(result["ranks"][0]["benchmark"])
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        return _failed(spec, t0, f"the probe's output is not its JSON answer ({exc})")
    if not (math.isfinite(benchmark) and benchmark > 0):
        return _failed(spec, t0, f"the probe measured a benchmark of {benchmark!r}")
    return ProbeOutcome(spec.host, True, benchmark, time.monotonic() - t0, None, result)


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _failed(spec: ProbeSpec, t0: float, error: str) -> ProbeOutcome:
    return ProbeOutcome(spec.host, False, None, time.monotonic() - t0, error)
