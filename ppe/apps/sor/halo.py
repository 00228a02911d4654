"""A rank's halo-exchange times per neighbour, summarised small for the run report.

Each half-iteration a rank receives one edge row from each chain neighbour (a ``Sendrecv``
whose receive is that neighbour's row). The time of that call is the transfer (latency plus
bytes over bandwidth) **plus** however long this rank waited for the neighbour to reach the
exchange: a slower or more loaded neighbour makes every receive wait for its compute. The
waits only ever add, so the exchanges without a wait, those where the neighbour was already
waiting, are the fastest ones. :func:`summarise` keeps the mean of the fastest
:data:`FAST_SHARE` of them (at least one) as the transfer time:

* the mean over all exchanges, or the median, is dominated by waits as soon as the ranks are
  imbalanced (the faster rank waits at nearly every exchange);
* the minimum alone is the single luckiest exchange, biased low by timer and scheduling
  noise and with no spread to judge it by;
* the fastest 10 % of a run's hundreds of exchanges are many enough to average the noise and,
  with the slower rank of the pair finding its neighbour waiting at most exchanges, few
  enough to hold no wait. Their standard deviation and count give the statistic's standard
  error.

When both ranks of a pair always wait (each is slower half the time) the fastest 10 % are
still the exchanges where the neighbour came first. The calibration (``ppe.evaluation.
calibration``) takes, per run and link, the smaller of its two ranks' statistics.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

#: Share of a neighbour's exchanges, the fastest, whose mean is the transfer time.
FAST_SHARE = 0.1


def fast_mean(times: Sequence[float], share: float = FAST_SHARE) -> tuple[float, float, int]:
    """The mean of the fastest ``share`` of ``times`` (at least one), their standard
    deviation (0 for one) and how many they are."""
    if not times:
        raise ValueError("no exchange times")
    k = max(1, math.ceil(share * len(times)))
    fastest = sorted(times)[:k]
    sd = statistics.stdev(fastest) if k > 1 else 0.0
    return statistics.fmean(fastest), sd, k


def summarise(peer: int, nbytes: int, times: Sequence[float]) -> dict[str, Any]:
    """One neighbour's entry in the report: ``peer`` (its rank), ``bytes`` per message,
    ``exchanges``, ``fast_s`` (:func:`fast_mean`) with ``fast_sd`` and ``fast_n``, and
    ``min_s``/``median_s`` for comparison (the median includes the waits)."""
    fast, sd, k = fast_mean(times)
    return {
        "peer": peer,
        "bytes": nbytes,
        "exchanges": len(times),
        "fast_s": round(fast, 9),
        "fast_sd": round(sd, 9),
        "fast_n": k,
        "min_s": round(min(times), 9),
        "median_s": round(statistics.median(times), 9),
    }


def halo_report(times: dict[int, list[float]], nbytes: dict[int, int]) -> list[dict[str, Any]]:
    """Every neighbour this rank received from, in rank order."""
    return [summarise(peer, nbytes[peer], times[peer]) for peer in sorted(times) if times[peer]]
