"""Coverage of served intervals before and after recalibration from reported runs, offline.

Replays (served prediction, actual) pairs in time order; each run's interval is recalibrated
from the runs of its group that ended before it was served, as the service does
(``ppe.evaluation.recalibration.replay_coverage``). No MPI run, no service: (a) synthetic
sequences whose truth is known, (b) ``ppe replay`` reports over the real Bitbrains traces
(predicted interval and simulated actual makespan per start and strategy).

    .venv/bin/python benchmarks/bench_live_recalibration.py [--replay REPORT.json ...]
        [--traces DIR --starts 200 --hosts 4 --n 2000 --iterations 600] [--min-runs 8]

``[scaled]`` rows use a normalised score (the log error over the model's own log half-width)
instead of the service's ``|log(actual / mean)|``: a comparison, not what is served.
With ``--traces`` it runs the replay itself (one process, ~20-60 s for 200 starts) with the
strategies mean, conservative and expected and no re-planning.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppe.evaluation.recalibration import (  # noqa: E402
    DEFAULT_LAST,
    DEFAULT_MIN_RUNS,
    RATIO,
    SCALED,
    Pair,
    ReplayCoverage,
    pairs_from_replay,
    replay_coverage,
)

HEAD = (
    f"{'sequence':<52}{'runs':>6}{'recal':>7}{'model':>8}{'served':>8}"
    f"{'model*':>8}{'served*':>8}{'width x':>9}{'w model':>9}{'w served':>9}"
)


def row(name: str, c: ReplayCoverage) -> str:
    def pct(k: int, n: int) -> str:
        return f"{100 * k / n:7.1f}%" if n else "      -"

    def num(x: float | None, fmt: str) -> str:
        return f"{'-':>9}" if x is None else f"{x:>9{fmt}}"

    return (
        f"{name:<52}{c.runs:>6}{c.recalibrated:>7}{pct(c.inside_model, c.runs)}"
        f"{pct(c.inside_served, c.runs)}{pct(c.inside_model_recal, c.recalibrated)}"
        f"{pct(c.inside_served_recal, c.recalibrated)}{num(c.median_factor, '.2f')}"
        f"{num(c.median_width_model, '.1%')}{num(c.median_width_served, '.1%')}"
    )


def pooled(parts: Sequence[ReplayCoverage]) -> ReplayCoverage:
    """Counts summed over independent sequences; the medians' medians."""

    def med(xs: Sequence[float | None]) -> float | None:
        got = [x for x in xs if x is not None]
        return float(np.median(got)) if got else None

    return ReplayCoverage(
        runs=sum(p.runs for p in parts),
        recalibrated=sum(p.recalibrated for p in parts),
        inside_model=sum(p.inside_model for p in parts),
        inside_served=sum(p.inside_served for p in parts),
        inside_model_recal=sum(p.inside_model_recal for p in parts),
        inside_served_recal=sum(p.inside_served_recal for p in parts),
        median_factor=med([p.median_factor for p in parts]),
        median_width_model=med([p.median_width_model for p in parts]),
        median_width_served=med([p.median_width_served for p in parts]),
    )


def synthetic(
    rng: np.random.Generator,
    runs: int,
    sigma: float,
    half_width: float,
    bias: float = 1.0,
    groups: int = 1,
) -> list[Pair]:
    """``actual = mean x bias x lognormal(sigma)``; the served interval is ``mean x [1 - h,
    1 + h]``; runs of ``groups`` strategies interleaved, 30 s apart, ~18 s long."""
    out = []
    for i in range(runs * groups):
        mean = 18.0 * math.exp(0.05 * rng.standard_normal())  # predictions vary a little
        actual = mean * bias * math.exp(sigma * rng.standard_normal())
        low, high = mean * (1 - half_width), mean * (1 + half_width)
        out.append(Pair(30.0 * i, mean, low, high, actual, 0.95, f"s{i % groups}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replay", action="append", default=[], help="ppe replay JSON report")
    ap.add_argument("--traces", default=None, help="run a replay over these traces first")
    ap.add_argument("--starts", type=int, default=200)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--iterations", type=int, default=600)
    ap.add_argument("--min-runs", type=int, default=DEFAULT_MIN_RUNS)
    ap.add_argument("--last", type=int, default=DEFAULT_LAST)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)

    def cov(pairs: Sequence[Pair], kind: str = RATIO) -> ReplayCoverage:
        return replay_coverage(pairs, a.min_runs, a.last, kind)

    print(f"min_runs {a.min_runs}, last {a.last}, nominal 95 %")
    print("model/served: coverage over all runs; * over the runs that were recalibrated;")
    print("width x: median served/model width; w: median (high - low) / mean, recalibrated runs")
    print(HEAD)
    print("(a) synthetic, truth known")
    # The ppe-sor experiment's shape: 4 strategies x 20 runs, served +-4 %, runs spread 8 %
    # (coverage ~45-85 % there); 200 independent experiments pooled.
    for sigma, h, bias in ((0.08, 0.04, 1.0), (0.08, 0.04, 0.95), (0.04, 0.04, 1.0)):
        seqs = [synthetic(rng, 20, sigma, h, bias, groups=4) for _ in range(200)]
        name = f"4x20 runs, sigma {sigma}, +-{h:.0%}, bias {bias}, x200"
        print(row(name, pooled([cov(q) for q in seqs])))
    for sigma, h, bias in ((0.2, 0.05, 1.0), (0.1, 0.05, 0.94)):
        print(
            row(
                f"1000 runs, sigma {sigma}, +-{h:.0%}, bias {bias}",
                cov(synthetic(rng, 1000, sigma, h, bias)),
            )
        )
    # A model already right: the served interval is the truth's own 95 % interval.
    right = synthetic(rng, 1000, 0.1, math.exp(1.96 * 0.1) - 1)
    right = [Pair(p.time, p.mean, p.mean * math.exp(-0.196), p.high, p.actual) for p in right]
    print(row("1000 runs, model already right (sigma 0.1)", cov(right)))

    reports = [(Path(p).name, json.loads(Path(p).read_text())) for p in a.replay]
    if a.traces:
        from ppe.replay.experiment import run_replay

        flat = {
            "traces": [a.traces],
            "starts": a.starts,
            "hosts": a.hosts,
            "n": a.n,
            "iterations": a.iterations,
            "strategies": ["mean", "conservative", "expected"],
            "replan": [],
            "seed": a.seed,
            "include_runs": True,
        }
        reports.append((f"replay n {a.n} I {a.iterations}", run_replay(flat)))
    if reports:
        print("(b) ppe replay over real traces: predicted interval vs simulated actual")
    for name, report in reports:
        pairs = pairs_from_replay(report)
        for s in sorted({p.group for p in pairs}):
            mine = [p for p in pairs if p.group == s]
            print(row(f"{name} {s}", cov(mine)))
            print(row(f"{name} {s} [scaled]", cov(mine, SCALED)))
        print(row(f"{name} all strategies", cov(pairs)))
        print(row(f"{name} all strategies [scaled]", cov(pairs, SCALED)))


if __name__ == "__main__":
    main()
