"""The what-if report as one self-contained HTML page (``ppe whatif --html``): the table the
CLI prints, the notes, and plots of the predicted makespan (mean with its interval as a band)
and each nodeset's compute / communication / waiting against the swept field. Simulated
reports show the simulated makespans (mean, central band, one point per start) beside the
analytic prediction made before each start. Pure rendering: plotly builds the figures and its
bundle is inlined (ppe/htmlpage.py), never fetched from a CDN."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ppe.htmlpage import figures_html, html_table, page
from ppe.whatif.report import Report, _value, nodeset_names, report_notes, table_rows
from ppe.whatif.simulated import SimReport, sim_table_rows

__all__ = ["figures", "figures_json", "render_html"]


@dataclass(frozen=True)
class _Part:
    """One nodeset's mean seconds per node at one point."""

    nodeset: str
    compute: float
    communication: float
    waiting: float


@dataclass(frozen=True)
class _Row:
    """One point, reduced to what the plots need (from either kind of report)."""

    values: tuple[tuple[str, Any], ...]
    mean: float  # the analytic prediction's mean and interval
    lower: float
    upper: float
    parts: tuple[_Part, ...]
    simulated: tuple[float, ...] = ()  # the simulated makespans (one per start), if any
    sim_lower: float = math.nan
    sim_upper: float = math.nan


def _rows(report: Report | SimReport) -> list[_Row]:
    conf = report.options.confidence
    if isinstance(report, SimReport):
        out = []
        for sp in report.points:
            lo, hi = sp.interval()
            parts = tuple(
                _Part(n.nodeset, n.compute, n.communication, n.waiting) for n in sp.nodesets
            )
            out.append(
                _Row(
                    sp.values,
                    float(sp.predicted.mean()),
                    float(sp.lower.mean()),
                    float(sp.upper.mean()),
                    parts,
                    tuple(float(x) for x in sp.makespans),
                    lo,
                    hi,
                )
            )
        return out
    rows = []
    for p in report.points:
        lo, hi = p.makespan.interval(conf)
        parts = tuple(_Part(n.nodeset, n.compute, n.communication, n.waiting) for n in p.nodesets)
        rows.append(_Row(p.values, p.makespan.mean(), lo, hi, parts))
    return rows


def _rows_of_dict(report: dict[str, Any]) -> list[_Row]:
    """The same rows from a report's JSON (``to_dict()``, as the service stores it), so the
    dashboard draws the figures of a finished job with these builders."""
    out = []
    for p in report.get("points", []):
        values = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in p["values"].items())
        parts = tuple(
            _Part(n["nodeset"], n["compute_s"], n["communication_s"], n["waiting_s"])
            for n in p["nodesets"]
        )
        if "makespans_s" in p:  # a simulated point (SimPoint.to_dict)
            ivs = np.asarray(p["predicted_interval_s"], dtype=float).reshape(-1, 2)
            lo, hi = p["makespan"]["interval"]
            out.append(
                _Row(
                    values,
                    float(np.mean(p["predicted_mean_s"])),
                    float(ivs[:, 0].mean()),
                    float(ivs[:, 1].mean()),
                    parts,
                    tuple(float(x) for x in p["makespans_s"]),
                    float(lo),
                    float(hi),
                )
            )
        else:
            lo, hi = p["makespan"]["interval"]
            out.append(_Row(values, float(p["makespan"]["mean"]), float(lo), float(hi), parts))
    return out


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _x(rows: Sequence[_Row], axis: int) -> tuple[list[Any], bool]:
    """The swept values of one axis as x values, and whether a log axis suits them (numeric,
    positive, at least three distinct values in a geometric progression)."""
    raw = [r.values[axis][1] for r in rows]
    if not all(_numeric(v) for v in raw):
        return [_value(v) for v in raw], False
    xs = [float(v) for v in raw]
    distinct = sorted(set(xs))
    log = False
    if len(distinct) >= 3 and distinct[0] > 0:
        ratios = np.diff(np.log(distinct))
        log = bool(np.allclose(ratios, ratios[0], rtol=1e-6))
    return xs, log


def _band(
    go: Any, xs: list[Any], lo: list[float], hi: list[float], name: str, color: str
) -> list[Any]:
    """Upper and lower edges of an interval, the space between them shaded."""
    upper = go.Scatter(
        x=xs,
        y=hi,
        name=f"{name} upper",
        mode="lines",
        line={"width": 0, "color": color},
        legendgroup=name,
        showlegend=False,
    )
    lower = go.Scatter(
        x=xs,
        y=lo,
        name=f"{name} lower",
        mode="lines",
        line={"width": 0, "color": color},
        fill="tonexty",
        fillcolor=color,
        legendgroup=name,
        showlegend=False,
    )
    return [upper, lower]


_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def _shade(color: str) -> str:
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},0.2)"


def _groups(rows: Sequence[_Row], axes: Sequence[str]) -> list[tuple[str, list[_Row]]]:
    """Rows grouped by the second axis's value (one group when there is one axis)."""
    if len(axes) < 2:
        return [("", list(rows))]
    out: dict[str, list[_Row]] = {}
    for r in rows:
        out.setdefault(f"{axes[1]}={_value(r.values[1][1])}", []).append(r)
    return list(out.items())


def _makespan_figure(go: Any, rows: Sequence[_Row], axes: Sequence[str], conf: float) -> Any:
    fig = go.Figure()
    pct = f"{conf * 100:g}%"
    log = False
    for i, (label, group) in enumerate(_groups(rows, axes)):
        xs, lg = _x(group, 0)
        log = log or lg
        color = _COLORS[i % len(_COLORS)]
        name = f"{label} predicted" if label else "predicted"
        lo, hi = [r.lower for r in group], [r.upper for r in group]
        fig.add_traces(_band(go, xs, lo, hi, name, _shade(color)))
        means = [r.mean for r in group]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=means,
                name=f"{name} mean",
                mode="lines+markers",
                line={"color": color},
                legendgroup=name,
            )
        )
        if group and group[0].simulated:
            sname = f"{label} simulated" if label else "simulated"
            slo, shi = [r.sim_lower for r in group], [r.sim_upper for r in group]
            fig.add_traces(_band(go, xs, slo, shi, sname, _shade(_COLORS[(i + 3) % 7])))
            smean = [float(np.mean(r.simulated)) for r in group]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=smean,
                    name=f"{sname} mean",
                    mode="lines+markers",
                    line={"color": _COLORS[(i + 3) % 7], "dash": "dash"},
                    legendgroup=sname,
                )
            )
            px = [x for x, r in zip(xs, group, strict=True) for _ in r.simulated]
            py = [m for r in group for m in r.simulated]
            fig.add_trace(
                go.Scatter(
                    x=px,
                    y=py,
                    name=f"{sname} per start",
                    mode="markers",
                    marker={"size": 4, "color": _COLORS[(i + 3) % 7], "opacity": 0.5},
                    legendgroup=sname,
                )
            )
    fig.update_layout(
        title=f"Makespan against {axes[0]} (bands: {pct} intervals)",
        xaxis_title=axes[0],
        yaxis_title="makespan (s)",
        xaxis_type="log" if log else None,
    )
    return fig


def _breakdown_figures(go: Any, rows: Sequence[_Row], axes: Sequence[str]) -> list[Any]:
    """Per nodeset: compute / communication / waiting stacked against the first axis (one
    axis), or its total per second-axis value (two axes)."""
    names = nodeset_names([r.parts for r in rows])  # in chain order, as the table's
    figs = []
    for name in names:
        fig = go.Figure()
        log = False
        having = [r for r in rows if any(p.nodeset == name for p in r.parts)]  # number > 0

        def part(r: _Row, name: str = name) -> _Part:
            return next(p for p in r.parts if p.nodeset == name)

        if len(axes) == 1:
            xs, log = _x(having, 0)
            for field in ("compute", "communication", "waiting"):
                ys = [getattr(part(r), field) for r in having]
                fig.add_trace(go.Scatter(x=xs, y=ys, name=field, mode="lines", stackgroup="one"))
        else:
            for label, group in _groups(having, axes):
                xs, lg = _x(group, 0)
                log = log or lg
                ys = [part(r).compute + part(r).communication + part(r).waiting for r in group]
                fig.add_trace(go.Scatter(x=xs, y=ys, name=label, mode="lines+markers"))
        what = "compute / communication / waiting" if len(axes) == 1 else "busy + waiting"
        fig.update_layout(
            title=f"Nodeset {name}: {what} per node against {axes[0]}",
            xaxis_title=axes[0],
            yaxis_title="seconds per node",
            xaxis_type="log" if log else None,
        )
        figs.append(fig)
    return figs


def _point_figures(go: Any, row: _Row, conf: float) -> list[Any]:
    """One point: a stacked bar per nodeset, and the makespan's prediction (and simulation)."""
    names = [p.nodeset for p in row.parts]
    bars = go.Figure()
    for field in ("compute", "communication", "waiting"):
        bars.add_trace(go.Bar(x=names, y=[getattr(p, field) for p in row.parts], name=field))
    bars.update_layout(
        barmode="stack", title="Seconds per node, per nodeset", yaxis_title="seconds per node"
    )
    figs = [bars]
    if row.simulated:
        ms = go.Figure()
        ms.add_trace(go.Box(y=list(row.simulated), name="simulated", boxpoints="all"))
        ms.add_trace(
            go.Scatter(
                x=["predicted"],
                y=[row.mean],
                name="predicted mean",
                mode="markers",
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [row.upper - row.mean],
                    "arrayminus": [row.mean - row.lower],
                },
            )
        )
        ms.update_layout(
            title=f"Makespan: simulated starts and the predicted {conf:.0%} interval",
            yaxis_title="makespan (s)",
        )
        figs.append(ms)
    return figs


def plotted_axes(axes: Sequence[str], together: Sequence[Sequence[str]]) -> list[str]:
    """The swept fields that vary on their own: every one but those that follow another in a
    ``[sweep] together`` group (a group is one axis of the two a plot can show)."""
    followers = {label for group in together for label in group[1:]}
    return [a for a in axes if a not in followers]


#: The x axis of a group none of whose fields tells its steps apart (``[0, 32, 32]`` beside
#: ``[1, 1, 2]``): the step's number, from 1.
STEP = "step"


def _plot_rows(
    rows: Sequence[_Row], axes: Sequence[str], together: Sequence[Sequence[str]]
) -> tuple[list[_Row], list[str]]:
    """The rows with their values cut to the plotted axes: a group's first field whose values
    tell its steps apart (the table shows the others), else its step number."""
    values = [dict(r.values) for r in rows]
    groups = {g[0]: tuple(g) for g in together}
    out_axes: list[str] = []
    columns: list[list[Any]] = []
    for label in plotted_axes(axes, together):
        group = groups.get(label, (label,))
        steps = [tuple(v[x] for x in group) for v in values]
        order = {t: k + 1 for k, t in enumerate(dict.fromkeys(steps))}
        lead = next((x for x in group if len({v[x] for v in values}) == len(order)), None)
        out_axes.append(STEP if lead is None else lead)
        columns.append([order[t] for t in steps] if lead is None else [v[lead] for v in values])
    plotted = [
        replace(r, values=tuple(zip(out_axes, (c[i] for c in columns), strict=True)))
        for i, r in enumerate(rows)
    ]
    return plotted, out_axes


def _figures(
    rows: Sequence[_Row], all_axes: Sequence[str], conf: float, together: Sequence[Sequence[str]]
) -> list[Any]:
    import plotly.graph_objects as go

    rows, axes = _plot_rows(rows, all_axes, together)
    if not rows or len(axes) > 2:
        return []
    if not axes or len(rows) == 1:
        return _point_figures(go, rows[0], conf)
    return [_makespan_figure(go, rows, axes, conf), *_breakdown_figures(go, rows, axes)]


def figures(report: Report | SimReport) -> list[Any]:
    """The page's plotly figures (none for more than two swept fields: the table says it)."""
    return _figures(_rows(report), list(report.axes), report.options.confidence, report.together)


def figures_json(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The same figures from a report's JSON, as plotly JSON (``data`` and ``layout``, without
    plotly's default template) for a page that draws them with its own plotly.js."""
    rows = _rows_of_dict(report)
    out = []
    axes, together = list(report.get("axes", [])), report.get("together", [])
    for fig in _figures(rows, axes, float(report["confidence"]), together):
        spec = json.loads(fig.to_json())
        spec.get("layout", {}).pop("template", None)
        out.append({"data": spec.get("data", []), "layout": spec.get("layout", {})})
    return out


def _notes(report: Report | SimReport) -> list[str]:
    if isinstance(report, SimReport):
        return list(dict.fromkeys(x for p in report.points for x in p.notes))
    return report_notes(report)


def render_html(report: Report | SimReport, platform_notes: Sequence[str] = ()) -> str:
    """The whole page; every text from the spec or the report is escaped."""
    head, rows = sim_table_rows(report) if isinstance(report, SimReport) else table_rows(report)
    title = report.title or report.source
    what = (
        f"simulated at {report.sim.starts} start time(s), seed {report.sim.seed}, "
        if isinstance(report, SimReport)
        else ""
    )
    summary = (
        f"{report.source}: {what}strategy {report.options.strategy}, confidence "
        f"{report.options.confidence:g}, {len(report.points)} point(s)"
    )
    parts = [f"<p>{html.escape(summary)}</p>", html_table(head, rows)]
    swept = len(plotted_axes(report.axes, report.together))
    if swept > 2:
        parts.append(
            f"<p>{swept} independent swept fields: the table only (plots show at most two).</p>"
        )
    parts.append(figures_html(figures(report)))
    notes = [*_notes(report), *platform_notes]
    if notes:
        items = "".join(f"<li>{html.escape(n)}</li>" for n in dict.fromkeys(notes))
        parts.append(f"<h2>Notes</h2><ul>{items}</ul>")
    return page(title, "".join(parts))
