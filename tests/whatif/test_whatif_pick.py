"""Traces picked from a folder (``load = {kind = "traces", dir, pick = "quietest", count}``) and
the README's worked example (examples/whatif/bitbrains*.toml)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ppe.whatif import LoadTrace, Problem, SpecError, evaluate, parse_spec, resolve
from ppe.whatif.html import figures, render_html
from ppe.whatif.resolve import pick_quietest
from ppe.whatif_cli import FileResolver
from ppe.whatif_cli import main as whatif_main

from .conftest import MemoryResolver, cluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "whatif"
DAY = 86400.0


def _write(folder: Path, name: str, values: list[float]) -> None:
    """A ``timestamp,value`` trace of availabilities, one sample every 300 s over 2 days."""
    ts = np.arange(0.0, 2 * DAY, 300.0)
    vals = np.resize(np.array(values), ts.size)
    folder.joinpath(name).write_text(
        "".join(f"{t:.0f},{v}\n" for t, v in zip(ts, vals, strict=True))
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Five small traces and a file that is not one: means 0.5, 0.95 (noisy), 0.99, 0.95
    (steady: the tie with the noisy one goes to it), 0.7."""
    d = tmp_path / "traces" / "hosts"
    d.mkdir(parents=True)
    _write(d, "a.csv", [0.5])
    _write(d, "b.csv", [0.9, 1.0])
    _write(d, "c.csv", [0.99])
    _write(d, "d.csv", [0.95])
    _write(d, "e.csv", [0.6, 0.8])
    d.joinpath("notes.md").write_text("not a trace\n")
    return tmp_path


def _spec(load: str, number: int = 6) -> str:
    return cluster(number=number, load=load, n=600, iterations=5)


def _problems(text: str, resolver: object | None = None) -> list[Problem]:
    with pytest.raises(SpecError) as info:
        whatif = parse_spec(text, "s.toml")
        resolve(whatif, resolver)  # type: ignore[arg-type]
    return info.value.problems


def test_quietest_picks_the_highest_mean_availability_ties_to_the_steadier(folder: Path) -> None:
    load = '{kind = "traces", dir = "traces/hosts", pick = "quietest", count = 3}'
    whatif = parse_spec(_spec(load), "s.toml")
    resources = resolve(whatif, FileResolver(folder))
    assert resources.picked[0] == ("traces/hosts/c.csv", "traces/hosts/d.csv", "traces/hosts/b.csv")
    assert set(resources.traces) == set(resources.picked[0])  # the others are not loads
    assert "the 3 quietest of 5 traces in 'traces/hosts'" in resources.notes[0]
    assert "c (0.990 ± 0.000), d (0.950 ± 0.000), b (0.950 ± 0.050)" in resources.notes[0]
    # the nodes run on them round-robin: 6 nodes, two per file
    report = evaluate(whatif, FileResolver(folder))
    (point,) = report.points
    assert point.hosts == 6 and resources.notes[0] in point.notes


def test_pick_all_takes_every_trace_file_of_the_folder(folder: Path) -> None:
    whatif = parse_spec(_spec('{kind = "traces", dir = "traces/hosts"}'), "s.toml")
    resources = resolve(whatif, FileResolver(folder))
    assert [Path(r).name for r in resources.picked[0]] == [f"{c}.csv" for c in "abcde"]


def test_a_pick_before_a_time_sees_only_the_samples_before_it() -> None:
    ts = np.arange(0.0, 4 * DAY, 300.0)
    early = ts < DAY
    quiet_then_busy = LoadTrace("x", ts, np.where(early, 1.0, 0.2))
    busy_then_quiet = LoadTrace("y", ts, np.where(early, 0.6, 1.0))
    traces = {"f/x.csv": quiet_then_busy, "f/y.csv": busy_then_quiet}
    assert [p.ref for p in pick_quietest(traces, 1)[0]] == ["f/y.csv"]  # over the whole record
    assert [p.ref for p in pick_quietest(traces, 1, before=DAY)[0]] == ["f/x.csv"]
    # the simulated path's resolve picks from the data before its first possible start
    load = '{kind = "traces", dir = "f", pick = "quietest", count = 1}'
    whatif = parse_spec(_spec(load), "s.toml")
    assert resolve(whatif, MemoryResolver(traces=traces)).picked[0] == ("f/y.csv",)
    sim = resolve(whatif, MemoryResolver(traces=traces), pick_warmup=DAY)
    assert sim.picked[0] == ("f/x.csv",)
    assert "the samples before 86400 s" in sim.notes[0]


def test_a_trace_with_no_sample_before_the_cutoff_is_not_a_candidate() -> None:
    ts = np.arange(0.0, 4 * DAY, 300.0)
    traces = {
        "f/late.csv": LoadTrace("late", ts + 2 * DAY, np.ones(ts.size)),
        "f/busy.csv": LoadTrace("busy", ts, np.full(ts.size, 0.3)),
    }
    picked, ranked = pick_quietest(traces, 2, before=DAY)
    assert [p.ref for p in picked] == ["f/busy.csv"] and len(ranked) == 1
    load = '{kind = "traces", dir = "f", pick = "quietest", count = 2}'
    text = _spec(load)
    with pytest.raises(SpecError) as info:
        resolve(parse_spec(text, "s.toml"), MemoryResolver(traces=traces), pick_warmup=DAY)
    (p,) = info.value.problems
    assert p.field == "nodeset[0].load.count"
    assert "holds 1 trace(s) with samples in the first 86400 s" in p.message


@pytest.mark.parametrize(
    ("load", "field", "message"),
    [
        (
            '{kind = "traces", dir = "f", pick = "quitest", count = 2}',
            "nodeset[0].load.pick",
            "unknown pick 'quitest'; expected one of quietest, all; did you mean 'quietest'?",
        ),
        (
            '{kind = "traces", dir = "f", pick = "quietest"}',
            "nodeset[0].load",
            "needs count",
        ),
        (
            '{kind = "traces", dir = "f", pick = "quietest", count = 0}',
            "nodeset[0].load.count",
            "count must be >= 1, got 0",
        ),
        (
            '{kind = "traces", dir = "f", pick = "quietest", count = 2.5}',
            "nodeset[0].load.count",
            "whole number",
        ),
        ('{kind = "traces", dir = "f", count = 2}', "nodeset[0].load.count", "goes with pick"),
        (
            '{kind = "traces", files = ["a.csv"], dir = "f"}',
            "nodeset[0].load",
            "give one",
        ),
        ('{kind = "traces"}', "nodeset[0].load", "'files' (a list of trace files) or 'dir'"),
        (
            '{kind = "traces", files = ["a.csv"], pick = "quietest"}',
            "nodeset[0].load.pick",
            "picks from a 'dir'",
        ),
        ('{kind = "traces", dir = 3}', "nodeset[0].load.dir", "must be a string"),
        (
            '{kind = "traces", dir = "f", pick = "quietest", cuont = 2}',
            "nodeset[0].load.cuont",
            "did you mean 'count'?",
        ),
    ],
)
def test_bad_picks_are_refused_at_their_line(load: str, field: str, message: str) -> None:
    text = _spec(load)
    found = _problems(text)
    assert any(p.field == field and message in p.message for p in found), found
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("load ="))
    assert all(p.line == line for p in found), found


def test_a_missing_folder_or_too_few_traces_is_a_problem_at_its_field(folder: Path) -> None:
    text = _spec('{kind = "traces", dir = "traces/nope", pick = "quietest", count = 2}')
    (p,) = _problems(text, FileResolver(folder))
    assert p.field == "nodeset[0].load.dir" and "cannot list it: no such folder" in p.message
    text = _spec('{kind = "traces", dir = "traces/hosts", pick = "quietest", count = 9}')
    (p,) = _problems(text, FileResolver(folder))
    assert p.field == "nodeset[0].load.count"
    assert p.message == "count = 9, but 'traces/hosts' holds 5 trace(s)"
    assert p.line is not None and p.column is not None
    empty = folder / "traces" / "empty"
    empty.mkdir()
    (p,) = _problems(_spec('{kind = "traces", dir = "traces/empty"}'), FileResolver(folder))
    assert p.field == "nodeset[0].load.dir" and "holds no trace files" in p.message


# --------------------------------------------------------------- the README's worked example


def _example(name: str) -> tuple[list[dict[str, object]], list[str]]:
    path = EXAMPLES / name
    whatif = parse_spec(path.read_text(), str(path))
    report = evaluate(whatif, FileResolver(path.parent))
    out = []
    for p in report.points:
        by = {n.nodeset: n for n in p.nodesets}
        out.append(
            {
                "values": dict(p.values),
                "mean": p.makespan.mean(),
                "hosts": p.hosts,
                "comm": {k: n.communication for k, n in by.items()},
            }
        )
    return out, [n for p in report.points for n in p.notes]


def test_the_worked_example_now_plus_32_quiet_and_a_network_twice_as_fast() -> None:
    (now,), _ = _example("bitbrains.toml")
    more, notes = _example("bitbrains-more.toml")
    faster, _ = _example("bitbrains-more-2x.toml")
    assert now["hosts"] == 9
    for sweep in (more, faster):
        assert [p["values"] for p in sweep] == [{"nodeset.quiet.number": n} for n in (8, 16, 32)]
        assert [p["hosts"] for p in sweep] == [17, 25, 41]
    # the 3 quietest of the sample's 11 VMs: the idle 2, the steady 4 and 1
    assert any("the 3 quietest of 11 traces" in n and ": 2 (1.000" in n for n in notes), notes
    assert any(", 4 (0.992" in n and ", 1 (0.884" in n for n in notes), notes
    # more quiet hosts: faster at every step, and +32 several times faster than now
    means = [float(p["mean"]) for p in more]  # type: ignore[arg-type]
    assert means == sorted(means, reverse=True)
    assert means[-1] < float(now["mean"]) / 3  # type: ignore[arg-type]
    # twice the bandwidth: less communication (its latency part stays), a faster run
    for slow, fast in zip(more, faster, strict=True):
        for name, comm in slow["comm"].items():  # type: ignore[attr-defined]
            assert comm / 2 < fast["comm"][name] < comm  # type: ignore[index]
        assert float(fast["mean"]) < float(slow["mean"])  # type: ignore[arg-type]


def test_the_simulated_path_runs_on_the_picked_traces_and_says_from_which_window(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = folder / "s.toml"
    spec.write_text(_spec('{kind = "traces", dir = "traces/hosts", pick = "quietest", count = 2}'))
    assert (
        whatif_main([str(spec), "--simulate", "--starts", "2", "--out", str(folder / "r.json")])
        == 0
    )
    out = capsys.readouterr().out
    assert "simulated at 2 start time(s)" in out
    assert "note: nodeset 'node': the 2 quietest of 5 traces in 'traces/hosts'" in out
    assert "over the samples before 86400 s): c (0.990 ± 0.000), d (0.950 ± 0.000)" in out


def test_the_worked_example_as_one_spec_answers_as_its_three_specs() -> None:
    """bitbrains-scenarios.toml: number = 0, 32, 32 and the links' bandwidths swept together
    give the three specs' predictions, point by point, to the last digit."""
    (now,), _ = _example("bitbrains.toml")
    more, _ = _example("bitbrains-more.toml")
    faster, _ = _example("bitbrains-more-2x.toml")
    scenarios, _ = _example("bitbrains-scenarios.toml")
    assert [p["hosts"] for p in scenarios] == [9, 41, 41]
    assert [p["mean"] for p in scenarios] == [now["mean"], more[-1]["mean"], faster[-1]["mean"]]
    assert scenarios[0]["comm"] == now["comm"]  # the quiet nodeset and its links: absent
    report = evaluate(
        parse_spec((EXAMPLES / "bitbrains-scenarios.toml").read_text(), "s"),
        FileResolver(EXAMPLES),
    )
    page = render_html(report)
    assert "Nodeset quiet" in page and "Nodeset now" in page
    # no field of the group tells the steps apart (0, 32, 32 and 1, 1, 2 Gb/s): plotted by step
    (mean,) = [t for t in figures(report)[0].data if t.name == "predicted mean"]
    assert list(mean.x) == [1, 2, 3] and figures(report)[0].layout.xaxis.title.text == "step"
