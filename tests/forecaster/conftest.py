"""Forecaster fixtures: the real traces, read once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppe.traces import Trace, read_traces

from ..conftest import TRACE_NAMES

# Picked by looking at the traces (availability histograms, see the forecaster notes): hosts that
# sit idle or saturated and switch between the two, and hosts that hold one level all month. The
# ones in the traces directory are tested (41, 45, 233 and 1, 2, 4, 198 in the sample).
BIMODAL = tuple(
    n
    for n in ("41", "43", "45", "47", "49", "51", "53", "186", "193", "233", "235")
    if n in TRACE_NAMES
)
STEADY = tuple(
    n for n in ("1", "2", "4", "6", "11", "198", "236", "274", "379", "421") if n in TRACE_NAMES
)


@pytest.fixture(scope="session")
def traces(traces_dir: Path) -> dict[str, Trace]:
    """Every real trace in the traces directory without its dead stretches, by name."""
    return {t.name: t.alive() for t in read_traces([traces_dir])}
