"""PAS2P signatures against full runs (issue 22): ppe-sor and ppe-cg, two sizes each.

For each case, on 2 ranks pinned to this machine's 2 cores:

1. one traced full run gives the signature (``ppe pas2p analyze --json``, keep 0.99,
   tolerance 0.5);
2. **dedicated**: ``--runs`` traced full runs (the run's time is its traced span, first event
   to last, as the signature's weights count it) and ``--runs`` signature runs, alternating;
   each signature run (traced too, to a scratch file, so both carry the tracer's cost) against
   the median full run (goal: within 5 % on every case) and its cost, the signature run's own
   time from set-up to end, over that median (goal: at most 10 %);
3. **loaded**: ``ppe loadgen`` replays the steadiest busy Bitbrains trace (as
   ``sor_experiment.py`` picks it) on both cores, at speed 1 from ``--loaded`` start times 5
   minutes apart (each one trace step, so one duty); at each, a signature run and then a full
   run: is the full run inside the signature's 95 % interval?

    .venv/bin/python benchmarks/pas2p_signature.py                 # ~5 minutes
    .venv/bin/python benchmarks/pas2p_signature.py --quick         # one small case, ~1 minute

Needs a quiet machine: other work on the two cores is load the signature run and the full
run meet at different moments.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sor_experiment import TRACE_DIRS, env, mpiexec, pick_traces  # noqa: E402
from ppe.pas2p import logical_trace, read_traces, signature  # noqa: E402
from ppe.pas2p.report import to_dict  # noqa: E402


@dataclass(frozen=True)
class Case:
    app: str
    n: int
    args: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.app} n={self.n} " + " ".join(self.args)


CASES = (
    Case("sor", 1000, ("--iterations", "500", "--tolerance", "1e-30")),
    Case("sor", 2000, ("--iterations", "200", "--tolerance", "1e-30")),
    Case("cg", 1000, ("--iterations", "400", "--check-every", "25", "--checkpoint-every", "100")),
    Case("cg", 2000, ("--iterations", "200", "--check-every", "25", "--checkpoint-every", "50")),
)
QUICK = (Case("sor", 600, ("--iterations", "200", "--tolerance", "1e-30")),)


def launch(case: Case, *more: str) -> dict[str, Any]:
    program = str(Path(sys.executable).parent / f"ppe-{case.app}")
    cmd = [mpiexec(), "-n", "2", program, "--pin", "--n", str(case.n), *case.args, *more]
    if case.app == "sor":
        cmd.append("--offline")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env(), check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def traced(case: Case, tmp: Path, name: str) -> tuple[float, list[Path]]:
    """A full run with --trace: its span (first event to last over both ranks) and files."""
    base = tmp / f"{name}.jsonl"
    launch(case, "--trace", str(base))
    files = [Path(f"{base}.{r}") for r in range(2)]
    events = read_traces(files)
    return max(e.end for e in events) - min(e.start for e in events), files


def sig_run(case: Case, sig: Path, repeats: int, *extra: str) -> dict[str, Any]:
    """Traced as the full runs are (to a scratch file), so both carry the tracer's cost;
    ``extra``: more of the application's options (``--warmup``, ``--settle``)."""
    scratch = sig.with_suffix(".sigrun.jsonl")
    return launch(
        case, "--signature", str(sig), "--repeats", str(repeats), "--trace", str(scratch), *extra
    )


def tuned(args: argparse.Namespace) -> tuple[str, ...]:
    """The signature options given on the command line (the applications' defaults else)."""
    out: tuple[str, ...] = ()
    if args.warmup is not None:
        out += ("--warmup", str(args.warmup))
    if args.settle is not None:
        out += ("--settle", str(args.settle))
    return out


def loadgens(trace: Path, offset: float) -> list[subprocess.Popen[bytes]]:
    ppe = [sys.executable, "-m", "ppe", "loadgen", str(trace), "--offset", f"{offset:.0f}"]
    procs = [
        subprocess.Popen([*ppe, "--core", str(c)], env=env(), stdout=subprocess.DEVNULL)
        for c in (0, 1)
    ]
    time.sleep(1.0)
    return procs


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=10)


def run_case(case: Case, args: argparse.Namespace, tmp: Path, load: Path) -> dict[str, Any]:
    span, files = traced(case, tmp, f"{case.app}-{case.n}-base")
    sig = signature(logical_trace(read_traces(files)), keep=0.99, tolerance=0.5)
    sig_file = tmp / f"{case.app}-{case.n}.json"
    sig_file.write_text(json.dumps(to_dict(sig)))
    full, preds, defaults = [], [], []
    for i in range(args.runs):
        full.append(traced(case, tmp, f"{case.app}-{case.n}-{i}")[0])
        preds.append(sig_run(case, sig_file, args.repeats, *tuned(args)))
        if args.compare_defaults:
            defaults.append(sig_run(case, sig_file, args.repeats)["predicted_s"])
    actual = statistics.median(full)
    errors = [p["predicted_s"] / actual - 1 for p in preds]
    costs = [p["cost_s"] / actual for p in preds]
    inside = [p["interval_s"][0] <= actual <= p["interval_s"][1] for p in preds]
    loaded = []
    for k in range(args.loaded):
        procs = loadgens(load, args.load_offset + 300 * k + 5)
        try:
            p = sig_run(case, sig_file, args.loaded_repeats, *tuned(args))
            real = traced(case, tmp, f"{case.app}-{case.n}-loaded-{k}")[0]
        finally:
            stop(procs)
        lo, hi = p["interval_s"]
        loaded.append(
            {
                "predicted_s": p["predicted_s"],
                "interval_s": [lo, hi],
                "actual_s": real,
                "inside": lo <= real <= hi,
                "cost_s": p["cost_s"],
            }
        )
    return {
        "case": case.label,
        "phases": len(sig.phases),
        "kept": len(sig.kept),
        "base_s": span,
        "full_s": full,
        "predicted_s": [p["predicted_s"] for p in preds],
        "errors": errors,
        "costs": costs,
        "inside_dedicated": inside,
        "defaults_predicted_s": defaults,
        "loaded": loaded,
    }


def chosen_cases(names: list[str] | None, quick: bool) -> tuple[Case, ...]:
    if quick:
        return QUICK
    if not names:
        return CASES
    by_name = {f"{c.app}:{c.n}": c for c in CASES}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise SystemExit(f"unknown case {', '.join(unknown)} (known: {', '.join(by_name)})")
    return tuple(by_name[n] for n in names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="dedicated full and signature runs")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per phase (dedicated)")
    ap.add_argument("--loaded", type=int, default=3, help="loaded start times per case")
    ap.add_argument("--loaded-repeats", type=int, default=10, help="timed runs per phase, loaded")
    ap.add_argument("--load-offset", type=float, default=86_400.0, help="trace s of the first")
    ap.add_argument("--quick", action="store_true", help="one small SOR case")
    ap.add_argument(
        "--case",
        action="append",
        metavar="APP:N",
        help="only these of the four cases (sor:1000, cg:2000, ...; repeatable)",
    )
    ap.add_argument("--warmup", type=int, help="the applications' --warmup (their default)")
    ap.add_argument("--settle", type=float, help="the applications' --settle (their default)")
    ap.add_argument(
        "--compare-defaults",
        action="store_true",
        help="after each dedicated signature run, one more with the applications' defaults "
        "(its prediction beside the tuned one)",
    )
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args()
    directory = next(d for d in TRACE_DIRS if d.is_dir())
    _, steady = pick_traces(directory)
    print(f"load: {steady.path.name} on both cores (mean usage {steady.mean:.2f})")
    results = []
    with tempfile.TemporaryDirectory(prefix="pas2p-bench-") as tmp:
        for case in chosen_cases(args.case, args.quick):
            r = run_case(case, args, Path(tmp), steady.path)
            results.append(r)
            errs = ", ".join(f"{e:+.1%}" for e in r["errors"])
            print(
                f"{r['case']}: {r['kept']}/{r['phases']} phases kept; full runs "
                f"{', '.join(f'{s:.3f}' for s in r['full_s'])} s; predicted "
                f"{', '.join(f'{s:.3f}' for s in r['predicted_s'])} s ({errs}); cost "
                f"{max(r['costs']):.1%} at most; dedicated intervals holding the median "
                f"{sum(r['inside_dedicated'])}/{len(r['inside_dedicated'])}"
            )
            if r["defaults_predicted_s"]:
                actual = statistics.median(r["full_s"])
                print(
                    "  with the defaults: median prediction "
                    f"{statistics.median(r['defaults_predicted_s']) / actual - 1:+.1%}, tuned: "
                    f"{statistics.median(r['predicted_s']) / actual - 1:+.1%} of the median run"
                )
            for x in r["loaded"]:
                lo, hi = x["interval_s"]
                print(
                    f"  loaded: predicted {x['predicted_s']:.3f} [{lo:.3f}, {hi:.3f}] s, "
                    f"actual {x['actual_s']:.3f} s {'inside' if x['inside'] else 'OUTSIDE'}"
                )
    worst = max(abs(e) for r in results for e in r["errors"])
    cost = max(c for r in results for c in r["costs"])
    held = sum(x["inside"] for r in results for x in r["loaded"])
    total = sum(len(r["loaded"]) for r in results)
    print(
        f"dedicated: worst error {worst:.1%} (goal 5 %), worst cost {cost:.1%} (goal 10 %); "
        f"loaded: {held}/{total} actual runs inside the signature's 95 % interval"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
