"""Reading runs from Extra-P's inputs (its own example files) and CSV; errors say where."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from ppe.empirical.formats import FormatError, detect_format, parse, parse_located
from ppe.empirical.runs import RunRecord

DATA = Path(__file__).with_name("data")
EXTRAP_FILES = {
    "extrap_input.txt": "extrap",
    "extrap_one_parameter_3.txt": "extrap",
    "extrap_experiment_MP.txt": "extrap",
    "extrap_input1.json": "extrap-json",
    "extrap_input_1_legacy.json": "extrap-json",
    "extrap_json_test_input.jsonl": "jsonl",
}


def read(name: str, **kw: Any) -> list[RunRecord]:
    return parse((DATA / name).read_bytes(), app=kw.pop("app", "demo"), **kw)


def table(records: list[RunRecord]) -> dict[tuple[str, str, tuple[float, ...]], list[float]]:
    return {(r.kernel, r.metric, tuple(r.params.values())): list(r.values) for r in records}


# ------------------------------------------------------------------ Extra-P's own files


def test_extrap_documentation_example() -> None:
    records = read("extrap_input.txt", system="h0,h1")
    assert [dict(r.params) for r in records] == [{"p": p} for p in (4, 8, 16, 32, 64)]
    assert {(r.app, r.kernel, r.metric, r.system) for r in records} == {
        ("demo", "example", "time", "h0,h1")
    }
    assert records[0].values == (8.31, 8.02, 8.14)
    assert records[-1].values == (528.86, 522.44, 531.78)


def test_several_metrics_and_regions() -> None:
    one = read("extrap_one_parameter_3.txt")
    assert [(r.metric, r.params["x"]) for r in one] == [
        (m, x) for m in ("time", "flops") for x in (20, 30, 40, 50, 60)
    ]
    assert {r.kernel for r in one} == {"compute"}
    mp = read("extrap_experiment_MP.txt")
    assert len(mp) == 4 * 25
    assert [r.kernel for r in mp[::25]] == ["met1", "met2", "met3", "met4"]  # "met1 " trimmed
    # points are listed p-fastest: the 7th point is (p=2000, n=2000)
    assert dict(mp[6].params) == {"p": 2000.0, "n": 2000.0}
    assert mp[25 + 4].values == (256.01, 255.99, 256.0, 256.0)  # 4 repetitions, not 5


def test_the_two_json_forms_and_json_lines_hold_what_the_text_says() -> None:
    new, legacy = read("extrap_input1.json"), read("extrap_input_1_legacy.json")
    assert table(new) == table(legacy)
    assert table(new)[("sweep", "time", (32.0,))] == [17.5] * 5
    lines = read("extrap_json_test_input.jsonl")
    text = read("extrap_one_parameter_3.txt")
    assert [r.values for r in lines] == [r.values for r in text if r.metric == "time"]
    assert {(r.kernel, r.metric) for r in lines} == {("total", "metr")}


@pytest.mark.parametrize("name", sorted(EXTRAP_FILES))
def test_extrap_reads_the_same_measurements(name: str) -> None:
    """Extra-P's own readers on the same file: the same points, kernels, metrics and values."""
    from extrap.fileio.file_reader.json_file_reader import JsonFileReader
    from extrap.fileio.file_reader.text_file_reader import TextFileReader

    reader = TextFileReader() if EXTRAP_FILES[name] == "extrap" else JsonFileReader()
    experiment = reader.read_experiment(str(DATA / name))
    theirs = {}
    for (callpath, metric), measurements in experiment.measurements.items():
        for m in measurements:
            kernel = {"": "total", "<root>": "total"}.get(callpath.name, callpath.name)
            metric_name = {"": "time", "<default>": "time"}.get(metric.name, metric.name)
            point = tuple(float(c) for c in m.coordinate)
            theirs[(kernel, metric_name, point)] = (m.mean, m.minimum, m.maximum)
    ours = {key: (statistics.fmean(v), min(v), max(v)) for key, v in table(read(name)).items()}
    assert ours.keys() == theirs.keys()
    for key, stats in ours.items():
        assert stats == pytest.approx(theirs[key], rel=1e-12), key


@pytest.mark.parametrize("name", sorted(EXTRAP_FILES))
def test_the_format_is_recognised(name: str) -> None:
    assert detect_format((DATA / name).read_text()) == EXTRAP_FILES[name]


# ------------------------------------------------------------------ Extra-P text forms

TWO_PARAMS = "PARAMETER n\nPARAMETER p\n{points}\nREGION solve\nDATA 1\nDATA 2\n"


@pytest.mark.parametrize(
    "points",
    [
        "POINTS ( 2 16 ) ( 4 32 )",
        "POINTS (2 16) (4 32)",
        "POINTS ((2) (16)) ((4) (32))",
        "POINTS ( 2 16 )\nPOINTS ( 4 32 )",
        "POINTS\t( 2\t16 )   ( 4 32 )  ",
    ],
)
def test_multi_parameter_points(points: str) -> None:
    records = parse(TWO_PARAMS.format(points=points), "extrap", app="a")
    assert [dict(r.params) for r in records] == [{"n": 2, "p": 16}, {"n": 4, "p": 32}]
    assert [r.values for r in records] == [(1.0,), (2.0,)]


def test_one_parameter_points_without_parentheses_comments_and_defaults() -> None:
    text = "# measured on h0\nPARAMETER n\n\nPOINTS 10 20 40\n# no REGION, no METRIC\nDATA 1 1.5\nDATA 2\nDATA 4e0\n"
    records = parse(text, app="a")
    assert [(r.kernel, r.metric, r.params["n"], r.values) for r in records] == [
        ("total", "time", 10, (1.0, 1.5)),
        ("total", "time", 20, (2.0,)),
        ("total", "time", 40, (4.0,)),
    ]


def test_a_region_may_hold_several_metrics() -> None:
    text = "PARAMETER n\nPOINTS 1 2\nREGION main->solve\nMETRIC time\nDATA 1\nDATA 2\nMETRIC bytes\nDATA 10\nDATA 20\n"
    got = [(r.kernel, r.metric, r.values[0]) for r in parse(text, app="a")]
    assert got == [
        ("main->solve", "time", 1),
        ("main->solve", "time", 2),
        ("main->solve", "bytes", 10),
        ("main->solve", "bytes", 20),
    ]


GOOD = "PARAMETER n\nPOINTS 1 2\nREGION r\nDATA 1\nDATA 2\n"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("PARAMETER n\nPOINTS 1 2\nREGION r\nDATA 1\nDATA 2\nDATA 3\n", 6, "DATA line 3"),
        (
            "PARAMETER n\nPOINTS 1 2 3\nREGION r\nDATA 1\nDATA 2\nREGION s\n",
            3,
            "2 DATA lines for 3",
        ),
        ("PARAMETER n\nPOINTS 1 2 3\nREGION r\nDATA 1\n", 3, "1 DATA lines for 3"),
        ("POINTS 1 2\nPARAMETER n\n", 1, "before any PARAMETER"),
        ("PARAMETER n\nPOINTS 1\nPARAMETER p\n", 3, "PARAMETER after POINTS"),
        ("PARAMETER n n\n", 1, "declared twice"),
        ("PARAMETER\n", 1, "names no parameter"),
        ("PARAMETER n p\nPOINTS ( 1 2 ) ( 3 )\n", 2, "1 coordinates, there are 2"),
        ("PARAMETER n p\nPOINTS 1 2\n", 2, "( x y ... )"),
        ("PARAMETER n\nPOINTS (1 (2)\n", 2, "'(' without ')'"),
        ("PARAMETER n\nPOINTS 1)\n", 2, "')' without '('"),
        ("PARAMETER n\nPOINTS (((1)))\n", 2, "nested too deep"),
        ("PARAMETER n\nPOINTS 1 two\n", 2, "'two' is not a number"),
        ("PARAMETER n\nPOINTS\n", 2, "lists no point"),
        ("PARAMETER n\nDATA 1\n", 2, "DATA before POINTS"),
        ("PARAMETER n\nPOINTS 1\nREGION r\nDATA 1 x2\n", 4, "'x2' is not a number"),
        ("PARAMETER n\nPOINTS 1\nREGION r\nDATA\n", 4, "DATA without values"),
        ("PARAMETER n\nPOINTS 1\nREGION\n", 3, "REGION without a name"),
        ("PARAMETER n\nPOINTS 1\nREGION r\nDATA 1\nPOINTS 2\n", 5, "POINTS after DATA"),
        ("PARAMETER n\nPOINTS 1\nMETRICS time\n", 3, "unknown section 'METRICS'"),
        ("PARAMETER n\nPOINTS 1 2\nREGION r\nDATA 1\nDATA nan\n", 5, "values[0] is nan"),
        ("PARAMETER n\nPOINTS 1 2\n\n\nREGION r\nDATA 1\nDATA 2 -3\n", 7, "values[1] is -3"),
        ("PARAMETER n\nPOINTS 1 2\nREGION r\nDATA 1\nDATA inf\n", 5, "finite"),
    ],
)
def test_malformed_extrap_text_names_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(FormatError) as err:
        parse(text, "extrap", app="a")
    assert err.value.line == line
    assert words in str(err.value)
    assert str(err.value).startswith(f"line {line}: ")


def test_a_file_without_data_or_application_is_refused() -> None:
    with pytest.raises(FormatError, match="no measurements"):
        parse("PARAMETER n\nPOINTS 1 2\n", "extrap", app="a")
    with pytest.raises(FormatError, match="name no application"):
        parse(GOOD, "extrap")
    with pytest.raises(FormatError, match="unknown format"):
        parse(GOOD, "cube", app="a")


def test_bytes_are_utf8_with_or_without_bom() -> None:
    assert parse(b"\xef\xbb\xbf" + GOOD.encode(), app="a") == parse(GOOD, app="a")
    bad = GOOD.encode().replace(b"REGION r", b"REGION \xff")
    with pytest.raises(FormatError) as err:
        parse(bad, app="a")
    assert err.value.line == 3
    at = bad.index(0xFF)
    assert f"not UTF-8 text (byte {at})" in str(err.value)


def test_every_run_is_located() -> None:
    located = parse_located("PARAMETER n\nPOINTS 1 2\n\nREGION r\nDATA 1\n\nDATA 2\n", app="a")
    assert [loc.where for loc in located] == ["line 5", "line 7"]


# ------------------------------------------------------------------ Extra-P JSON


def doc_new(point: Any = (4,), values: Any = (1.0, 2.0)) -> str:
    return json.dumps(
        {
            "parameters": ["x"],
            "measurements": {"sweep": {"time": [{"point": point, "values": values}]}},
        }
    )


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ('{"parameters": ["x"],\n "measurements": {,}}', "line 2", "malformed JSON"),
        ("[1, 2]", "document", "a JSON object"),
        (doc_new(point=[4, 8]), "measurements['sweep']['time'][0].point", "2 coordinates for 1"),
        (
            doc_new(values=[1, "2"]),
            "measurements['sweep']['time'][0]",
            "values[1]: expected a number",
        ),
        (doc_new(values=[1, True]), "measurements['sweep']['time'][0]", "values[1]"),
        (doc_new(values=[-1]), "measurements['sweep']['time'][0]", "values[0] is -1"),
        (doc_new(values=[]), "measurements['sweep']['time'][0]", "at least one"),
        ('{"parameters": "x", "measurements": {}}', "parameters", "a list of parameter names"),
    ],
)
def test_malformed_extrap_json_names_the_place(text: str, where: str, words: str) -> None:
    with pytest.raises(FormatError) as err:
        parse(text, "extrap-json", app="a")
    assert err.value.problems[0][0] == where
    assert words in err.value.problems[0][1]


def test_legacy_json_with_an_unknown_id_is_refused() -> None:
    doc = json.loads((DATA / "extrap_input_1_legacy.json").read_text())
    doc["measurements"][3]["callpath_id"] = 9
    with pytest.raises(FormatError) as err:
        parse(json.dumps(doc), "extrap-json", app="a")
    assert err.value.problems == [("measurements[3].callpath_id", "no such id: 9")]


# ------------------------------------------------------------------ JSON lines


def test_json_lines_group_repetitions_and_take_lists() -> None:
    text = (
        '{"params": {"n": 2, "p": 1}, "value": 1.0, "callpath": "k"}\n\n'
        '{"params": {"p": 1, "n": 2}, "value": [1.5, 2.0], "callpath": "k"}\n'
        '{"params": {"n": 4, "p": 1}, "value": 3, "callpath": "k", "metric": "bytes"}\n'
    )
    got = [(r.kernel, r.metric, dict(r.params), r.values) for r in parse(text, "jsonl", app="a")]
    assert got == [
        ("k", "time", {"n": 2, "p": 1}, (1.0, 1.5, 2.0)),
        ("k", "bytes", {"n": 4, "p": 1}, (3.0,)),
    ]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (
            '{"params": {"n": 1}, "value": 1}\n{"params": {"n": 2}, "value": 1\n',
            2,
            "malformed JSON",
        ),
        ('{"params": {"n": 1}, "value": 1}\n{"params": {"p": 2}, "value": 1}\n', 2, "differ"),
        ('{"params": {"n": 1}}\n', 1, 'no "value"'),
        (
            '{"params": {"n": 1}, "value": 1}\n\n{"params": {"n": 1}, "value": -2}\n',
            3,
            "value is -2",
        ),
        ('{"params": {"n": "big"}, "value": 1}\n', 1, "a number"),
        ('{"params": [1], "value": 1}\n', 1, '"params"'),
    ],
)
def test_malformed_json_lines_name_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(FormatError) as err:
        parse(text, "jsonl", app="a")
    assert err.value.line == line
    assert words in str(err.value)


# ------------------------------------------------------------------ CSV


def test_csv_rows_of_one_point_are_one_run() -> None:
    text = (
        "app,kernel,n,p,time\n"
        "sor,total,1000,2,1.5\n"
        "sor,total,1000,2,1.7\n"
        '# a comment\nsor,"main,solve",1000,2,0.5\n'
        "sor,total,2000,2,6.1\n"
        "\n"
        "jacobi,,1000,2,2.0\n"
    )
    located = parse_located(text, system="cluster-a")
    got = [
        (loc.where, r.app, r.kernel, dict(r.params), r.values)
        for loc in located
        for r in [loc.record]
    ]
    assert got == [
        ("line 2", "sor", "total", {"n": 1000, "p": 2}, (1.5, 1.7)),
        ("line 5", "sor", "main,solve", {"n": 1000, "p": 2}, (0.5,)),
        ("line 6", "sor", "total", {"n": 2000, "p": 2}, (6.1,)),
        ("line 8", "jacobi", "total", {"n": 1000, "p": 2}, (2.0,)),
    ]
    assert {(loc.record.metric, loc.record.system) for loc in located} == {("time", "cluster-a")}


def test_csv_names_its_metric_in_the_header() -> None:
    [r] = parse("app,kernel,n,energy\nsor,total,10,3.5\n", "csv")
    assert (r.metric, dict(r.params), r.values) == ("energy", {"n": 10}, (3.5,))


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("n,p,time\n1,2,3\n", 1, "the header is app,kernel"),
        ("app,kernel,n,n,time\n", 1, "same name"),
        ("app,kernel,n,time\nsor,total,1\n", 2, "3 columns, the header has 4"),
        ("app,kernel,n,time\nsor,total,1,2\nsor,total,ten,2\n", 3, "n: 'ten' is not a number"),
        ("app,kernel,n,time\nsor,total,1,2\nsor,total,1,\n", 3, "time: '' is not a number"),
        ("app,kernel,n,time\nsor,total,1,2\nsor,total,1,nan\n", 3, "time is nan"),
        ("app,kernel,n,time\nsor,total,1,-2\n", 2, "time is -2"),
        ("app,kernel,n,time\n,total,1,2\n", 2, "app is empty"),
    ],
)
def test_malformed_csv_names_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(FormatError) as err:
        parse(text, "csv")
    assert err.value.line == line
    assert words in str(err.value)


def test_csv_app_must_be_the_one_asked_for() -> None:
    text = "app,kernel,n,time\nsor,total,1,2\njacobi,total,1,2\n"
    with pytest.raises(FormatError) as err:
        parse(text, "csv", app="sor")
    assert err.value.line == 3 and "'jacobi' is not the 'sor'" in str(err.value)
    with pytest.raises(FormatError, match="no header"):
        parse("# nothing\n\n", "csv")
