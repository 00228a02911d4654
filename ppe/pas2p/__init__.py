"""PAS2P: application signatures from execution traces (docs/pas2p.md).

Traces (ppe-sor's JSON lines, OTF2) -> a logical trace ordered by message causality -> the
repeating phases, their weights and times -> the signature (the phases carrying almost all of
the run) and its prediction of the run. Pure computation; ``formats`` alone reads files.
"""

from __future__ import annotations

from ppe.pas2p.events import KINDS, Event, TraceError, check_events
from ppe.pas2p.formats import FORMATS, read_otf2, read_sor, read_traces
from ppe.pas2p.logical import LogicalTrace, logical_trace, match_messages
from ppe.pas2p.phases import Occurrence, Phase, Signature, signature

__all__ = [
    "FORMATS",
    "KINDS",
    "Event",
    "LogicalTrace",
    "Occurrence",
    "Phase",
    "Signature",
    "TraceError",
    "check_events",
    "logical_trace",
    "match_messages",
    "read_otf2",
    "read_sor",
    "read_traces",
    "signature",
]
