"""How repeatable the profile probe is: the run-to-run spread of each figure over several
profiles of the same machine (files written by `ppe profile --out` or `bench_pmac.py
--save-profile`), at the working-set sizes they share.

    PYTHONPATH=. .venv/bin/python benchmarks/pmac_repeatability.py a.json b.json c.json ...

Prints, for one copy and for the sharing copies, the median, 90th percentile and largest
coefficient of variation across the profiles, and the five least repeatable figures.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from ppe.pmac import MachineProfile, profile_from_json


def _rate(p: MachineProfile, key: tuple[str, str, int], size: int) -> float | None:
    for c in p.memory:
        if (c.pattern, c.kind, c.copies) == key:
            return next((pt.rate.value for pt in c.points if pt.bytes == size), None)
    return None


def main(paths: list[str]) -> None:
    profiles = [profile_from_json(Path(p).read_text()) for p in paths]
    if len(profiles) < 2:
        raise SystemExit("give at least two profiles")
    loads = [p.machine.get("load_average", ["?"])[0] for p in profiles]
    print(f"{len(profiles)} profiles; load average (1 min) when measured: {loads}")
    for copies in sorted({c.copies for c in profiles[0].memory}):
        cvs = []
        for c in profiles[0].memory:
            if c.copies != copies:
                continue
            key = (c.pattern, c.kind, copies)
            for pt in c.points:
                vals = [_rate(p, key, pt.bytes) for p in profiles]
                if all(v is not None for v in vals):
                    got = [v for v in vals if v is not None]
                    cvs.append((statistics.stdev(got) / statistics.mean(got), c.name, pt.bytes))
        cvs.sort()
        p90 = cvs[int(0.9 * (len(cvs) - 1))][0]
        print(
            f"{copies} copies: {len(cvs)} figures, coefficient of variation median "
            f"{statistics.median(v for v, _, _ in cvs):.1%}, 90th percentile {p90:.1%}, "
            f"largest {cvs[-1][0]:.1%}"
        )
        for v, name, size in cvs[-5:][::-1]:
            print(f"    {name} at {size >> 10} KiB: {v:.1%}")
    for group, figures in (("flops", "flops"), ("overheads", "overheads")):
        for kind in getattr(profiles[0], figures):
            figs: list[float] = [getattr(p, figures)[kind].value for p in profiles]
            print(f"{group} {kind}: {statistics.stdev(figs) / statistics.mean(figs):.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
