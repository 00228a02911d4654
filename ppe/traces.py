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

import contextlib
import gzip
import io
import itertools
import math
import os
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

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


class TraceTooLarge(TraceFormatError):
    """A trace is over a :class:`TraceLimits` bound: too big to read, not malformed (a service
    answers 413 for it, 422 for other format errors)."""


@dataclass(frozen=True)
class TraceLimits:
    """What reading traces may cost. A service reads files its callers sent: a 3 MB gzip can
    unpack to gigabytes, so reading stops at these bounds instead of at the memory's end.
    ``max_bytes`` counts decompressed bytes per file, ``max_rows`` data rows per file,
    ``max_line`` bytes per line (a file without line breaks), ``max_total_rows`` the rows of
    every file one :func:`read_traces` call reads."""

    max_bytes: int = 50 * 2**20
    max_rows: int = 1_000_000
    max_line: int = 64 * 2**10
    max_total_rows: int = 5_000_000


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


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


def _why(exc: BaseException) -> str:
    """The reason without the file's path (the caller names the file its own way)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return exc.strerror or type(exc).__name__
    return str(exc) or type(exc).__name__


def _number(text: str, path: Path, lineno: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceFormatError(path, lineno, f"{column}: not a number: {text.strip()!r}") from None
    if not math.isfinite(value):
        raise TraceFormatError(path, lineno, f"{column}: not finite: {text.strip()!r}")
    return value


class _Over(Exception):
    """The decompressed byte budget of one file ran out (raised from inside the io stack)."""


class _CountingReader(io.RawIOBase):
    """Raw binary stream that counts what it hands on and stops past ``limit`` bytes."""

    def __init__(self, inner: BinaryIO | gzip.GzipFile, limit: int | None) -> None:
        self.inner, self.limit, self.count = inner, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        n = len(data)
        self.count += n
        if self.limit is not None and self.count > self.limit:
            raise _Over
        buffer[:n] = data
        return n


class _Reader:
    """Parses one file as it reads it: its format, then its data rows one at a time.

    Lines are read one by one through a byte counter (never the whole file), so memory is
    one line plus the rows kept by the caller, whatever the file unpacks to.
    """

    def __init__(self, path: Path, limits: TraceLimits | None) -> None:
        self.path, self.limits = path, limits
        self.gwa = False
        self.lineno = 0
        self._no_rows_line = 1

    def _lines(self) -> Iterator[str]:
        """The file's lines without their line breaks; UTF-8, universal newlines."""
        limits = self.limits
        gz = self.path.name.endswith(".gz")
        try:
            with contextlib.ExitStack() as stack:
                raw: BinaryIO | gzip.GzipFile = stack.enter_context(self.path.open("rb"))
                if gz:
                    raw = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
                counted = _CountingReader(raw, limits.max_bytes if limits else None)
                text = io.TextIOWrapper(io.BufferedReader(counted), "utf-8", newline=None)
                while True:
                    line = text.readline(limits.max_line + 1 if limits else -1)
                    if not line:
                        return
                    self.lineno += 1
                    body = line[:-1] if line.endswith("\n") else line
                    if limits and len(body) > limits.max_line:
                        raise TraceTooLarge(
                            self.path,
                            self.lineno,
                            f"line longer than {limits.max_line} characters (the limit per line)",
                        )
                    yield body
        except _Over:
            assert limits is not None
            raise TraceTooLarge(
                self.path,
                self.lineno + 1,
                f"more than {_size(limits.max_bytes)} once decompressed (the limit per file)",
            ) from None
        except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
            reason = f"cannot read file: {_why(exc)}"
            raise TraceFormatError(self.path, self.lineno + 1, reason) from None

    def rows(self) -> Iterator[tuple[float, ...]]:
        """Data rows: GWA-T-12 ``(timestamp, cores, capacity, usage %, rx, tx)`` (rx/tx NaN
        when absent) or generic ``(timestamp, value)``; :attr:`gwa` says which once the first
        line is read."""
        lines = self._lines()
        for line in lines:
            if line.strip():
                break
        else:
            raise TraceFormatError(self.path, 1, "empty file")
        self.gwa = ";" in line
        parse = self._gwa_rows if self.gwa else self._generic_rows
        count = 0
        max_rows = self.limits.max_rows if self.limits else None
        for row in parse(line, lines):
            count += 1
            if max_rows is not None and count > max_rows:
                raise TraceTooLarge(
                    self.path, self.lineno, f"more than {max_rows} data rows (the limit per file)"
                )
            yield row
        if not count:
            raise TraceFormatError(self.path, self._no_rows_line, "no data rows")

    def _gwa_rows(self, header: str, lines: Iterator[str]) -> Iterator[tuple[float, ...]]:
        path = self.path
        if "timestamp" not in header.lower():
            raise TraceFormatError(path, self.lineno, "GWA-T-12 header line expected")
        self._no_rows_line = self.lineno
        for line in lines:
            if not line.strip():
                continue
            lineno = self.lineno
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
            has_net = len(parts) > _GWA_NET_TX
            rx = _number(parts[_GWA_NET_RX], path, lineno, "net rx") if has_net else math.nan
            tx = _number(parts[_GWA_NET_TX], path, lineno, "net tx") if has_net else math.nan
            yield (ts, cores, cap, usage, rx, tx)

    def _generic_rows(self, first: str, lines: Iterator[str]) -> Iterator[tuple[float, ...]]:
        path = self.path
        header_checked = False
        for line in itertools.chain([first], lines):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            lineno = self.lineno
            parts = line.split(",")
            if len(parts) < 2:
                raise TraceFormatError(path, lineno, "expected 'timestamp,value'")
            if not header_checked:
                header_checked = True
                try:
                    float(parts[0])
                except ValueError:
                    continue  # header line
            ts = _number(parts[0], path, lineno, "timestamp")
            value = _number(parts[1], path, lineno, "value")
            yield (ts, value)
        self._no_rows_line = max(self.lineno, 1)


def _dedupe_sorted(ts: FloatArray) -> tuple[NDArray[np.intp], int]:
    """Indices keeping the first row per timestamp, in time order; and how many were dropped."""
    order = np.argsort(ts, kind="stable")  # stable: the first row of equal timestamps wins
    sorted_ts = ts[order]
    first = np.ones(sorted_ts.size, dtype=bool)
    first[1:] = sorted_ts[1:] != sorted_ts[:-1]
    return order[first], int(sorted_ts.size - first.sum())


def read_trace(path: str | os.PathLike[str], limits: TraceLimits | None = None) -> Trace:
    """Read one GWA-T-12 or ``timestamp,value`` trace (plain or ``.gz``), streaming.

    For generic CSV the value is CPU availability when all values lie in ``[0, 1]``, otherwise CPU
    usage in percent. ``limits`` (None: unbounded, for local files) stops at a size bound with
    :class:`TraceTooLarge`.
    """
    p = Path(path)
    reader = _Reader(p, limits)
    data = array("d")
    for row in reader.rows():
        data.extend(row)
    rows = np.frombuffer(data, dtype=np.float64).reshape(-1, 6 if reader.gwa else 2)
    return _gwa_trace(p, rows) if reader.gwa else _generic_trace(p, rows)


def check_trace(path: str | os.PathLike[str], limits: TraceLimits) -> int:
    """Parse a whole file as :func:`read_trace` would, within ``limits``, keeping nothing;
    returns its number of data rows. For vetting a file before accepting it: memory is one
    line, time at most ``limits.max_bytes`` of parsing."""
    return sum(1 for _ in _Reader(Path(path), limits).rows())


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


def read_traces(
    paths_or_dirs: Iterable[str | os.PathLike[str]], limits: TraceLimits | None = None
) -> list[Trace]:
    """Read every trace named (a directory means all trace files inside it, sorted); with
    ``limits``, each file within its bounds and all of them within ``max_total_rows``."""
    out: list[Trace] = []
    total = 0
    for p in expand_paths(paths_or_dirs):
        out.append(read_trace(p, limits))
        total += len(out[-1]) + out[-1].duplicates_dropped
        if limits and total > limits.max_total_rows:
            raise TraceTooLarge(
                p, 0, f"the traces hold more than {limits.max_total_rows} rows together (the limit)"
            )
    return out
