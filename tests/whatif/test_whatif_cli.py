"""`ppe whatif`: the examples run and print one row per sweep point; --out writes the JSON
report; a spec with mistakes exits 2 listing each problem with its line; file references are
read next to the spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ppe.cli import main as ppe_main
from ppe.pmac import profile_to_json

from ..pmac.conftest import hand_profile
from .conftest import cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "whatif"


@pytest.mark.parametrize("name", ["homogeneous", "heterogeneous", "script"])
def test_the_examples_run(name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert ppe_main(["whatif", str(EXAMPLES / f"{name}.toml"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    report = json.loads(out.read_text())
    assert len(report["points"]) >= 1
    table = [line for line in printed if not line.startswith("note:")]
    assert len(table) == 2 + len(report["points"])  # title, header, one row per point
    assert "mean s" in table[1] and "compute/comm/wait s" in table[1]
    for point in report["points"]:
        lo, hi = point["makespan"]["interval"]
        assert lo <= point["makespan"]["mean"] <= hi
        assert all(n["rows"] > 0 for n in point["nodesets"])


def test_heterogeneous_example_sweeps_the_fast_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert ppe_main(["whatif", str(EXAMPLES / "heterogeneous.toml"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["axes"] == ["nodeset.fast.number"]
    counts = [p["values"]["nodeset.fast.number"] for p in report["points"]]
    assert counts == [4, 8, 16, 32, 64, 128, 256]
    means = [p["makespan"]["mean"] for p in report["points"]]
    assert means[0] > means[1] > means[2]  # more fast nodes: sooner, until the old ones dominate


def test_the_strategy_flag(capsys: pytest.CaptureFixture[str]) -> None:
    spec = EXAMPLES / "heterogeneous.toml"
    assert ppe_main(["whatif", str(spec), "--json", "--strategy", "conservative"]) == 0
    assert json.loads(capsys.readouterr().out)["strategy"] == "conservative"


def test_a_bad_spec_exits_2_with_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(
        cluster().replace("floatspeed", "floatsped").replace('across = "node"', 'across = "nodes"')
    )
    assert ppe_main(["whatif", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err
    assert (
        f"{spec}:" in err and "did you mean 'floatspeed'?" in err and "did you mean 'node'?" in err
    )


def test_files_are_read_next_to_the_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "h0.json").write_text(profile_to_json(hand_profile()))
    spec = tmp_path / "spec.toml"
    spec.write_text(
        cluster(number=2, n=200).replace("floatspeed = 1000000000.0", 'profile = "h0.json"')
    )
    assert ppe_main(["whatif", str(spec), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["points"][0]["nodesets"][0]["benchmark"] > 0
    spec.write_text(
        cluster(number=2, n=200).replace("floatspeed = 1000000000.0", 'profile = "none.json"')
    )
    assert ppe_main(["whatif", str(spec)]) == 2
    assert "cannot read it: no such file" in capsys.readouterr().err


def test_registered_hosts_are_for_the_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(cluster(number=2, n=200).replace("floatspeed = 1000000000.0", 'host = "h1"'))
    assert ppe_main(["whatif", str(spec)]) == 2
    assert "read by the service" in capsys.readouterr().err


def test_a_missing_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ppe_main(["whatif", str(tmp_path / "nothing.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err
