"""Trace readers: GWA-T-12 quirks, generic CSV, clear errors, and the real files."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import numpy as np
import pytest

from ppe.traces import (
    TraceFormatError,
    read_trace,
    read_traces,
    trace_files,
)

HEADER = (
    "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\t"
    "CPU usage [%];\tMemory capacity provisioned [KB];\tMemory usage [KB];\t"
    "Disk read throughput [KB/s];\tDisk write throughput [KB/s];\t"
    "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]"
)


def gwa_row(ts: int, cores: int, cap: float, usage_pct: float, rx: float = 1.0) -> str:
    return (
        f"{ts};\t{cores};\t{cap};\t{cap * usage_pct / 100};\t{usage_pct};\t8.0;\t4.0;\t0.0;\t"
        f"0.0;\t{rx};\t2.0"
    )


def write(path: Path, lines: list[str], gz: bool = False) -> Path:
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_gwa_quirks(tmp_path: Path, gz: bool) -> None:
    lines = [
        HEADER,
        gwa_row(1000, 2, 5000.0, 10.0),
        gwa_row(1300, 2, 5000.0, 150.0),  # usage above 100 %
        gwa_row(1300, 2, 5000.0, 20.0),  # duplicate timestamp: the first row wins
        gwa_row(900, 2, 5000.0, 0.0),  # out of order
        gwa_row(5000, 0, 0.0, 0.0),  # dead: 0 cores, 0 MHz, after a gap
    ]
    tr = read_trace(write(tmp_path / ("7.csv.gz" if gz else "7.csv"), lines, gz))
    assert tr.name == "7"
    np.testing.assert_array_equal(tr.timestamps, [900, 1000, 1300, 5000])  # seconds, gap kept
    np.testing.assert_allclose(tr.cpu_usage_pct, [0.0, 10.0, 150.0, 0.0])
    np.testing.assert_allclose(tr.availability, [1.0, 0.9, 0.01, 1.0])
    np.testing.assert_array_equal(tr.dead, [False, False, False, True])
    assert tr.duplicates_dropped == 1
    assert tr.net_rx_kbs is not None and tr.net_rx_kbs.size == 4
    alive = tr.alive()
    assert len(alive) == 3 and not alive.dead.any()


def test_generic_csv(tmp_path: Path) -> None:
    avail = read_trace(write(tmp_path / "a.csv", ["timestamp,value", "10,0.5", "20,1.0", "30,0"]))
    np.testing.assert_allclose(avail.availability, [0.5, 1.0, 0.01])
    usage = read_trace(write(tmp_path / "u.csv", ["10,50", "20,120"]))  # no header, percent
    np.testing.assert_allclose(usage.availability, [0.5, 0.01])


@pytest.mark.parametrize(
    ("lines", "line"),
    [
        ([HEADER, gwa_row(1000, 2, 5000.0, 10.0), "1300;\t2;\tbad;\t1;\t2"], 3),
        ([HEADER, "1300;\t2"], 2),
        ([HEADER, gwa_row(1000, 2, 5000.0, -1.0)], 2),
    ],
)
def test_malformed_gwa_names_file_and_line(tmp_path: Path, lines: list[str], line: int) -> None:
    path = write(tmp_path / "bad.csv", lines)
    with pytest.raises(TraceFormatError) as err:
        read_trace(path)
    assert err.value.line == line
    assert str(path) in str(err.value) and f":{line}:" in str(err.value)


def test_malformed_generic_and_empty(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r":3: value"):
        read_trace(write(tmp_path / "g.csv", ["t,v", "1,0.5", "2,nan"]))
    with pytest.raises(TraceFormatError, match="empty"):
        read_trace(write(tmp_path / "e.csv", [""]))
    with pytest.raises(TraceFormatError, match="cannot read"):
        read_trace(write(tmp_path / "x.csv.gz", ["not gzip"]))


def test_real_traces(traces_dir: Path) -> None:
    start = time.perf_counter()
    traces = read_traces([traces_dir])
    elapsed = time.perf_counter() - start
    assert len(traces) == len(list(traces_dir.glob("*.csv.gz")))  # every file (59 in the full set)
    assert [t.name for t in traces][:3] == ["1", "2", "4"]  # numeric order
    by_name = {t.name: t for t in traces}
    for t in traces:
        assert np.all(np.diff(t.timestamps) > 0)
        assert t.availability.min() >= 0.01 and t.availability.max() <= 1.0
        assert 1.37e9 < t.timestamps[0] < 1.38e9  # seconds, July 2013
    assert by_name["195"].duplicates_dropped > 7000  # interleaved streams
    assert by_name["195"].dead_fraction > 0.9
    assert 0.1 < by_name["45"].dead_fraction < 0.2 and by_name["45"].dead[0]
    dead_at = np.flatnonzero(by_name["45"].dead)  # one stretch: its first ~4.4 days
    assert dead_at[0] == 0 and np.all(np.diff(dead_at) == 1)
    ts45 = by_name["45"].timestamps
    assert 4.0 < (ts45[dead_at[-1]] - ts45[0]) / 86400 < 4.6
    assert by_name["41"].dead_fraction == 0
    assert by_name["41"].cpu_usage_pct.max() > 100
    assert len(trace_files(traces_dir)) == len(traces)
    print(f"read {len(traces)} traces in {elapsed:.2f} s")
