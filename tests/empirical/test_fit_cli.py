"""`ppe model fit`: files in every format the importers read, the store (--app), the --json
document, the table, and a clear exit 2 for every bad input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ppe.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "examples" / "runs" / "kernels.csv"
EXTRAP = ROOT / "tests" / "runs" / "data"
REPORT_KEYS = {
    "model",
    "type",
    "requested_type",
    "cv_error",
    "app",
    "kernel",
    "metric",
    "system",
    "params",
    "fixed",
    "ranges",
    "coefficients",
    "residual_norm",
    "noise",
    "sigma",
    "dof",
    "n_points",
    "n_obs",
    "spread",
    "predictions",
}


def fit_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert cli_main(["model", "fit", *args, "--json"]) == 0, capsys.readouterr().err
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def fails(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Exit status 2, nothing on stdout, and the message on stderr."""
    assert cli_main(["model", "fit", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("ppe model fit: ")
    return captured.err


def write_csv(path: Path, rows: Sequence[tuple[float, float]], name: str = "n") -> Path:
    path.write_text(f"app,kernel,{name},time\n" + "".join(f"a,k,{x:g},{t!r}\n" for x, t in rows))
    return path


# ------------------------------------------------------------------------ files


def test_json_shape_on_the_measured_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    out = fit_json(
        capsys, str(KERNELS), "--kernel", "matmul", "--predict", "n=4096", "--predict", "n=256"
    )
    assert set(out) == REPORT_KEYS
    assert (out["app"], out["kernel"], out["metric"], out["system"]) == (
        "numpy",
        "matmul",
        "time",
        None,
    )
    assert out["type"] == out["requested_type"] == "search"
    assert out["params"] == ["n"] and out["fixed"] == {"p": 1.0}  # p is 1 in every run
    assert out["n_points"] == 10 and out["n_obs"] == 50
    assert out["coefficients"][0]["term"] == "1"
    for c in out["coefficients"][1:]:  # each term, as the formula writes it
        assert f"{abs(c['value']):.6g} * {c['term']}" in out["model"]
    assert 0 < out["cv_error"] < 0.2
    far, inside = out["predictions"]
    assert far["point"] == {"n": 4096.0, "p": 1.0} and far["extrapolated"] is True
    assert inside["point"] == {"n": 256.0, "p": 1.0} and inside["extrapolated"] is False
    for p in (far, inside):
        lo, hi = p["interval"]
        assert lo < p["mean"] < hi and p["confidence"] == 0.95
    # Extrapolation widens the interval (relative to the mean), it never narrows it.
    assert (far["interval"][1] - far["interval"][0]) / far["mean"] > (
        inside["interval"][1] - inside["interval"][0]
    ) / inside["mean"]
    # The measured mean at n=256 lies in the interval fitted over every size.
    measured = [
        float(r.split(",")[-1]) for r in KERNELS.read_text().splitlines() if ",matmul,256," in r
    ]
    assert inside["interval"][0] < np.mean(measured) < inside["interval"][1]
    # 5 repetitions at each size: the calibrated spread model, its coverage stated
    spread = out["spread"]
    assert spread["used"] is True and "n" in spread["model"]
    assert set(spread["coverage"]) == {"0.8", "0.9", "0.95"}
    assert spread["coverage"]["0.95"] >= 0.9 and spread["calibration"]["n"] == 50
    for p in (far, inside):
        lo, hi = p["spread"]["interval"]
        assert lo < p["mean"] < hi and p["spread"]["std"] > 0


def test_two_parameters_and_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    out = fit_json(capsys, str(KERNELS), "--kernel", "strips", "--predict", "n=2048,p=2")
    assert out["params"] == ["n", "p"] and out["fixed"] == {}
    assert out["ranges"] == {"n": [128.0, 1448.0], "p": [1.0, 2.0]}
    args = ["model", "fit", str(KERNELS), "--kernel", "strips", "--predict", "n=2048,p=2"]
    assert cli_main(args) == 0
    table = capsys.readouterr().out
    assert out["model"] in table
    assert f"{out['cv_error']:.2%}" in table
    assert "n=2048, p=2" in table and "extrapolated" in table
    lo, hi = out["predictions"][0]["interval"]
    assert f"[{lo:.4g}, {hi:.4g}]" in table
    for c in out["coefficients"]:
        assert f"{c['value']:.6g}" in table


@pytest.mark.parametrize(
    ("name", "args", "kernel", "metric"),
    [
        ("extrap_input.txt", [], "example", "time"),
        ("extrap_one_parameter_3.txt", ["--metric", "flops"], "compute", "flops"),
        ("extrap_experiment_MP.txt", ["--kernel", "met2"], "met2", "time"),
        ("extrap_input1.json", [], "sweep", "time"),
        ("extrap_json_test_input.jsonl", [], "total", "metr"),
    ],
)
def test_extrap_files(
    capsys: pytest.CaptureFixture[str], name: str, args: list[str], kernel: str, metric: str
) -> None:
    out = fit_json(capsys, str(EXTRAP / name), *args)
    assert (out["kernel"], out["metric"]) == (kernel, metric)
    assert out["app"] == Path(name).stem  # Extra-P files name no application
    assert out["n_points"] >= 3 and out["predictions"] == []


def test_extrap_text_one_region_fitted_directly_with_prophecy_types(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = str(EXTRAP / "extrap_input.txt")
    cubic = fit_json(capsys, path, "--type", "cubic", "--predict", "p=128")
    assert cubic["type"] == "cubic" and len(cubic["coefficients"]) == 4
    assert [c["term"] for c in cubic["coefficients"]] == ["1", "p", "p^2", "p^3"]
    auto = fit_json(capsys, path, "--type", "unknown")
    assert auto["requested_type"] == "unknown"
    assert auto["type"] in ("linear", "quadratic", "cubic", "poly4")  # 5 points fix at most 5
    # Prophecy's pick has the least residual norm of the types it could fit.
    assert auto["residual_norm"] <= cubic["residual_norm"]


def test_graph_type_recovers_known_coefficients(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rows = [(x, 3.0 + 0.25 * x * x) for x in (2, 4, 8, 16, 32, 64) for _ in range(2)]
    out = fit_json(capsys, str(write_csv(tmp_path / "q.csv", rows)), "--type", "quadratic")
    coef = [c["value"] for c in out["coefficients"]]
    assert coef == pytest.approx([3.0, 0.0, 0.25], abs=1e-9)
    # Prophecy's types get the search's cross-validated error: ~0 for the true type, not for
    # a wrong one.
    assert out["cv_error"] == pytest.approx(0.0, abs=1e-9)
    line = fit_json(capsys, str(tmp_path / "q.csv"), "--type", "linear")
    assert line["cv_error"] > 0.05


def test_search_finds_n_log_n_on_noisy_runs(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(7)
    rows = [
        (x, float((0.01 + 2e-6 * x * np.log2(x)) * (1 + 0.02 * rng.standard_normal())))
        for x in 2.0 ** np.arange(6, 15)
        for _ in range(4)
    ]
    out = fit_json(capsys, str(write_csv(tmp_path / "nlogn.csv", rows)), "--predict", "n=65536")
    assert [c["term"] for c in out["coefficients"]] == ["1", "n * log2(n)"]
    truth = 0.01 + 2e-6 * 65536 * 16
    lo, hi = out["predictions"][0]["interval"]
    assert lo < truth < hi


def test_fit_from_the_store(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'ppe.db'}"
    assert cli_main(["runs", "import", str(KERNELS), "--db", db]) == 0
    capsys.readouterr()
    stored = fit_json(
        capsys, "--app", "numpy", "--kernel", "sort", "--predict", "n=1e6", "--db", db
    )
    from_file = fit_json(capsys, str(KERNELS), "--kernel", "sort", "--predict", "n=1e6")
    assert stored["model"] == from_file["model"]
    assert stored["predictions"][0]["mean"] == pytest.approx(from_file["predictions"][0]["mean"])
    err = fails(capsys, "--app", "numpy", "--db", db)
    assert "kernels" in err and "--kernel" in err
    err = fails(capsys, "--app", "nobody", "--db", db)
    assert "no completed runs" in err


# ------------------------------------------------------------------------ bad input


def test_too_few_points_for_the_coefficients(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = str(write_csv(tmp_path / "three.csv", [(2, 1.0), (4, 2.0), (8, 3.5)]))
    assert "cannot fix 4 coefficients" in fails(capsys, path, "--type", "cubic")
    short = str(write_csv(tmp_path / "two.csv", [(2, 1.0), (4, 2.0)]))
    assert "at least 3" in fails(capsys, short)


def test_a_single_value_of_the_parameter(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = str(write_csv(tmp_path / "one.csv", [(100, 1.0), (100, 1.1), (100, 0.9)]))
    assert "single value" in fails(capsys, path)
    err = fails(capsys, str(KERNELS), "--kernel", "matmul", "--x", "p")
    assert "'p' is 1 in every run" in err
    err = fails(capsys, str(KERNELS), "--kernel", "matmul", "--predict", "n=512,p=4")
    assert "--predict n=512,p=4" in err and "'p' was 1 in every run" in err


@pytest.mark.parametrize("kind", ["search", "inverse_linear"])
def test_non_positive_values_under_a_log_or_an_inverse(tmp_path: Path, capsys, kind: str) -> None:  # type: ignore[no-untyped-def]
    rows = [(x, 1.0 + x) for x in (0, 1, 2, 4, 8, 16)]
    assert "> 0" in fails(capsys, str(write_csv(tmp_path / "z.csv", rows)), "--type", kind)


def test_nan_in_the_runs_or_the_points(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "nan.csv"
    bad.write_text("app,kernel,n,time\na,k,2,1.0\na,k,4,nan\na,k,8,3.0\n")
    assert "line 3" in fails(capsys, str(bad))
    for point in ("n=nan", "n=inf"):
        assert "finite" in fails(capsys, str(KERNELS), "--kernel", "matmul", "--predict", point)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "give a FILE of runs, or --app"),
        ([str(KERNELS)], "2 apps (numpy, sor); name one (--app)"),
        ([str(KERNELS), "--app", "numpy"], "kernels (fft2, matmul, solve, sort); name one"),
        ([str(KERNELS), "--kernel", "nothing"], "no completed runs of kernel 'nothing'"),
        ([str(KERNELS), "--kernel", "sort", "--type", "cubical"], "unknown --type 'cubical'"),
        ([str(KERNELS), "--kernel", "sort", "--predict", "n"], "expected NAME=VALUE"),
        ([str(KERNELS), "--kernel", "sort", "--predict", "n=1,n=2"], "n is given twice"),
        ([str(KERNELS), "--kernel", "sort", "--predict", "n=big"], "'big' is not a number"),
        ([str(KERNELS), "--kernel", "sort", "--predict", "m=8"], "no parameter 'm'"),
        ([str(KERNELS), "--kernel", "sort", "--x", "q"], "unknown parameter 'q'"),
        ([str(KERNELS), "--kernel", "sort", "--db", "sqlite://"], "--db reads the store"),
        (["missing.csv"], "missing.csv: No such file"),
    ],
)
def test_bad_input_exits_2_saying_why(capsys, args: list[str], says: str) -> None:  # type: ignore[no-untyped-def]
    assert says in fails(capsys, *args)


def test_a_file_that_is_not_runs(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    junk = tmp_path / "junk.txt"
    junk.write_bytes(b"\xff\xfe not text")
    assert "not UTF-8" in fails(capsys, str(junk))
    header = tmp_path / "header.csv"
    header.write_text("a,b,c\n1,2,3\n")
    assert "header" in fails(capsys, str(header))


# ------------------------------------------------------------------------ next runs


def test_suggested_runs_narrow_the_target_interval(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--suggest N lists N runnable points (fixed parameters included); measuring them
    narrows the 95 % interval at the --predict point more than as many runs at the smallest
    measured size would."""
    rng = np.random.default_rng(11)

    def truth(n: float) -> float:
        return 0.5 + 2e-4 * n**2

    def run(n: float) -> tuple[float, float]:
        return (n, truth(n) * (1 + 0.03 * rng.standard_normal()))

    sizes = [8.0, 16.0, 32.0, 64.0, 128.0]
    rows = [run(n) for n in sizes for _ in range(3)]
    path = write_csv(tmp_path / "q.csv", rows)
    out = fit_json(capsys, str(path), "--predict", "n=1024", "--suggest", "3")
    suggested = out["suggested"]
    assert len(suggested) == 3 and all(set(p) == {"n"} for p in suggested)
    assert out["suggested_per"] == "run"

    def width_after(extra: list[float], name: str) -> float:
        more = write_csv(tmp_path / name, rows + [run(n) for n in extra])
        lo, hi = fit_json(capsys, str(more), "--predict", "n=1024")["predictions"][0]["interval"]
        return float(hi - lo)

    planned = width_after([p["n"] for p in suggested], "planned.csv")
    small = width_after([sizes[0]] * 3, "small.csv")
    assert planned < small
    # fixed parameters come back in each point; the table lists them
    assert (
        cli_main(
            [
                "model",
                "fit",
                str(KERNELS),
                "--kernel",
                "matmul",
                "--predict",
                "n=4096",
                "--suggest",
                "2",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "measure next" in table and table.count(", p=1\n") == 2


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--suggest", "2"], "give --predict"),
        (["--suggest", "0", "--predict", "n=4096"], "at least 1 run"),
    ],
)
def test_suggest_bad_input(capsys, args: list[str], says: str) -> None:  # type: ignore[no-untyped-def]
    assert says in fails(capsys, str(KERNELS), "--kernel", "matmul", *args)
