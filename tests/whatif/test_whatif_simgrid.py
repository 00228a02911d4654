"""SimGrid platforms as what-if machines: units, clusters, hosts grouped by speed, routes as
linksets (slowest link, summed latency), availability traces as normal loads; a cluster
evaluates exactly as the hand-written nodeset and linkset; bad platforms are refused with the
XML's line and column, and nothing is evaluated."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from ppe.cli import main as ppe_main
from ppe.whatif import Options, SpecError, evaluate, parse_spec
from ppe.whatif.simgrid import PlatformError, parse_platform, parse_value

from .conftest import MemoryResolver, cluster, two_nodesets

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "whatif"

CLUSTER = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="AS0" routing="Full">
    <cluster id="node" prefix="n-" suffix="" radical="0-7" speed="1Gf"
             bw="100MBps" lat="{lat}" {backbone}/>
  </zone>
</platform>
"""

HOSTS = """<?xml version='1.0'?>
<platform version="4.1">
  <zone id="AS0" routing="Full">
    <host id="big-1" speed="2Gf" core="2"/>
    <host id="big-2" speed="2Gf" core="2"/>
    <host id="small-1" speed="500Mf"><prop id="ram" value="8GiB"/></host>
    <host id="small-2" speed="500Mf"/>
    <host id="small-3" speed="500Mf" availability_file="load.trace"/>
    <link id="l1" bandwidth="1Gbps" latency="10us"/>
    <link id="l2" bandwidth="125MBps" latency="20us"/>
    <link id="slow" bandwidth="10MBps" latency="1ms" sharing_policy="FATPIPE"/>
    <route src="big-1" dst="big-2"><link_ctn id="l1"/></route>
    <route src="small-1" dst="small-2"><link_ctn id="l1"/><link_ctn id="l2"/></route>
    <route src="big-2" dst="small-1"><link_ctn id="l2"/><link_ctn id="slow"/></route>
    <route src="big-1" dst="small-2"><link_ctn id="l2"/></route>
  </zone>
</platform>
"""

TRACE = """# availability
PERIODICITY 100
0 1.0
10 0.5
50 0.75
"""

APPLICATION = """
title = "on a SimGrid platform"
{machine}
[[dataset]]
name = "grid"
type = "grid2dim"
size = 1000
bytesperunit = 8
floatsperunit = 8

[[distribution]]
name = "strips"
type = "block1dim"
dataset = "grid"
nodeset = {nodesets}

[execution]
model = "sor"
iterations = 10
"""


def spec_on(platform: str, nodesets: str = '"node"', **texts: str) -> tuple[str, MemoryResolver]:
    text = APPLICATION.format(machine='[machine]\nsimgrid = "p.xml"\n', nodesets=nodesets)
    return text, MemoryResolver(texts={"p.xml": platform, **texts})


# ------------------------------------------------------------------------------ units


@pytest.mark.parametrize(
    ("text", "dimension", "value"),
    [
        ("1Gf", "speed", 1e9),
        ("2.5 Mf", "speed", 2.5e6),
        ("1e9f", "speed", 1e9),
        ("3gigaflops", "speed", 3e9),
        ("125MBps", "bandwidth", 125e6),
        ("1Gbps", "bandwidth", 1e9 / 8),
        ("1KiBps", "bandwidth", 1024.0),
        ("50us", "latency", 50e-6),
        ("2ms", "latency", 2e-3),
        ("0.5", "latency", 0.5),  # a bare number is SI, as SimGrid reads it
    ],
)
def test_simgrid_units(text: str, dimension: str, value: float) -> None:
    assert parse_value(text, dimension) == pytest.approx(value)


def test_an_unknown_unit_is_refused_with_the_near_spelling() -> None:
    with pytest.raises(ValueError, match=r"unknown bandwidth unit 'MBPS'.*did you mean 'MBps'"):
        parse_value("125MBPS", "bandwidth")
    with pytest.raises(ValueError, match="unknown speed unit 'Gb'"):
        parse_value("1Gb", "speed")


# ------------------------------------------------------------------------------ mapping


def test_a_cluster_is_a_nodeset_and_an_across_linkset_through_its_backbone() -> None:
    p = parse_platform(CLUSTER.format(lat="50us", backbone='bb_bw="50MBps" bb_lat="100us"'))
    assert p.nodesets == (
        {
            "name": "node",
            "type": "cpu",
            "number": 8,
            "floatspeed": 1e9,
            "load": {"kind": "dedicated"},
        },
    )
    (net,) = p.linksets
    assert net["across"] == "node"
    assert net["bandwidth"] == pytest.approx(50e6)  # the backbone is the slowest link
    assert net["latency"] == pytest.approx(2 * 50e-6 + 100e-6)  # private, backbone, private
    assert any("backbone" in n and "shared" in n for n in p.notes)


def test_hosts_group_by_speed_and_routes_become_linksets() -> None:
    p = parse_platform(HOSTS, "dir/p.xml", {"dir/load.trace": TRACE}.__getitem__)
    groups = {ns["name"]: ns for ns in p.nodesets}
    assert set(groups) == {"big", "small", "small-3"}
    assert groups["big"]["number"] == 2 and groups["big"]["floatspeed"] == 4e9  # 2 cores
    assert groups["small"]["number"] == 2 and groups["small"]["floatspeed"] == 5e8
    loaded = groups["small-3"]["load"]
    assert loaded["kind"] == "normal"
    assert loaded["mean"] == pytest.approx(statistics.fmean([1.0, 0.5, 0.75]))
    assert loaded["std"] == pytest.approx(statistics.pstdev([1.0, 0.5, 0.75]))
    links = {ls["name"]: ls for ls in p.linksets}
    assert links["big-net"]["across"] == "big"
    assert links["big-net"]["bandwidth"] == pytest.approx(1e9 / 8)
    assert links["small-net"]["bandwidth"] == pytest.approx(1e9 / 8)  # min(125 MB/s, 1 Gb/s)
    assert links["small-net"]["latency"] == pytest.approx(30e-6)  # summed
    # two routes join big and small: the slowest bandwidth, the largest latency
    assert links["big-small"]["updown"] == ["big", "small"]
    assert links["big-small"]["bandwidth"] == pytest.approx(10e6)
    assert links["big-small"]["latency"] == pytest.approx(1e-3 + 20e-6)
    assert any("load.trace" in n and "normal" in n for n in p.notes)


def test_old_as_names_are_read_like_zones() -> None:
    old = CLUSTER.format(lat="50us", backbone="").replace("zone", "AS").replace("4.1", "3")
    p = parse_platform(old)
    assert p.nodesets[0]["number"] == 8 and p.linksets[0]["across"] == "node"


def test_a_zone_route_joins_two_clusters_through_both_backbones() -> None:
    xml = """<platform version="4.1"><zone id="w" routing="Full">
      <cluster id="a" prefix="a" suffix="" radical="0-3" speed="1Gf" bw="100MBps" lat="10us"
               bb_bw="1GBps" bb_lat="5us"/>
      <cluster id="b" prefix="b" suffix="" radical="0,2-3" speed="2Gf" bw="50MBps" lat="20us"/>
      <link id="wan" bandwidth="80MBps" latency="1ms"/>
      <zoneRoute src="a" dst="b" gw_src="aa_router" gw_dst="bb_router"><link_ctn id="wan"/></zoneRoute>
    </zone></platform>"""
    p = parse_platform(xml)
    assert [(ns["name"], ns["number"]) for ns in p.nodesets] == [("a", 4), ("b", 3)]
    bridge = next(ls for ls in p.linksets if ls.get("updown"))
    assert bridge["updown"] == ["a", "b"]
    assert bridge["bandwidth"] == pytest.approx(50e6)  # b's private link is the slowest
    assert bridge["latency"] == pytest.approx(10e-6 + 5e-6 + 1e-3 + 20e-6)


# ----------------------------------------------------------------------- evaluation


@pytest.mark.parametrize("number", [1, 2, 8])
def test_a_cluster_evaluates_as_the_hand_written_nodeset_and_linkset(number: int) -> None:
    platform = CLUSTER.format(lat="25us", backbone="").replace("0-7", f"0-{number - 1}")
    text, resolver = spec_on(platform)
    whatif = parse_spec(text, "s.toml", resolver.text)
    by_hand = parse_spec(
        cluster(number=number, floatspeed=1e9, bandwidth=100e6, latency=50e-6), "h.toml"
    )
    a = evaluate(whatif, resolver, Options()).points[0]
    b = evaluate(by_hand, MemoryResolver(), Options()).points[0]
    assert a.makespan.mean() == pytest.approx(b.makespan.mean(), rel=1e-12)
    assert a.makespan.interval(0.95) == pytest.approx(b.makespan.interval(0.95), rel=1e-12)
    assert [n.rows for n in a.nodesets] == [n.rows for n in b.nodesets]
    assert a.nodesets[0].communication == pytest.approx(b.nodesets[0].communication, rel=1e-12)
    assert (number > 1) == (a.nodesets[0].communication > 0)


def test_a_spec_adds_its_own_linkset_to_platform_hosts() -> None:
    xml = """<platform version="4.1"><zone id="z" routing="None">
      <host id="w1" speed="1Gf"/><host id="w2" speed="1Gf"/>
    </zone></platform>"""
    text, resolver = spec_on(xml, nodesets='"w"')
    with pytest.raises(SpecError, match="no linkset across 'w'.*SimGrid platform"):
        parse_spec(text, "s.toml", resolver.text)
    text += '\n[[linkset]]\nname = "lan"\nacross = "w"\nbandwidth = "1 Gb/s"\n'
    report = evaluate(parse_spec(text, "s.toml", resolver.text), resolver, Options())
    assert report.points[0].nodesets[0].nodes == 2


def test_the_simgrid_argument_replaces_the_machine_table() -> None:
    text, resolver = spec_on(CLUSTER.format(lat="50us", backbone=""))
    resolver.texts["other.xml"] = CLUSTER.format(lat="50us", backbone="").replace("0-7", "0-3")
    whatif = parse_spec(text, "s.toml", resolver.text, simgrid="other.xml")
    assert whatif.points[0].spec.nodeset("node").number == 4


# ----------------------------------------------------------------------------- errors


def _refused(platform: str, **texts: str) -> SpecError:
    text, resolver = spec_on(platform, **texts)
    with pytest.raises(SpecError) as err:
        parse_spec(text, "s.toml", resolver.text)
    return err.value


def test_malformed_xml_says_line_and_column_and_points_at_the_machine_line() -> None:
    err = _refused(
        '<platform version="4.1">\n  <zone id="z">\n    <host id="h" speed="1Gf">\n</zone>'
    )
    (p,) = err.problems
    assert p.field == "machine.simgrid" and p.line == 4  # the spec's `simgrid = ...` line
    assert "p.xml:4:3: not well-formed XML: mismatched tag" in p.message


def test_each_bad_element_is_reported_with_its_position() -> None:
    xml = """<platform version="4.1"><zone id="z" routing="Full">
  <host id="a" speed="1Gz"/>
  <host id="b"/>
  <host id="c" speed="1Gf"/>
  <link id="l" bandwidth="1Gbps" latency="1us"/>
  <route src="c" dst="d"><link_ctn id="l"/></route>
  <route src="c" dst="c">
    <link_ctn id="nope"/>
  </route>
</zone></platform>"""
    messages = [p.message for p in _refused(xml).problems]
    assert any("p.xml:2:3:" in m and "unknown speed unit 'Gz'" in m for m in messages)
    assert any("p.xml:3:3:" in m and "has no 'speed'" in m for m in messages)
    assert any("p.xml:6:3:" in m and "'d': no such host" in m for m in messages)
    assert any("p.xml:8:5:" in m and "link 'nope', which is not defined" in m for m in messages)


def test_a_missing_platform_or_trace_and_a_bad_trace_are_refused() -> None:
    text = APPLICATION.format(machine='[machine]\nsimgrid = "gone.xml"\n', nodesets='"node"')
    with pytest.raises(SpecError, match="no such file 'gone.xml'"):
        parse_spec(text, "s.toml", MemoryResolver().text)
    xml = HOSTS.replace("load.trace", "gone.trace")
    assert "cannot read it" in str(_refused(xml))
    assert "expected 'time value'" in str(_refused(HOSTS, **{"load.trace": "0 1\nbad\n"}))
    assert "not in (0, 1]" in str(_refused(HOSTS, **{"load.trace": "0 2\n1 3\n"}))


def test_entity_declarations_are_refused() -> None:
    xml = '<?xml version="1.0"?><!DOCTYPE p [<!ENTITY a "aaaa">]><platform>&a;</platform>'
    with pytest.raises(PlatformError, match="entity declarations are not accepted"):
        parse_platform(xml)


def test_the_machine_table_is_checked() -> None:
    text = APPLICATION.format(machine='[machine]\nsimgird = "p.xml"\n', nodesets='"node"')
    with pytest.raises(SpecError, match="unknown field 'simgird' in .machine.; did you mean"):
        parse_spec(text, "s.toml", MemoryResolver().text)
    text = APPLICATION.format(machine='[machine]\nsimgrid = "p.xml"\n', nodesets='"node"')
    with pytest.raises(SpecError, match="no reader"):
        parse_spec(text, "s.toml")


# -------------------------------------------------------------------------------- CLI


def test_the_simgrid_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert ppe_main(["whatif", str(EXAMPLES / "simgrid.toml"), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [n["nodeset"] for n in report["points"][0]["nodesets"]] == ["fast", "old"]
    assert any("old-load.trace" in n for n in report["platform_notes"])
    assert "note: availability file 'old-load.trace'" in capsys.readouterr().out


def test_the_simgrid_flag_reads_a_platform_next_to_the_cwd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "c.xml").write_text(CLUSTER.format(lat="50us", backbone=""))
    spec = tmp_path / "spec" / "s.toml"
    spec.parent.mkdir()
    spec.write_text(APPLICATION.format(machine="", nodesets='"node"'))
    monkeypatch.chdir(tmp_path)
    assert ppe_main(["whatif", str(spec), "--simgrid", "c.xml", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["points"][0]["hosts"] == 8
    (tmp_path / "bad.xml").write_text("<platform><host id='h' speed='1Gf'></platform>")
    assert ppe_main(["whatif", str(spec), "--simgrid", "bad.xml"]) == 2
    assert "bad.xml:1:38: not well-formed XML" in capsys.readouterr().err


def test_a_route_to_a_router_is_noted_not_refused() -> None:
    xml = """<platform version="4.1"><zone id="z" routing="Full">
      <host id="h1" speed="1Gf"/><router id="r"/>
      <link id="l" bandwidth="1GBps" latency="0"/>
      <route src="h1" dst="r"><link_ctn id="l"/></route>
      <storage_type id="st" size="1TB"/>
    </zone></platform>"""
    p = parse_platform(xml)
    assert p.linksets == ()
    assert any("routers are not followed" in n for n in p.notes)
    assert any("<storage_type> (1) ignored" in n for n in p.notes)


def test_two_clusters_evaluate_as_the_hand_written_two_nodesets() -> None:
    xml = """<platform version="4.1"><zone id="w" routing="Full">
      <cluster id="fast" prefix="f" suffix="" radical="0-3" speed="2Gf" bw="1GBps" lat="0"/>
      <cluster id="slow" prefix="s" suffix="" radical="0-3" speed="1Gf" bw="1GBps" lat="0"/>
      <link id="wan" bandwidth="1GBps" latency="0"/>
      <zoneRoute src="fast" dst="slow" gw_src="ffast_router" gw_dst="sslow_router">
        <link_ctn id="wan"/></zoneRoute>
    </zone></platform>"""
    text, resolver = spec_on(xml, nodesets='["fast", "slow"]')
    text = text.replace("size = 1000", "size = 2000")
    a = evaluate(parse_spec(text, "s.toml", resolver.text), resolver, Options()).points[0]
    b = evaluate(parse_spec(two_nodesets(), "h.toml"), MemoryResolver(), Options()).points[0]
    assert a.makespan.mean() == pytest.approx(b.makespan.mean(), rel=1e-12)
    assert [(n.nodeset, n.rows) for n in a.nodesets] == [(n.nodeset, n.rows) for n in b.nodesets]


@pytest.mark.parametrize(
    ("hosts", "name"),
    [(["node-0", "node-1"], "node"), (["a"], "a"), (["1", "2"], "h1"), (["x y1", "x y2"], "x_y")],
)
def test_group_names(hosts: list[str], name: str) -> None:
    xml = "".join(f'<host id="{h}" speed="1Gf"/>' for h in hosts)
    p = parse_platform(
        f'<platform version="4.1"><zone id="z" routing="None">{xml}</zone></platform>'
    )
    assert p.nodesets[0]["name"] == name


def test_an_empty_platform_and_a_zero_speed_are_refused() -> None:
    with pytest.raises(PlatformError, match="no hosts"):
        parse_platform('<platform version="4.1"><zone id="z" routing="None"/></platform>')
    with pytest.raises(PlatformError, match=r"p.xml:1:\d+: host 'h': speed must be > 0"):
        parse_platform('<platform><host id="h" speed="0f"/></platform>', "p.xml")


def test_a_platform_nodeset_the_spec_also_defines_is_refused() -> None:
    text, resolver = spec_on(CLUSTER.format(lat="50us", backbone=""))
    text = '[[nodeset]]\nname = "node"\nnumber = 2\nfloatspeed = 1e9\n' + text.replace(
        'title = "on a SimGrid platform"\n', ""
    )
    with pytest.raises(SpecError, match="nodeset 'node' is defined twice.*SimGrid platform"):
        parse_spec(text, "s.toml", resolver.text)


def test_inline_traces_connected_to_hosts_are_their_load() -> None:
    xml = """<platform version="4.1"><zone id="z" routing="Full">
      <host id="h1" speed="1Gf"/><host id="h2" speed="1Gf"/><host id="h3" speed="1Gf"/>
      <trace id="busy" periodicity="10"><![CDATA[
        0.0 0.5
        5.0 0.7
      ]]></trace>
      <trace_connect kind="SPEED" trace="busy" element="h3"/>
      <trace_connect kind="HOST_AVAIL" trace="busy" element="h1"/>
    </zone></platform>"""
    p = parse_platform(xml)
    groups = {ns["name"]: ns for ns in p.nodesets}
    assert groups["h"]["number"] == 2 and groups["h"]["load"] == {"kind": "dedicated"}
    assert groups["h3"]["load"] == {
        "kind": "normal",
        "mean": pytest.approx(0.6),
        "std": pytest.approx(0.1),
    }
    assert any("HOST_AVAIL" in n and "ignored" in n for n in p.notes)
    bad = xml.replace('element="h3"', 'element="h9"').replace(
        'trace="busy" element="h1"', 'trace="idle" element="h1"'
    )
    with pytest.raises(PlatformError) as err:
        parse_platform(bad)
    assert "host 'h9', which is not defined" in str(err.value)
