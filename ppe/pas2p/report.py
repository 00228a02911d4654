"""A signature as rows, as JSON and as a self-contained HTML page with the phases' timeline.

The page inlines plotly.js from the installed package (ppe/htmlpage.py), as the replay and
what-if pages do, so it opens offline.
"""

from __future__ import annotations

from typing import Any

from ppe.htmlpage import figures_html, html_table, page
from ppe.pas2p.phases import Phase, Signature

__all__ = ["HEAD", "render_html", "rows", "to_dict"]

HEAD = ("phase", "events", "weight", "time/occ (ms)", "sd (ms)", "share", "first at", "kept")

# Occurrence bars drawn per rank at most; beyond it the page shows each phase's first ones.
MAX_BARS = 20000


def rows(sig: Signature) -> list[tuple[str, ...]]:
    """One row per phase, heaviest first; ``first at``: segment #, logical tick, seconds."""
    kept = set(sig.kept)
    out: list[tuple[str, ...]] = []
    for p in sorted(sig.phases, key=lambda p: (-p.total, p.id)):
        out.append(
            (
                str(p.id),
                str(p.events),
                str(p.weight),
                f"{p.mean * 1e3:.4g}",
                f"{p.sd * 1e3:.3g}",
                f"{sig.share(p):.2%}",
                f"#{p.first} tick {p.first_tick} at {p.first_time:.4g} s",
                "yes" if p.id in kept else "",
            )
        )
    return out


def _phase(sig: Signature, p: Phase) -> dict[str, Any]:
    return {
        "id": p.id,
        "pattern": p.pattern(),
        "events": p.events,
        "weight": p.weight,
        "mean_s": p.mean,
        "sd_s": p.sd,
        "share": sig.share(p),
        "compute_s": p.volume,
        "first": {
            "occurrence": p.first,
            "tick": p.first_tick,
            "time_s": p.first_time,
            "step": p.first_step,
        },
        "step": p.typical_step,
        "kept": p.id in sig.kept,
    }


def to_dict(sig: Signature) -> dict[str, Any]:
    return {
        "ranks": sig.ranks,
        "anchor_rank": sig.anchor_rank,
        "keep": sig.keep,
        "tolerance": sig.tolerance,
        "occurrences": len(sig.occurrences),
        "phases": [_phase(sig, p) for p in sig.phases],
        "signature": sig.kept,
        "kept_share": sig.kept_share,
        "traced_s": sig.total,
        "predicted_s": sig.predicted,
        "error": sig.error,
    }


def timeline(sig: Signature) -> Any:
    """Per rank, each occurrence as a bar from its rank's first event to its last, by phase."""
    import plotly.graph_objects as go

    fig = go.Figure()
    kept = set(sig.kept)
    per_phase: dict[int, tuple[list[float], list[float], list[str], list[str]]] = {}
    drawn = 0
    for n, occ in enumerate(sig.occurrences):
        for rank, (lo, hi) in sorted(occ.spans.items()):
            if drawn >= MAX_BARS * sig.ranks and n != sig.phases[occ.phase].first:
                continue
            base, width, ys, text = per_phase.setdefault(occ.phase, ([], [], [], []))
            base.append(lo)
            width.append(max(hi - lo, 0.0))
            ys.append(f"rank {rank}")
            text.append(f"phase {occ.phase} #{n} ticks {occ.tick}-{occ.tick_end - 1}")
            drawn += 1
    for pid in sorted(per_phase):
        base, width, ys, text = per_phase[pid]
        p = sig.phases[pid]
        fig.add_trace(
            go.Bar(
                x=width,
                y=ys,
                base=base,
                orientation="h",
                name=f"phase {pid} (x{p.weight}){'' if pid in kept else ' dropped'}",
                hovertext=text,
                opacity=1.0 if pid in kept else 0.5,
            )
        )
    fig.update_layout(
        barmode="overlay",
        title="Phases over the run (seconds from its start)",
        xaxis_title="seconds",
        yaxis={"autorange": "reversed"},
        height=220 + 40 * sig.ranks,
    )
    return fig


def render_html(sig: Signature, sources: list[str]) -> str:
    summary = (
        f"<p>{len(sig.occurrences)} occurrences of {len(sig.phases)} phases over "
        f"{sig.ranks} ranks; the signature keeps {len(sig.kept)} phases carrying "
        f"{sig.kept_share:.2%} of the run (asked: {sig.keep:.2%}). Traced {sig.total:.6g} s, "
        f"predicted {sig.predicted:.6g} s (error {sig.error:+.2%}). Traces: "
        + ", ".join(sources)
        + "</p>"
    )
    patterns = html_table(("phase", "pattern"), [(str(p.id), p.pattern()) for p in sig.phases])
    body = summary + html_table(HEAD, rows(sig)) + figures_html([timeline(sig)]) + patterns
    return page("PAS2P phases", body)
