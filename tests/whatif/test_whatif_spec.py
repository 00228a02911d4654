"""Reading a what-if spec: typed objects and units, sweeps expanded into points, and every
mistake refused before anything runs with its line, its field and, for a misspelt name, the
nearest valid one."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppe.whatif import Problem, SpecError
from ppe.whatif.locate import Locator
from ppe.whatif.sweep import MAX_POINTS
from ppe.whatif.units import UnitError, parse_quantity

from .conftest import SOR_SCRIPT, cluster, parse, two_nodesets

ROOT = Path(__file__).resolve().parents[2]


def problems(text: str) -> list[Problem]:
    with pytest.raises(SpecError) as info:
        parse(text)
    return info.value.problems


def only(text: str) -> Problem:
    found = problems(text)
    assert len(found) == 1, found
    return found[0]


def line_of(text: str, needle: str, nth: int = 0) -> int:
    """1-based line of the nth line containing ``needle``."""
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    return hits[nth]


# ------------------------------------------------------------------------------ reading


def test_a_spec_reads_into_typed_objects_with_si_units() -> None:
    text = cluster(bandwidth="100 Mb/s", latency="50 us", floatspeed="2 Gflop/s")
    (point,) = parse(text).points
    spec = point.spec
    (node,) = spec.nodesets
    (net,) = spec.linksets
    assert (node.name, node.type, node.number, node.floatspeed) == ("node", "cpu", 8, 2e9)
    assert net.bandwidth == pytest.approx(12.5e6) and net.latency == pytest.approx(5e-5)
    assert spec.dataset("grid").size == (1000, 1000)
    assert spec.primary.nodesets == ("node",)
    assert spec.execution.model == "sor" and spec.execution.iterations == 10


@pytest.mark.parametrize(
    "raw, dimension, value",
    [
        (3, "time", 3.0),
        ("5 ms", "time", 5e-3),
        ("10 Gb/s", "rate", 1.25e9),
        ("1.25 GB/s", "rate", 1.25e9),
        ("1 GiB/s", "rate", 2.0**30),
        ("64 KiB", "bytes", 65536.0),
        ("100 Mbps", "rate", 12.5e6),
        ("2 Gflop/s", "flops", 2e9),
        ("3 TFLOPS", "flops", 3e12),
    ],
)
def test_units_table(raw: object, dimension: str, value: float) -> None:
    assert parse_quantity(raw, dimension).value == pytest.approx(value)


@pytest.mark.parametrize(
    "raw, dimension, message",
    [
        ("100", "rate", "missing unit"),
        ("5 ms", "rate", "inconsistent unit"),
        ("10 Gbit/s", "rate", "did you mean"),
        ("fast", "rate", "expected a bandwidth"),
        (True, "time", "expected a time"),
        ("8 B", "count", "plain number"),
    ],
)
def test_units_refused(raw: object, dimension: str, message: str) -> None:
    with pytest.raises(UnitError, match=message):
        parse_quantity(raw, dimension)


def test_the_locator_finds_tables_keys_inline_keys_and_script_lines() -> None:
    text = 'a = 1\n[[nodeset]]\nname = "x"\nload = {kind = "normal", mean = 0.5}\n[[nodeset]]\n  number = 2\n[execution]\nscript = """\nrepeat 2 {\n"""\n'
    loc = Locator(text)
    assert loc.find(("nodeset", 0)).line == 2  # type: ignore[union-attr]
    assert loc.find(("nodeset", 0, "load", "mean")).column == 26  # type: ignore[union-attr]
    assert loc.find(("nodeset", 1, "number")).line == 6  # type: ignore[union-attr]
    assert loc.find(("nodeset", 1, "nothing")).line == 5  # type: ignore[union-attr]
    assert loc.string_start(("execution", "script")).line == 9  # type: ignore[union-attr]


# ------------------------------------------------------------------------------- sweeps


def test_a_list_sweeps_a_numeric_field() -> None:
    w = parse(cluster(number=[8, 16, 32]))
    assert [a.label for a in w.axes] == ["nodeset.node.number"]
    assert [p.spec.nodesets[0].number for p in w.points] == [8, 16, 32]


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("8..64", [8, 16, 32, 64]),
        ("8..4096 x4", [8, 32, 128, 512, 2048]),
        ("100..400 +100", [100, 200, 300, 400]),
    ],
)
def test_ranges(raw: str, expected: list[int]) -> None:
    w = parse(cluster(number=raw, n=5000))
    assert [p.spec.nodesets[0].number for p in w.points] == expected


def test_relative_ranges_with_a_base_or_the_default() -> None:
    w = parse(cluster(bandwidth="10 Gb/s x0.5..x4"))
    assert [p.spec.linksets[0].bandwidth for p in w.points] == pytest.approx(
        [6.25e8, 1.25e9, 2.5e9, 5e9]
    )
    w = parse(cluster(bandwidth="x0.5..x2"))  # the default link bandwidth, 1.25e7 B/s
    assert [p.spec.linksets[0].bandwidth for p in w.points] == pytest.approx(
        [6.25e6, 1.25e7, 2.5e7]
    )
    w = parse(cluster(latency="1 ms..4 ms"))
    assert [p.spec.linksets[0].latency for p in w.points] == pytest.approx([1e-3, 2e-3, 4e-3])


def test_several_sweeps_make_the_cartesian_product() -> None:
    w = parse(cluster(number=[2, 4], bandwidth=["1 Gb/s", "10 Gb/s"], n="1000..2000 x2"))
    assert len(w.points) == 8
    assert [a.label for a in w.axes] == [
        "nodeset.node.number",
        "linkset.net.bandwidth",
        "dataset.grid.size",
    ]
    assert w.points[-1].values == (
        ("nodeset.node.number", 4.0),
        ("linkset.net.bandwidth", 1.25e9),
        ("dataset.grid.size", 2000.0),
    )
    assert w.points[-1].spec.dataset("grid").size == (2000, 2000)


def test_a_sweep_of_sizes_takes_shapes_and_sweeps_of_params() -> None:
    w = parse(cluster(n=[[1000, 1000], [2000, 2000]]))
    assert [p.spec.dataset("grid").size for p in w.points] == [(1000, 1000), (2000, 2000)]
    w = parse(cluster(execution='model = "sor"\nparams = {Size = [4, 8]}'))
    assert [p.spec.execution.params["Size"] for p in w.points] == [4.0, 8.0]


def test_too_many_points_are_refused_naming_the_axes() -> None:
    p = only(cluster(number="1..1000 +1", bandwidth=[1, 2], n=2000))
    assert f"at most {MAX_POINTS}" in p.message and "1000 (nodeset.node.number)" in p.message
    assert p.line is not None


@pytest.mark.parametrize(
    "field, value",
    [("type", '["cpu", "disk"]'), ("profile", '["a.json", "b.json"]')],
)
def test_a_sweep_over_a_non_numeric_field_is_refused(field: str, value: str) -> None:
    text = cluster().replace('type = "cpu"', f"{field} = {value}")
    p = [q for q in problems(text) if q.field.endswith(field)][0]
    assert "not numeric" in p.message and "cannot be swept" in p.message
    assert p.line == line_of(text, f"{field} = [")


def test_a_topology_list_is_a_sweep_over_a_non_numeric_field() -> None:
    text = cluster().replace('topology = "chain"', 'topology = ["chain", "ring"]')
    p = only(text)
    assert p.field == "linkset[0].topology" and "cannot be swept" in p.message


@pytest.mark.parametrize(
    "raw, message",
    [
        ("64..8", "smaller to a larger"),
        ("8..64 x1", "factor above 1"),
        ("x0.5..x4", "needs a base"),
    ],
)
def test_bad_ranges(raw: str, message: str) -> None:
    p = only(cluster(number=raw))
    assert message in p.message and p.field == "nodeset[0].number"


def test_a_sweep_value_that_breaks_one_point_names_the_point() -> None:
    p = only(cluster(number=[4, 2000], n=1000))
    assert "more nodes than rows" in p.message
    assert "(at nodeset.node.number = 2000)" in p.message
    assert p.line == line_of(cluster(number=[4, 2000], n=1000), "nodeset = ")


def test_a_whole_number_field_refuses_a_fraction_from_a_relative_range() -> None:
    p = only(cluster(number="5 x0.5..x1"))
    assert "whole number" in p.message and "(at nodeset.node.number = 2.5)" in p.message


# ---------------------------------------------------------------------------- mistakes


def test_unknown_object_type_names_the_line_and_suggests() -> None:
    text = cluster() + '\n[[nodesets]]\nname = "x"\n'
    p = only(text)
    assert p.field == "nodesets" and "unknown object type 'nodesets'" in p.message
    assert "did you mean 'nodeset'?" in p.message
    assert p.line == line_of(text, "[[nodesets]]")


def test_unknown_field_names_the_line_and_suggests() -> None:
    text = cluster().replace("floatspeed =", "floatsped =")
    found = problems(text)
    p = next(q for q in found if q.field == "nodeset[0].floatsped")
    assert "unknown field 'floatsped'" in p.message and "did you mean 'floatspeed'?" in p.message
    assert (p.line, p.column) == (line_of(text, "floatsped"), 1)
    assert any("give its speed" in q.message for q in found) is False  # one mistake, one problem


def test_unknown_field_in_an_inline_table_names_its_column() -> None:
    text = cluster(load='{kind = "normal", mean = 0.8, stdev = 0.1}')
    p = only(text)
    assert p.field == "nodeset[0].load.stdev" and "did you mean 'std'?" in p.message
    row = line_of(text, "stdev")
    assert (p.line, p.column) == (row, text.splitlines()[row - 1].index("stdev") + 1)


@pytest.mark.parametrize(
    "change, field, message",
    [
        ('across = "node"', "linkset[0].across", "no nodeset named 'nodes'; did you mean 'node'?"),
        ("", "linkset[0]", "either 'across' one or 'updown'"),
    ],
)
def test_a_linkset_joining_undefined_nodesets(change: str, field: str, message: str) -> None:
    text = cluster().replace('across = "node"', change.replace("node", "nodes") if change else "")
    p = next(q for q in problems(text) if q.field == field)
    assert message in p.message and p.line is not None


def test_an_updown_linkset_to_an_undefined_nodeset() -> None:
    text = two_nodesets().replace('updown = ["fast", "slow"]', 'updown = ["fast", "slo"]')
    p = next(q for q in problems(text) if q.field == "linkset[2].updown[1]")
    assert "no nodeset named 'slo'; did you mean 'slow'?" in p.message
    assert p.line == line_of(text, "updown")


def test_a_distribution_over_a_nodeset_too_small_for_the_dataset() -> None:
    p = only(cluster(number=64, n=32))
    assert p.field == "distribution[0].nodeset" and "more nodes than rows" in p.message
    p = only(cluster(number=4, n=1000, extra_nodeset='grainsize = "1 MB"'))
    assert "too small for the dataset" in p.message


def test_missing_links_between_nodes_and_nodesets() -> None:
    text = two_nodesets().replace('updown = ["fast", "slow"]', 'across = "fast"')
    found = problems(text)
    assert any("no linkset joins 'fast' and 'slow'" in q.message for q in found)
    assert any("two linksets across 'fast'" in q.message for q in found)


@pytest.mark.parametrize(
    "bad, message",
    [
        ('bandwidth = "100 Mb/s"', None),
        ('bandwidth = "100"', "missing unit"),
        ('bandwidth = "100 ms"', "inconsistent unit"),
        ('bandwidth = "10 Gbit/s"', "did you mean"),
        ("bandwidth = -3", "must be > 0"),
    ],
)
def test_units_in_a_spec(bad: str, message: str | None) -> None:
    text = cluster().replace("bandwidth = 12500000.0", bad)
    if message is None:
        parse(text)
        return
    p = only(text)
    assert p.field == "linkset[0].bandwidth" and message in p.message
    assert p.line == line_of(text, bad)


def test_missing_and_conflicting_fields() -> None:
    text = cluster().replace("number = 8\n", "")
    assert "missing field 'number'" in only(text).message
    text = cluster(execution='model = "sorr"')
    p = only(text)
    assert "unknown model 'sorr'" in p.message and "did you mean 'sor'?" in p.message
    text = cluster(execution=f'model = "sor"\nscript = {SOR_SCRIPT}')
    assert "not both" in only(text).message
    text = cluster().replace("floatspeed = 1000000000.0", "")
    assert "give its speed" in only(text).message
    text = cluster(extra_nodeset='profile = "h.json"')
    assert "give one speed source" in only(text).message
    p = only(cluster(number=3, extra_nodeset="sharing = 2"))
    assert "must be a multiple of sharing" in p.message and p.field.endswith("sharing")
    assert "sharing must be >= 1" in only(cluster(extra_nodeset="sharing = 0")).message


def test_the_sor_model_needs_a_square_grid() -> None:
    p = only(cluster(n=[1000, 500]))
    assert "square grid2dim" in p.message and p.field == "execution.model"


def test_every_problem_is_reported_at_once_in_file_order() -> None:
    text = cluster(load='{kind = "normal", mean = 1.5}').replace("floatspeed =", "floatsped =")
    found = problems(text)
    assert [p.line for p in found] == sorted(p.line or 0 for p in found)
    assert {"nodeset[0].floatsped", "nodeset[0].load.mean"} <= {p.field for p in found}
    assert str(SpecError(found, "x.toml")).startswith("x.toml:")
    assert SpecError(found).to_dict()["detail"][0].keys() == {"field", "line", "column", "reason"}


def test_not_toml_gives_the_line() -> None:
    p = only("[[nodeset]\nname = 1\n")
    assert "not valid TOML" in p.message and p.line == 1


# ----------------------------------------------------------------------------- scripts


def script_problem(script: str, **kw: object) -> tuple[Problem, str]:
    text = cluster(execution=f'script = """\n{script}\n"""', **kw)  # type: ignore[arg-type]
    return only(text), text


@pytest.mark.parametrize(
    "script, needle, message",
    [
        ("use distribution strips\nrepeat 3 {\n}", "repeat 3", "the body of repeat 3 is empty"),
        (
            "define a { do b }\ndefine b { do a }\ncompute strips\ndo a",
            "define b",
            "cycle: a -> b -> a",
        ),
        ("compute strips\nrepeat 2.5 { compute strips }", "repeat 2.5", "whole number"),
        ("comptue strips", "comptue", "did you mean 'compute'?"),
        (
            "compute strips\nrepeat iters { compute strips }",
            "repeat iters",
            "did you mean 'iterations'?",
        ),
        ("compute strip", "compute strip", "did you mean 'strips'?"),
        ("compute grid", "compute grid", "'grid' is a dataset"),
        ("compute strips\nmove strips to dsk", "move", "no such nodeset"),
        ("compute strips\nsend strips", "send strips", "expected 'halo'"),
    ],
)
def test_script_mistakes_name_the_file_line(script: str, needle: str, message: str) -> None:
    p, text = script_problem(script)
    assert message in p.message, p
    assert p.field == "execution.script"
    assert p.line == line_of(text, needle)


def test_a_repeat_count_from_params_must_be_whole() -> None:
    text = cluster(
        execution='script = """\ncompute strips\nrepeat steps { compute strips }\n"""\nparams = {steps = 2.5}'
    )
    p = only(text)
    assert "steps = 2.5, not a whole number" in p.message and p.line == line_of(
        text, "repeat steps"
    )


def test_nesting_too_deep_is_refused() -> None:
    body = "compute strips"
    for _ in range(20):
        body = f"repeat 2 {{ {body} }}"
    p, _ = script_problem(body)
    assert "nest deeper than 16" in p.message


def test_a_script_phases_sor() -> None:
    w = parse(cluster(execution=f"script = {SOR_SCRIPT}"))
    from ppe.whatif.script import phases

    spec = w.points[0].spec
    assert spec.execution.distribution == "strips"
    assert spec.execution.script is not None
    (phase,) = phases(spec.execution.script, spec.counts(), "strips")
    assert phase.count == 10
    assert dict(phase.terms) == {("compute", "strips", 0.5): 2.0, ("halo", "strips", 1): 2.0}


# ------------------------------------------------------------------------------ sweeps together

WEAK = '\n[sweep]\ntogether = [["nodeset.node.number", "dataset.grid.size"]]\n'


def test_fields_swept_together_move_in_step() -> None:
    """Weak scaling: the grid grows with the nodes, one point per pair, not the product."""
    w = parse(cluster(number=[2, 4, 8], n="1000..4000", bandwidth=[1, 2]) + WEAK)
    assert len(w.points) == 6  # 3 steps x 2 bandwidths
    pairs = {(p.spec.nodesets[0].number, p.spec.dataset("grid").size[0]) for p in w.points}
    assert pairs == {(2, 1000), (4, 2000), (8, 4000)}
    assert w.together == (("nodeset.node.number", "dataset.grid.size"),)
    assert [a.label for a in w.axes] == [
        "nodeset.node.number",
        "linkset.net.bandwidth",
        "dataset.grid.size",
    ]  # the table still shows every swept field


def test_the_point_limit_counts_steps_taken_together() -> None:
    # 1000 values each: 1000 points together, 10^6 as a product
    text = cluster(number="1..1000 +1", n="2000..2999 +1") + WEAK
    assert len(parse(text).points) == 1000


@pytest.mark.parametrize(
    "together, message",
    [
        ('[["nodeset.node.numbr", "dataset.grid.size"]]', "did you mean 'nodeset.node.number'?"),
        ('[["nodeset.node.number", "linkset.net.latency"]]', "is not a swept field"),
        ('[["nodeset.node.number"]]', "two swept fields or more"),
        ('"nodeset.node.number"', "a list of lists"),
        (
            '[["nodeset.node.number", "dataset.grid.size"], ["dataset.grid.size", '
            '"nodeset.node.number"]]',
            "in two groups",
        ),
    ],
)
def test_bad_groups_are_refused_at_their_line(together: str, message: str) -> None:
    text = cluster(number=[2, 4], n="1000..2000") + f"\n[sweep]\ntogether = {together}\n"
    found = problems(text)
    assert all(message in p.message for p in found), found
    assert {p.line for p in found} == {line_of(text, "together = ")}


def test_fields_swept_together_need_as_many_values() -> None:
    p = only(cluster(number=[2, 4, 8], n="1000..2000") + WEAK)
    assert "need as many values each" in p.message
    assert "nodeset.node.number has 3" in p.message and "dataset.grid.size has 2" in p.message


def test_unknown_fields_of_sweep_are_named() -> None:
    p = only(cluster(number=[2, 4], n="1000..2000") + "\n[sweep]\ntogeter = []\n")
    assert "unknown field 'togeter' in [sweep]; did you mean 'together'?" in p.message


# ------------------------------------------------------------------------------ absent nodesets


def test_a_nodeset_with_number_0_is_absent_from_that_point() -> None:
    """number = 0: the nodeset, its linksets and its place in the distribution are left out of
    that point; the other points keep it."""
    text = two_nodesets().replace('name = "fast"\nnumber = 4', 'name = "fast"\nnumber = [0, 4]')
    without, with_fast = (p.spec for p in parse(text).points)
    assert [ns.name for ns in without.nodesets] == ["slow"]
    assert [ls.name for ls in without.linksets] == ["lan-slow"]
    assert without.primary.nodesets == ("slow",)
    assert [ns.name for ns in with_fast.nodesets] == ["fast", "slow"]
    assert [ls.name for ls in with_fast.linksets] == ["lan-fast", "lan-slow", "bridge"]


def test_a_distribution_whose_nodesets_are_all_absent_is_refused() -> None:
    p = only(cluster(number=[0, 4]))
    assert "has number = 0: nothing holds it" in p.message
    assert "(at nodeset.node.number = 0)" in p.message


def test_a_script_moving_data_to_an_absent_nodeset_names_the_point() -> None:
    text = (
        (ROOT / "examples/whatif/script.toml")
        .read_text()
        .replace("number = 4\n", "number = [0, 4]\n")
    )
    found = problems(text)
    assert {p.message.split(" (at ")[0] for p in found} == {
        "move from 'disk': it has number = 0 here",
        "move to 'disk': it has number = 0 here",
    }
    assert all("(at nodeset.disk.number = 0, linkset.net.bandwidth" in p.message for p in found)


def test_a_bad_sweep_in_a_group_is_said_once() -> None:
    """A field of the group whose sweep cannot be read has its own problem, and only that."""
    text = cluster(number=[2, 4], bandwidth=["1 Gb/s", "2 Gbit/s"]) + (
        '\n[sweep]\ntogether = [["nodeset.node.number", "linkset.net.bandwidth"]]\n'
    )
    p = only(text)
    assert p.field == "linkset[0].bandwidth" and "bad sweep" in p.message
