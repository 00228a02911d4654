"""Forecaster fixtures: the real traces, read once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppe.traces import Trace, read_traces

# Picked by looking at the traces (availability histograms, see the forecaster notes): hosts that
# sit idle or saturated and switch between the two, and hosts that hold one level all month.
BIMODAL = ("41", "43", "45", "47", "49", "51", "53", "186", "193", "233", "235")
STEADY = ("1", "2", "4", "6", "11", "198", "236", "274", "379", "421")


@pytest.fixture(scope="session")
def traces(traces_dir: Path) -> dict[str, Trace]:
    """Every real trace without its dead stretches, by name."""
    return {t.name: t.alive() for t in read_traces([traces_dir])}
