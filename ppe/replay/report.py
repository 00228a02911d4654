"""Replay reports: the JSON shape of docs/architecture.md, a text table, a self-contained HTML page.

Metrics per strategy (over the cases of a group):

- ``makespan_mean``, ``makespan_p50``, ``makespan_p95``: actual (simulated) makespan, s;
- ``vs_oracle``: mean over cases of actual / oracle makespan (1 = as good as knowing
  the future); ``vs_oracle_of_means``: mean makespan / mean oracle makespan;
  ``vs_balance_oracle``: mean makespan / mean makespan of balancing on each host's true
  run-average availability (a weaker oracle: a perfect horizon forecast; see oracle.py);
- ``coverage``: share of cases whose actual makespan lies inside the predicted central
  interval at the configured confidence (with ``COVER_RTOL`` relative slack for
  round-off);
- ``mae_rel``: mean of |predicted mean - actual| / actual; ``bias_rel`` the signed mean;
- ``n``, ``failed``: cases scored, plans that failed (scored as equal strips, left out of
  coverage and error).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ppe.htmlpage import figures_html, page
from ppe.replay.cases import Case, CasePlan, HostData
from ppe.replay.config import ReplayConfig
from ppe.replay.oracle import OracleResult

#: Relative slack when testing ``lo <= actual <= hi``: steady hosts give point-like
#: predictions that the simulator reproduces up to float64 round-off (~1e-9).
COVER_RTOL = 1e-6


def _stats(
    actual: np.ndarray,
    oracle: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    mean: np.ndarray,
    ok: np.ndarray,
    balance: np.ndarray,
) -> dict[str, Any]:
    if actual.size == 0:
        return {"n": 0}
    inside = (actual >= lo * (1 - COVER_RTOL)) & (actual <= hi * (1 + COVER_RTOL))
    rel = (mean - actual) / actual
    okn = int(ok.sum())
    return {
        "n": int(actual.size),
        "failed": int(actual.size - okn),
        "makespan_mean": float(actual.mean()),
        "makespan_p50": float(np.percentile(actual, 50)),
        "makespan_p95": float(np.percentile(actual, 95)),
        "vs_oracle": float(np.mean(actual / oracle)),
        "vs_oracle_of_means": float(actual.mean() / oracle.mean()),
        "vs_balance_oracle": float(actual.mean() / balance.mean()),
        "coverage": float(inside[ok].mean()) if okn else None,
        "mae_rel": float(np.abs(rel[ok]).mean()) if okn else None,
        "bias_rel": float(rel[ok].mean()) if okn else None,
    }


def _oracle_stats(oracle: np.ndarray, balance: np.ndarray) -> dict[str, Any]:
    if oracle.size == 0:
        return {"n": 0}
    return {
        "n": int(oracle.size),
        "makespan_mean": float(oracle.mean()),
        "makespan_p50": float(np.percentile(oracle, 50)),
        "makespan_p95": float(np.percentile(oracle, 95)),
        "balance_makespan_mean": float(balance.mean()),
    }


def _sources(source: Sequence[str], strategies: Sequence[str]) -> dict[str, int]:
    """How often each oracle search step (or strategy candidate) gave the best schedule."""
    out: dict[str, int] = {}
    for s in source:
        if s.startswith("candidate-"):
            s = "strategy:" + strategies[int(s.split("-")[1])]
        out[s] = out.get(s, 0) + 1
    return dict(sorted(out.items()))


def build_report(
    config: ReplayConfig,
    cases: Sequence[Case],
    hosts: Sequence[HostData],
    plans: Sequence[CasePlan],
    actual: Mapping[str, np.ndarray],
    oracle: OracleResult,
    timing: Mapping[str, Any],
) -> dict[str, Any]:
    """The report dict: ``config``, ``strategies``, ``by_mode``, ``oracle``, ``runs``."""
    multi = np.array([any(p.multimode.values()) for p in plans], dtype=bool)
    orc = np.asarray(oracle.makespan, dtype=float)
    bal = orc if oracle.balance_makespan is None else np.asarray(oracle.balance_makespan)
    groups = {"all": np.ones(len(cases), dtype=bool), "single": ~multi, "multi": multi}
    table: dict[str, dict[str, dict[str, Any]]] = {g: {} for g in groups}
    for s in config.reported():
        outs = [p.outcomes[s] for p in plans]
        arr = {
            k: np.array([getattr(o, k) for o in outs], dtype=float) for k in ("mean", "lo", "hi")
        }
        ok = np.array([o.error is None for o in outs], dtype=bool)
        for g, mask in groups.items():
            table[g][s] = _stats(
                actual[s][mask],
                orc[mask],
                arr["lo"][mask],
                arr["hi"][mask],
                arr["mean"][mask],
                ok[mask],
                bal[mask],
            )
    cfg = config.to_flat()
    cfg.update(
        {
            "traces_used": len(hosts),
            "cases": len(cases),
            "multi_mode_cases": int(multi.sum()),
            "timing": dict(timing),
        }
    )
    report: dict[str, Any] = {
        "config": cfg,
        "strategies": table["all"],
        "by_mode": {"single": table["single"], "multi": table["multi"]},
        "oracle": {
            "all": _oracle_stats(orc, bal),
            "single": _oracle_stats(orc[~multi], bal[~multi]),
            "multi": _oracle_stats(orc[multi], bal[multi]),
            "found_by": _sources(oracle.source, config.strategies),
        },
        "runs": [],
    }
    if config.include_runs:
        report["runs"] = _runs(config, cases, hosts, plans, actual, oracle, multi)
    return report


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _runs(
    config: ReplayConfig,
    cases: Sequence[Case],
    hosts: Sequence[HostData],
    plans: Sequence[CasePlan],
    actual: Mapping[str, np.ndarray],
    oracle: OracleResult,
    multi: np.ndarray,
) -> list[dict[str, Any]]:
    runs = []
    for i, (c, p) in enumerate(zip(cases, plans, strict=True)):
        names = [hosts[h].name for h in c.hosts]
        for s in config.reported():
            o = p.outcomes[s]
            runs.append(
                {
                    "start": c.start,
                    "hosts": names,
                    "strategy": s,
                    "rows": list(o.rows),
                    "predicted": {
                        "mean": _num(o.mean),
                        "std": _num(o.std),
                        "interval": [_num(o.lo), _num(o.hi)],
                        "confidence": config.plan.confidence,
                    },
                    "actual": float(actual[s][i]),
                    "oracle": float(oracle.makespan[i]),
                    "multimode": bool(multi[i]),
                    "multimode_hosts": [n for n in names if p.multimode.get(n)],
                    "horizon_s": _num(o.horizon_s),
                    "rounds": o.rounds,
                    "error": o.error,
                    **({"replans": o.replans} if s not in config.strategies else {}),
                }
            )
    return runs


# --------------------------------------------------------------------------- text


def format_table(report: Mapping[str, Any]) -> str:
    """Plain-text strategy table (all cases, then single- and multi-mode)."""
    lines = []
    head = (
        f"{'group':<7}{'strategy':<14}{'n':>5}{'mean s':>10}{'p50 s':>10}{'p95 s':>10}"
        f"{'vs orc':>8}{'mean/orc':>9}{'mean/bal':>9}{'cover':>7}{'mae':>7}{'bias':>7}"
    )
    lines.append(head)
    groups = [
        ("all", report["strategies"]),
        ("single", report["by_mode"]["single"]),
        ("multi", report["by_mode"]["multi"]),
    ]
    for g, table in groups:
        orc = report.get("oracle", {}).get(g, {})
        if orc.get("n"):
            lines.append(
                f"{g:<7}{'(oracle)':<14}{orc['n']:>5}{orc['makespan_mean']:>10.0f}"
                f"{orc['makespan_p50']:>10.0f}{orc['makespan_p95']:>10.0f}"
            )
        for s, st in table.items():
            if not st.get("n"):
                continue

            def pct(x: float | None) -> str:
                return "   -" if x is None else f"{x:7.3f}"

            lines.append(
                f"{g:<7}{s:<14}{st['n']:>5}{st['makespan_mean']:>10.0f}{st['makespan_p50']:>10.0f}"
                f"{st['makespan_p95']:>10.0f}{st['vs_oracle']:>8.3f}{st['vs_oracle_of_means']:>9.3f}"
                f"{st['vs_balance_oracle']:>9.3f}"
                f"{pct(st['coverage'])}{pct(st['mae_rel'])}{pct(st['bias_rel'])}"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- html


def _figures(report: Mapping[str, Any]) -> list[Any]:
    import plotly.graph_objects as go

    runs = report["runs"]
    strategies = list(report["strategies"])
    figs = []
    box = go.Figure()
    for s in strategies:
        ys = [r["actual"] for r in runs if r["strategy"] == s]
        box.add_trace(go.Box(y=ys, name=s, boxmean=True))
    seen: dict[float, float] = {}
    for r in runs:
        seen.setdefault(r["start"], r["oracle"])
    box.add_trace(go.Box(y=list(seen.values()), name="oracle", boxmean=True))
    box.update_layout(
        title="Actual makespan per strategy",
        yaxis_title="seconds",
        yaxis_type="log",
        showlegend=False,
    )
    figs.append(box)

    ratio = go.Figure()
    for s in strategies:
        ys = [r["actual"] / r["oracle"] for r in runs if r["strategy"] == s]
        ratio.add_trace(go.Box(y=ys, name=s, boxmean=True))
    ratio.update_layout(title="Actual / oracle makespan", yaxis_type="log", showlegend=False)
    figs.append(ratio)

    over = go.Figure()
    for j, s in enumerate(strategies):
        rs = sorted(
            (r for r in runs if r["strategy"] == s and r["error"] is None), key=lambda r: r["start"]
        )
        x = [r["start"] for r in rs]
        mean = [r["predicted"]["mean"] for r in rs]
        lo = [r["predicted"]["interval"][0] for r in rs]
        hi = [r["predicted"]["interval"][1] for r in rs]
        vis: bool | str = True if j == 0 else "legendonly"
        over.add_trace(
            go.Scatter(
                x=x,
                y=mean,
                mode="markers",
                name=f"{s}: predicted",
                legendgroup=s,
                visible=vis,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [h - m for h, m in zip(hi, mean, strict=True)],
                    "arrayminus": [m - v for m, v in zip(mean, lo, strict=True)],
                },
            )
        )
        over.add_trace(
            go.Scatter(
                x=x,
                y=[r["actual"] for r in rs],
                mode="markers",
                name=f"{s}: actual",
                legendgroup=s,
                visible=vis,
                marker={"symbol": "x"},
            )
        )
    over.update_layout(
        title="Predicted interval against actual makespan over start time",
        xaxis_title="start (Unix s)",
        yaxis_title="seconds",
        yaxis_type="log",
    )
    figs.append(over)
    return figs


def _cell(v: Any) -> str:
    if v is None:
        return ""
    return f"{v:.3f}" if isinstance(v, float) else html.escape(str(v))


def _html_table(report: Mapping[str, Any]) -> str:
    cols = [
        "n",
        "failed",
        "makespan_mean",
        "makespan_p50",
        "makespan_p95",
        "vs_oracle",
        "vs_oracle_of_means",
        "vs_balance_oracle",
        "coverage",
        "mae_rel",
        "bias_rel",
    ]
    rows = []
    groups = [
        ("all", report["strategies"]),
        ("single", report["by_mode"]["single"]),
        ("multi", report["by_mode"]["multi"]),
    ]
    for g, table in groups:
        for s, st in table.items():
            cells = "".join(f"<td>{_cell(st.get(c))}</td>" for c in cols)
            rows.append(f"<tr><td>{g}</td><td>{html.escape(s)}</td>{cells}</tr>")
    head = "".join(f"<th>{c}</th>" for c in ["group", "strategy", *cols])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render_html(report: Mapping[str, Any]) -> str:
    """A self-contained page: plotly.js inlined from the installed package (no CDN)."""
    cfg = html.escape(json.dumps(report["config"], indent=1, default=str))
    body = f"{_html_table(report)}{figures_html(_figures(report))}"
    return page("PPE replay report", f"{body}<h2>Configuration</h2><pre>{cfg}</pre>")


def write_report(report: Mapping[str, Any], out: str | None, html_out: str | None) -> None:
    """Write the JSON report and/or the HTML page."""
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1, allow_nan=False)
    if html_out:
        with open(html_out, "w", encoding="utf-8") as fh:
            fh.write(render_html(report))
