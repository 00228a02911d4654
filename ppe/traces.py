"""Readers for recorded load traces: GWA-T-12 (Bitbrains) files and generic ``timestamp,value`` CSV.

Both formats become a :class:`Trace`: timestamps in Unix seconds, CPU usage in percent, and the
derived CPU *availability* ``clip(1 - usage/100, 0.01, 1)`` -- the fraction of a CPU a new process
would get, which is what PPE's models consume.

GWA-T-12 quirks handled here (see ``shared/traces/README.md``):

- the ``Timestamp [ms]`` column holds Unix **seconds**;
- ``CPU usage [%]`` can exceed 100 (the availability clip absorbs it);
- some files write every timestamp several times in interleaved streams: rows are de-duplicated
  by timestamp, keeping the *first* row seen for each timestamp, then sorted by time;
- gaps (up to ~31 h) are kept as they are -- no interpolation, no invented samples;
- "dead" stretches, where the VM reports 0 cores and 0 MHz provisioned, are kept but flagged in
  :attr:`Trace.dead`; see that attribute for the modelling choice.

Malformed input raises :class:`TraceFormatError` naming the file and the 1-based line number.
"""

from __future__ import annotations

import gzip
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

#: Availability floor: a saturated host still gives a new process a sliver of CPU, and a strictly
#: positive floor keeps ``work / availability`` finite in the models.
AVAILABILITY_FLOOR = 0.01

#: File name suffixes recognised as traces when a directory is given.
TRACE_SUFFIXES = (".csv", ".csv.gz", ".txt", ".txt.gz")

_GWA_MIN_FIELDS = 5  # timestamp, cores, capacity MHz, usage MHz, usage %
_GWA_NET_RX, _GWA_NET_TX = 9, 10


class TraceFormatError(ValueError):
    """A trace file could not be parsed; the message names the file and the line."""

    def __init__(self, path: str | os.PathLike[str], line: int, reason: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.path}:{line}: {reason}")


def availability_from_usage(usage_pct: FloatArray) -> FloatArray:
    """Fraction of a CPU available to a new process: ``clip(1 - usage/100, 0.01, 1)``."""
    return np.clip(1.0 - np.asarray(usage_pct, dtype=np.float64) / 100.0, AVAILABILITY_FLOOR, 1.0)


@dataclass(frozen=True)
class Trace:
    """One host's recorded load, strictly increasing in time.

    ``dead`` flags samples where the VM reported 0 cores and 0 MHz provisioned. Modelling choice:
    such a VM is *switched off*, not idle -- its usage is frozen at 0 (availability 1) or at a
    stale value, so it would look like a perfectly available host while nothing could run on it.
    The trace keeps those samples (so nothing is hidden) but consumers that replay a host as a
    sensor would see it should call :meth:`alive`, which drops them: a switched-off host sends no
    measurements, and the forecaster sees a gap. ``ppe forecast-eval`` does this by default.
    """

    name: str
    timestamps: FloatArray
    cpu_usage_pct: FloatArray
    availability: FloatArray
    cores: FloatArray
    dead: BoolArray
    net_rx_kbs: FloatArray | None = None
    net_tx_kbs: FloatArray | None = None
    source: str = ""
    duplicates_dropped: int = field(default=0)

    def __len__(self) -> int:
        return int(self.timestamps.size)

    @property
    def dead_fraction(self) -> float:
        """Share of samples in dead stretches (0 when the trace has none)."""
        return float(self.dead.mean()) if self.dead.size else 0.0

    def alive(self) -> Trace:
        """The trace without its dead samples (a switched-off host reports nothing)."""
        if not self.dead.any():
            return self
        keep = ~self.dead
        return replace(
            self,
            timestamps=self.timestamps[keep],
            cpu_usage_pct=self.cpu_usage_pct[keep],
            availability=self.availability[keep],
            cores=self.cores[keep],
            dead=self.dead[keep],
            net_rx_kbs=None if self.net_rx_kbs is None else self.net_rx_kbs[keep],
            net_tx_kbs=None if self.net_tx_kbs is None else self.net_tx_kbs[keep],
        )


def dead_mask(cores: FloatArray, capacity_mhz: FloatArray) -> BoolArray:
    """Samples where the VM is switched off: 0 cores *and* 0 MHz provisioned."""
    return (np.asarray(cores) == 0) & (np.asarray(capacity_mhz) == 0)


def trace_name(path: str | os.PathLike[str]) -> str:
    """File name without ``.gz`` and the format suffix (``.../45.csv.gz`` -> ``45``)."""
    name = Path(path).name
    if name.endswith(".gz"):
        name = name[:-3]
    for suffix in (".csv", ".txt"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _read_lines(path: Path) -> list[str]:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8", errors="strict", newline="") as fh:
                text = fh.read()
        else:
            text = path.read_text(encoding="utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise TraceFormatError(path, 0, f"cannot read file: {exc}") from exc
    return text.splitlines()


def _first_content_line(lines: Sequence[str]) -> int:
    for i, line in enumerate(lines):
        if line.strip():
            return i
    return -1


def _is_gwa(lines: Sequence[str]) -> bool:
    i = _first_content_line(lines)
    return i >= 0 and ";" in lines[i]


def _number(text: str, path: Path, lineno: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(path, lineno, f"{column}: not a number: {text.strip()!r}") from None
    if not math.isfinite(value):
        raise TraceFormatError(path, lineno, f"{column}: not finite: {text.strip()!r}")
    return value


def _parse_gwa(path: Path, lines: Sequence[str]) -> FloatArray:
    """Rows of (timestamp, cores, capacity, usage %, rx, tx); rx/tx NaN when absent."""
    start = _first_content_line(lines)
    header = lines[start]
    if "timestamp" not in header.lower():
        raise TraceFormatError(path, start + 1, "GWA-T-12 header line expected")
    rows: list[tuple[float, float, float, float, float, float]] = []
    for idx in range(start + 1, len(lines)):
        line = lines[idx]
        if not line.strip():
            continue
        lineno = idx + 1
        parts = line.split(";")
        if len(parts) < _GWA_MIN_FIELDS:
            raise TraceFormatError(
                path,
                lineno,
                f"expected at least {_GWA_MIN_FIELDS} ';'-separated fields, got {len(parts)}",
            )
        ts = _number(parts[0], path, lineno, "timestamp")
        cores = _number(parts[1], path, lineno, "CPU cores")
        cap = _number(parts[2], path, lineno, "CPU capacity")
        usage = _number(parts[4], path, lineno, "CPU usage [%]")
        if usage < 0:
            raise TraceFormatError(path, lineno, f"CPU usage [%]: negative: {usage}")
        rx = _number(parts[_GWA_NET_RX], path, lineno, "net rx") if len(parts) > 10 else math.nan
        tx = _number(parts[_GWA_NET_TX], path, lineno, "net tx") if len(parts) > 10 else math.nan
        rows.append((ts, cores, cap, usage, rx, tx))
    if not rows:
        raise TraceFormatError(path, start + 1, "no data rows")
    return np.asarray(rows, dtype=np.float64)


def _parse_generic(path: Path, lines: Sequence[str]) -> FloatArray:
    """Rows of (timestamp, value) from ``timestamp,value`` CSV with an optional header."""
    rows: list[tuple[float, float]] = []
    seen_content = False
    for idx, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        lineno = idx + 1
        parts = line.split(",")
        if len(parts) < 2:
            raise TraceFormatError(path, lineno, "expected 'timestamp,value'")
        if not seen_content:
            seen_content = True
            try:
                float(parts[0])
            except ValueError:
                continue  # header line
        ts = _number(parts[0], path, lineno, "timestamp")
        value = _number(parts[1], path, lineno, "value")
        rows.append((ts, value))
    if not rows:
        raise TraceFormatError(path, max(len(lines), 1), "no data rows")
    return np.asarray(rows, dtype=np.float64)


def _dedupe_sorted(ts: FloatArray) -> tuple[NDArray[np.intp], int]:
    """Indices keeping the first row per timestamp, in time order; and how many were dropped."""
    order = np.argsort(ts, kind="stable")  # stable: the first row of equal timestamps wins
    sorted_ts = ts[order]
    first = np.ones(sorted_ts.size, dtype=bool)
    first[1:] = sorted_ts[1:] != sorted_ts[:-1]
    return order[first], int(sorted_ts.size - first.sum())


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Read one GWA-T-12 or ``timestamp,value`` trace (plain or ``.gz``).

    For generic CSV the value is CPU availability when all values lie in ``[0, 1]``, otherwise CPU
    usage in percent.
    """
    p = Path(path)
    lines = _read_lines(p)
    if _first_content_line(lines) < 0:
        raise TraceFormatError(p, 1, "empty file")
    if _is_gwa(lines):
        return _gwa_trace(p, _parse_gwa(p, lines))
    return _generic_trace(p, _parse_generic(p, lines))


def _gwa_trace(path: Path, rows: FloatArray) -> Trace:
    keep, dropped = _dedupe_sorted(rows[:, 0])
    rows = rows[keep]
    usage = rows[:, 3]
    rx, tx = rows[:, 4], rows[:, 5]
    has_net = not np.isnan(rx).any()
    return Trace(
        name=trace_name(path),
        timestamps=rows[:, 0].copy(),
        cpu_usage_pct=usage.copy(),
        availability=availability_from_usage(usage),
        cores=rows[:, 1].copy(),
        dead=dead_mask(rows[:, 1], rows[:, 2]),
        net_rx_kbs=rx.copy() if has_net else None,
        net_tx_kbs=tx.copy() if has_net else None,
        source=str(path),
        duplicates_dropped=dropped,
    )


def _generic_trace(path: Path, rows: FloatArray) -> Trace:
    keep, dropped = _dedupe_sorted(rows[:, 0])
    rows = rows[keep]
    values = rows[:, 1]
    if np.all((values >= 0) & (values <= 1)):
        availability = np.clip(values, AVAILABILITY_FLOOR, 1.0)
        usage = (1.0 - values) * 100.0
    else:
        usage = values.copy()
        availability = availability_from_usage(usage)
    n = values.size
    return Trace(
        name=trace_name(path),
        timestamps=rows[:, 0].copy(),
        cpu_usage_pct=usage,
        availability=availability,
        cores=np.full(n, np.nan),
        dead=np.zeros(n, dtype=bool),
        source=str(path),
        duplicates_dropped=dropped,
    )


def _natural_key(path: Path) -> tuple[int, int | str, str]:
    stem = trace_name(path)
    return (0, int(stem), path.name) if stem.isdigit() else (1, stem, path.name)


def trace_files(directory: str | os.PathLike[str]) -> list[Path]:
    """Trace files directly inside ``directory``, sorted (numeric names in numeric order)."""
    d = Path(directory)
    files = [f for f in d.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES)]
    return sorted(files, key=_natural_key)


def expand_paths(paths_or_dirs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given, directories replaced by their sorted trace files."""
    out: list[Path] = []
    for item in paths_or_dirs:
        p = Path(item)
        if p.is_dir():
            out.extend(trace_files(p))
        elif p.exists():
            out.append(p)
        else:
            raise FileNotFoundError(f"no such trace file or directory: {p}")
    return out


def read_traces(paths_or_dirs: Iterable[str | os.PathLike[str]]) -> list[Trace]:
    """Read every trace named (a directory means all trace files inside it, sorted)."""
    return [read_trace(p) for p in expand_paths(paths_or_dirs)]
