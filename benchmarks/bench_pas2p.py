"""PAS2P analysis: how long the signature of a trace with 1 million events takes (issue 22's
target: under 30 s).

The trace is synthetic, built in memory, and shaped like ppe-sor's: ``--ranks`` ranks in a
chain, each step a compute burst (1 ms, ±10 % jitter from a fixed seed) followed by halo
swaps with both neighbours, and an all-rank collective every 10 steps. There are as many steps
as needed to reach ``--events`` events. The script prints the time of the logical clock and
of the phases, the CPU time of this process, and the load average (the machine is shared).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_pas2p.py [--events 1000000 --ranks 4]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from ppe.pas2p import Event, logical_trace, signature


def chain_trace(events: int, ranks: int, seed: int = 1) -> list[Event]:
    rng = random.Random(seed)
    per: list[list[Event]] = [[] for _ in range(ranks)]
    # events per step: a burst and a send and receive per neighbour on every rank
    per_step = ranks + 4 * (ranks - 1)
    t = 0.0
    step = 0
    while sum(map(len, per)) + per_step + ranks <= events:
        c = 1e-3 * (1 + rng.uniform(-0.1, 0.1))
        for r in range(ranks):
            per[r].append(Event(r, "compute", None, 0, None, t, t + c, f"r{r}"))
        t += c
        for tag, shift in ((1, -1), (2, +1)):  # up, then down, as ppe-sor's Sendrecv pairs
            for r in range(ranks):
                dst, src = r + shift, r - shift
                if 0 <= dst < ranks:
                    per[r].append(Event(r, "send", dst, 6416, tag, t, t + 1e-5, f"r{r}"))
                if 0 <= src < ranks:
                    per[r].append(Event(r, "recv", src, 6416, tag, t, t + 1e-5, f"r{r}"))
            t += 1e-5
        step += 1
        if step % 10 == 0:
            for r in range(ranks):
                per[r].append(Event(r, "collective", None, 8, None, t, t + 5e-5, f"r{r}"))
            t += 5e-5
    return [e for rank in per for e in rank]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--ranks", type=int, default=4)
    args = p.parse_args()
    trace = chain_trace(args.events, args.ranks)
    cpu0, t0 = time.process_time(), time.perf_counter()
    lt = logical_trace(trace)
    t1 = time.perf_counter()
    sig = signature(lt)
    t2, cpu1 = time.perf_counter(), time.process_time()
    top = sorted(sig.phases, key=lambda ph: -ph.weight)[:4]
    print(f"{len(trace)} events, {args.ranks} ranks, {len(sig.occurrences)} segments")
    print(f"logical clock {t1 - t0:.2f} s, phases {t2 - t1:.2f} s, total {t2 - t0:.2f} s wall")
    print(f"CPU {cpu1 - cpu0:.2f} s; load average {os.getloadavg()[0]:.2f}")
    print("heaviest phases (weight):", ", ".join(f"{ph.id} (x{ph.weight})" for ph in top))
    print(f"signature {sig.kept}, error {sig.error:+.3%}")


if __name__ == "__main__":
    main()
