"""`ppe whatif --html`: one self-contained page (plotly.js inlined, no script from the
network) whose plots carry the sweep's x values, the predicted means and the interval as a
band, with every text from the spec escaped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from plotly.offline import get_plotlyjs

from ppe.cli import main as ppe_main
from ppe.whatif import evaluate
from ppe.whatif.html import figures, figures_json, render_html
from ppe.whatif.simulated import SimOptions, simulate_whatif
from ppe.whatif_cli import FileResolver

from .conftest import MemoryResolver, cluster, parse, two_nodesets

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "examples/traces/bitbrains-sample"


def _by_name(fig: object) -> dict[str, object]:
    return {t.name: t for t in fig.data}  # type: ignore[attr-defined]


def _sweep_report(title: str = "test cluster") -> object:
    text = cluster(number="2..8", n=400).replace('title = "test cluster"', f"title = {title!r}")
    w = parse(text)
    return evaluate(w, MemoryResolver())


def test_a_sweep_plots_the_mean_inside_its_band_on_a_log_axis() -> None:
    report = _sweep_report()
    fig = figures(report)[0]  # type: ignore[arg-type]
    traces = _by_name(fig)
    upper, lower, mean = (traces[f"predicted {k}"] for k in ("upper", "lower", "mean"))
    assert list(mean.x) == [2.0, 4.0, 8.0]  # type: ignore[attr-defined]
    assert list(upper.x) == list(lower.x) == list(mean.x)  # type: ignore[attr-defined]
    expected = [p.makespan.mean() for p in report.points]  # type: ignore[attr-defined]
    assert list(mean.y) == pytest.approx(expected)  # type: ignore[attr-defined]
    assert lower.fill == "tonexty"  # type: ignore[attr-defined]
    for lo, m, hi in zip(lower.y, mean.y, upper.y, strict=True):  # type: ignore[attr-defined]
        assert lo <= m <= hi
    assert fig.layout.xaxis.type == "log"
    breakdown = figures(report)[1]  # type: ignore[arg-type]
    assert set(_by_name(breakdown)) == {"compute", "communication", "waiting"}


def test_an_arithmetic_sweep_keeps_a_linear_axis() -> None:
    report = evaluate(parse(cluster(n="400..1200 +400")), MemoryResolver())
    assert figures(report)[0].layout.xaxis.type is None


def test_the_page_is_self_contained() -> None:
    page = render_html(_sweep_report())  # type: ignore[arg-type]
    assert get_plotlyjs() in page
    assert not re.search(r"""<script[^>]*\bsrc\s*=\s*["']?https?:""", page, re.IGNORECASE)
    assert "mean s" in page and "compute/comm/wait s" in page  # the CLI's table


def test_text_from_the_spec_is_escaped() -> None:
    page = render_html(_sweep_report("<script>alert(1)</script>"))  # type: ignore[arg-type]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page


def test_one_point_is_a_stacked_bar_per_nodeset() -> None:
    report = evaluate(parse(two_nodesets()), MemoryResolver())
    bars = figures(report)[0]
    assert bars.layout.barmode == "stack"
    assert [list(t.x) for t in bars.data] == [["fast", "slow"]] * 3


def test_two_swept_fields_draw_one_line_per_value_of_the_second() -> None:
    report = evaluate(parse(cluster(number="2..4", n="400..800")), MemoryResolver())
    names = set(_by_name(figures(report)[0]))
    assert {"dataset.grid.size=400 predicted mean", "dataset.grid.size=800 predicted mean"} <= names


def test_more_than_two_swept_fields_are_a_table_only() -> None:
    text = cluster(number="2..4", n="400..800", iterations=10).replace(
        "iterations = 10", "iterations = [5, 10]"
    )
    report = evaluate(parse(text), MemoryResolver())
    assert figures(report) == []
    assert "the table only" in render_html(report)


def test_a_simulated_sweep_shows_the_simulation_beside_the_prediction() -> None:
    load = '{kind = "traces", files = ["2.csv.gz", "4.csv.gz"]}'
    w = parse(cluster(number="2..4", n=400, load=load))
    report = simulate_whatif(w, FileResolver(TRACES), sim=SimOptions(starts=2))
    traces = _by_name(figures(report)[0])
    for name in ("predicted upper", "predicted lower", "simulated upper", "simulated lower"):
        assert list(traces[name].x) == [2.0, 4.0]  # type: ignore[attr-defined]
    points = traces["simulated per start"]
    assert len(points.y) == 4  # type: ignore[attr-defined]
    assert "in analytic" in render_html(report)


def test_the_cli_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "whatif.html"
    spec = ROOT / "examples/whatif/heterogeneous.toml"
    assert ppe_main(["whatif", str(spec), "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and get_plotlyjs() in page
    assert "nodeset.fast.number" in page and "note:" not in page
    assert "<li>" in page  # the platform's notes, as a list
    assert "mean s" in capsys.readouterr().out  # the table is still printed


def _plain(fig: object) -> dict[str, object]:
    spec = json.loads(fig.to_json())  # type: ignore[attr-defined]
    spec["layout"].pop("template", None)
    return {"data": spec["data"], "layout": spec["layout"]}


def test_the_report_json_draws_the_same_figures_as_the_report() -> None:
    """What the dashboard draws from a stored job's JSON is what --html draws (one builder)."""
    for report in (
        _sweep_report(),
        evaluate(parse(cluster(number="2..4", n="400..800")), MemoryResolver()),
        evaluate(parse(two_nodesets()), MemoryResolver()),
    ):
        stored = json.loads(json.dumps(report.to_dict(), default=float))  # type: ignore[attr-defined]
        drawn = figures_json(stored)
        assert drawn == [_plain(f) for f in figures(report)]  # type: ignore[arg-type]
        assert drawn and all("template" not in f["layout"] for f in drawn)


def test_a_simulated_report_json_draws_the_same_figures() -> None:
    load = '{kind = "traces", files = ["2.csv.gz", "4.csv.gz"]}'
    w = parse(cluster(number="2..4", n=400, load=load))
    report = simulate_whatif(w, FileResolver(TRACES), sim=SimOptions(starts=2))
    stored = json.loads(json.dumps(report.to_dict(), default=float))
    assert figures_json(stored) == [_plain(f) for f in figures(report)]


def test_fields_swept_together_plot_as_one_axis() -> None:
    """Weak scaling: one line against the nodes (the size moves with them), not a line per
    size; the JSON figures agree."""
    text = cluster(number=[2, 4], n="400..800") + (
        '\n[sweep]\ntogether = [["nodeset.node.number", "dataset.grid.size"]]\n'
    )
    report = evaluate(parse(text), MemoryResolver())
    fig = figures(report)[0]
    assert list(_by_name(fig)["predicted mean"].x) == [2.0, 4.0]  # type: ignore[attr-defined]
    assert report.to_dict()["together"] == [["nodeset.node.number", "dataset.grid.size"]]
    js = figures_json(json.loads(json.dumps(report.to_dict())))
    assert [t["x"] for t in js[0]["data"] if t["name"] == "predicted mean"] == [[2.0, 4.0]]
