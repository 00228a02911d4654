"""Self-contained HTML report pages: plotly.js inlined from the installed plotly package (never
a CDN, so a page opens offline and years later), shared by ``ppe replay`` and ``ppe whatif``."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["figures_html", "html_table", "page"]

_STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
)


def figures_html(figures: Iterable[Any]) -> str:
    """Plotly figures as page fragments that rely on the page's one inlined plotly.js."""
    return "".join(f.to_html(full_html=False, include_plotlyjs=False) for f in figures)


def html_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of already formatted cells; every cell is escaped here."""
    th = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str) -> str:
    """The whole page around ``body`` (trusted HTML); ``title`` is escaped."""
    from plotly.offline import get_plotlyjs

    t = html.escape(title)
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{t}</title>"
        f"<style>{_STYLE}</style>"
        f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>{t}</h1>{body}</body></html>"
    )
