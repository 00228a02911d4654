"""What a what-if answers: per point, the predicted makespan with its interval and each
nodeset's share (rows, compute, communication, waiting), as JSON (``--out``) and as the table
``ppe whatif`` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppe.core import StochasticValue
from ppe.whatif.options import Options

__all__ = ["NodesetResult", "PointResult", "Report", "format_table", "nodeset_result"]


@dataclass(frozen=True)
class NodesetResult:
    """One nodeset's share of a point: rows and mean seconds per node."""

    nodeset: str
    nodes: int
    benchmark: float
    rows: int
    rows_min: int
    rows_max: int
    time: float
    compute: float
    communication: float
    waiting: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeset": self.nodeset,
            "nodes": self.nodes,
            "benchmark": self.benchmark,
            "rows": self.rows,
            "rows_per_node": [self.rows_min, self.rows_max],
            "time_s": self.time,
            "compute_s": self.compute,
            "communication_s": self.communication,
            "waiting_s": self.waiting,
        }


def nodeset_result(
    name: str, benchmark: float, parts: Sequence[tuple[int, int, float, float]], span: float
) -> NodesetResult:
    """One nodeset's share from its classes of nodes, each ``(count, rows, mean time, mean
    communication)``: means over its nodes; ``waiting`` is the makespan's mean ``span`` minus
    a node's time (at synchronisations and at the end)."""
    nodes = sum(c for c, _, _, _ in parts)
    time = sum(c * t for c, _, t, _ in parts) / nodes
    comm = sum(c * q for c, _, _, q in parts) / nodes
    return NodesetResult(
        name,
        nodes,
        benchmark,
        sum(c * r for c, r, _, _ in parts),
        min(r for _, r, _, _ in parts),
        max(r for _, r, _, _ in parts),
        time,
        time - comm,
        comm,
        span - time,
    )


@dataclass(frozen=True)
class PointResult:
    """The prediction of one point: the makespan (a stochastic value), per-nodeset breakdown,
    and how it was computed (``path``: "collapsed", "full" or "blocks"; ``classes``: distinct
    host classes predicted). ``process_grid``: a block2dim or block3dim point's ranks per
    split axis (empty for strips); its nodesets' ``rows`` then count elements."""

    values: tuple[tuple[str, Any], ...]
    makespan: StochasticValue
    confidence: float
    nodesets: tuple[NodesetResult, ...]
    engine: str
    path: str
    hosts: int
    classes: int
    horizon_s: float | None
    rounds: int
    notes: tuple[str, ...] = ()
    process_grid: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "values": {k: _plain(v) for k, v in self.values},
            "makespan": self.makespan.to_dict(self.confidence),
            "nodesets": [n.to_dict() for n in self.nodesets],
            "engine": self.engine,
            "path": self.path,
            "hosts": self.hosts,
            "classes": self.classes,
            "horizon_s": self.horizon_s,
            "rounds": self.rounds,
            "notes": list(self.notes),
            "process_grid": list(self.process_grid) or None,
        }


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


@dataclass(frozen=True)
class Report:
    """Every point of a spec, with what produced them."""

    source: str
    title: str
    options: Options
    axes: tuple[str, ...]
    points: tuple[PointResult, ...]
    model: str | None = None  # a script's generated grammar (the full chain of the first point)
    together: tuple[tuple[str, ...], ...] = ()  # axes swept in step ([sweep] together)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "title": self.title,
            "strategy": self.options.strategy,
            "confidence": self.options.confidence,
            "axes": list(self.axes),
            "together": [list(g) for g in self.together],
            "points": [p.to_dict() for p in self.points],
            "model": self.model,
        }


def _value(v: Any) -> str:
    if isinstance(v, tuple | list):
        return "x".join(_value(x) for x in v)
    return f"{v:g}" if isinstance(v, float) else str(v)


def _seconds(x: float) -> str:
    return f"{x:.4g}"


def table_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    """The table's header and rows (shared by the text table and the HTML page)."""
    conf = f"{report.options.confidence:.0%}"
    head = [*report.axes, "mean s", f"{conf} interval s"]
    names = nodeset_names([p.nodesets for p in report.points])
    held = "elements" if any(p.process_grid for p in report.points) else "rows"
    for name in names:
        head += [f"{name} {held}/node", f"{name} compute/comm/wait s"]
    rows = []
    for p in report.points:
        lo, hi = p.makespan.interval(report.options.confidence)
        cells = [_value(v) for _, v in p.values]
        cells += [_seconds(p.makespan.mean()), f"[{_seconds(lo)}, {_seconds(hi)}]"]
        here = {n.nodeset: n for n in p.nodesets}
        for name in names:
            n = here.get(name)
            if n is None:  # number = 0 at this point
                cells += [ABSENT, ABSENT]
                continue
            span = f"{n.rows_min}" if n.rows_min == n.rows_max else f"{n.rows_min}-{n.rows_max}"
            parts = "/".join(_seconds(x) for x in (n.compute, n.communication, n.waiting))
            cells += [span, parts]
        rows.append(cells)
    return head, rows


#: A table cell of a nodeset absent from a point (``number = 0``).
ABSENT = "-"


def nodeset_names(per_point: Sequence[Sequence[Any]]) -> list[str]:
    """Every nodeset any point has, from each point's per-nodeset entries (anything with a
    ``nodeset`` name; a nodeset with ``number = 0`` is absent from some points), in chain
    order: that of the points with the most nodesets first."""
    fullest = sorted(per_point, key=len, reverse=True)
    return list(dict.fromkeys(n.nodeset for entries in fullest for n in entries))


def report_notes(report: Report) -> list[str]:
    """The points' notes, each once, in order."""
    return list(dict.fromkeys(x for p in report.points for x in p.notes))


def aligned(head: list[str], rows: list[list[str]]) -> list[str]:
    """Header and rows as left-aligned text columns."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [head, *rows]
    ]


def format_table(report: Report) -> str:
    """One row per point: the swept values, the predicted mean and interval, and per nodeset
    its rows per node and mean compute / communication / waiting seconds per node."""
    lines = aligned(*table_rows(report))
    title = report.title or report.source
    top = f"{title}: strategy {report.options.strategy}, {len(report.points)} point(s)"
    notes = [f"note: {n}" for n in report_notes(report)]
    return "\n".join([top, *lines, *notes])
