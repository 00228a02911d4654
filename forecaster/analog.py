"""Horizon distributions conditioned on the present, by analogues.

`forecast_series` uses this for every horizon longer than one sample.

How a host's history becomes the stochastic input of a run that lasts ``horizon_s``.
Replay on the Bitbrains traces showed (see ppe/replay/README.md) that block means of the
whole recent history (the forecaster's unconditional horizon distribution) ignore the
state the host is in *now*: load epochs last hours, so a host idle now is likely idle
for the next hour and a saturated one likely stays saturated. The per-host mean error
of the run-average availability was 0.12 unconditional vs 0.04 conditional.
So the forecaster conditions on the present, by analogues: among all past windows of the
run's length, take those whose preceding state (mean of the last ``state_samples``
values) is nearest the current one, and use the distribution of their means, smoothed
by a Gaussian kernel (Silverman's bandwidth, with a floor) so a run of identical
analogues still leaves room for drift; 10 % of the weight goes to *all* past starts
(whatever the state), because epochs also change in ways the nearest analogues do not
show. The quantity is the availability a run effectively gets: work done / time to do
it (first passage), which a window mean understates when a slow epoch outlasts the
window. On the shared traces the per-host lower 1 % quantile was then crossed by 1.0 %
of actual runs (0.6 % at 0.3 %), vs 1.5 % (0.9 %) without the blend and 0.12 mean
error for the unconditional block means.

Second pass (issue 7, ``CPU_ANALOG``): the schedule's expected makespan is ruled by the
tail (a stall at 1 % availability), and the blend of *all* past starts put a bimodal
host's saturated share into every forecast ("already saturated", impossible for an idle
host), so hosts that stayed idle were avoided. Now analogues are matched on the state
*and* on the age of the present load epoch (switch hazards fall steeply with age), each
is shifted by the present state minus its own, and the blend goes to the state-only
analogues. Measured effects are in ppe/replay/README.md.

Third pass (``clock_hazard``): load follows the clock (some VMs are only ever loaded in office
hours, others at night), so the share of falls among the analogues is scaled by how often
the present state fell when it started near the present hour of the day, shrunk toward the
all-day share. A third matching rank for the hour did worse: it thinned the matches on state
and epoch age.

Fourth pass (``recency_s``): habits drift over days (a periodic job changes its period, an
application goes quiet for a week), so the matched analogues are weighed by how recent they
are (``exp(-age / recency_s)``); the state-only blend is not, and keeps the long memory of
rare falls.

Fifth pass (issue 17, ``min_support``): measured from outside (``ppe forecast-eval
--horizons``: random times, the mean availability over [T, T+H)), the 95 % intervals covered
0.95 up to 6 h but 0.85 at one day and 0.84 at three, and the issue reports a host idle for 28
h after a week half saturated that was told [0.984, 1.0] for three days. An analogue whose run
goes past the newest sample has no known outcome, and first passage assumed the newest value
persists: for a long run, the host's own idle spell said "stays idle". Now the ``support`` is
counted: analogues whose outcome the history holds, in independent episodes (starts at least
one horizon apart, so the hundreds of overlapping starts of one spell count once). With at
least ``min_support`` (10) the forecast is the analogue one as before (only labelled); below,
only the analogues with a known outcome are kept, at weight ``support / min_support``, the rest
goes to the unconditional distribution of every past window of the horizon, and the mixture is
widened around its mean by the Student-t predictive factor of the independent windows behind it
(means kept in the range the history took). The forecast says so (``fallback``: "blend",
"unconditional"). Coverage at 1 d went to 0.94 and at 3 d to 0.97, the pinball loss down by a
third; replay's ``expected``/``expected+replan`` rows stayed where they were
(ppe/replay/README.md). A semi-Markov switching model (:mod:`forecaster.switching`) was tried
beside it and not adopted (docs/architecture.md, 4.7).

Sixth pass (issue 17, ``floor_spread``): steady hosts over-covered at every horizon (0.972–0.978
at 5 min, 1 h, 6 h and 1 d): their analogues' outcomes agree to within less than the 0.005
floor that keeps a run of identical analogues of a variable host from claiming certainty. The
floor is now at most a tenth of the host's own standard deviation over the last week (and at
least 0.002), which leaves it whole for a host whose spread is 0.05 or more. Steady rows went
to 0.957–0.971 with equal or lower pinball loss; a floor of 0.002 for every host, tried in
session 30, had cost the planner (docs/architecture.md, 4.7).

Seventh pass (issue 17, ``prior_strength``, ``prior_reach``): a forecast resting on ten to
twenty independent analogues knows as much about a rare switch as ten to twenty coin flips:
none of them switching says the chance is below about 3 in ``support``, not zero. At 6 h the
supported forecasts of bimodal hosts (support 10 to 21) covered 0.90 while the fallbacks
covered 0.97. Now a supported forecast gives the host's past windows of the horizon the
weight of ``prior_strength`` (1) pseudo-episodes, ``c / (c + support)`` (the predictive of
``support`` episodes under that prior), tapered linearly to nothing at ``prior_reach`` (25)
episodes, where the analogues have seen the 5 % an interval leaves out. The 6-hour rows below
the band moved into it and their pinball loss fell by 5 to 8 %; the planner, whose 30 to 70
minute runs mostly rest on 25 to 100 episodes, moved little (``expected`` 1.162 -> 1.170 times
the oracle at seed 0, 1.278 -> 1.279 at seed 1; a reach of 40 cost it more; figures in
docs/architecture.md, 4.7).

Eighth pass (issue 17, ``short_ramp_s``): one sample ahead the next value mostly repeats the
present one (trace 41 repeats it exactly in 46 % of steps), and the 5-minute intervals covered
0.97-0.98 on idle and bimodal hosts. The state-only background stands for the present epoch
ending inside the window, a chance that grows with the window, yet it had half the weight at
every horizon. A window shorter than ``short_ramp_s`` (30 minutes) now gives it that weight
times its share of the half hour (one 5-minute sample: 0.083). Planning runs are untouched;
the re-planner, which forecasts 5 minutes ahead, gained. Lowering the kernel floor with the
window as well brought every 5-minute row into the band but cost the re-planner (figures in
docs/architecture.md, 4.7).

Ninth pass (issue 17, ``state_support``): the fallback bought its tails with a body wider than
the outcomes needed. At 6 h the analogues before the fallback scored a CRPS 15 % lower, and
the forecasts that fell back covered 0.96 on bimodal hosts where the supported ones covered
0.91. The weight the matched analogues lacked went straight to all past windows, whose means
spread over both of a bimodal host's modes in the proportions of the whole fortnight. Now it
goes first to the analogues of the present level alone (any epoch age) whose outcome is known,
in full from ``state_support`` (40) independent ones, less the support prior of their own
count, and only the rest to all past windows. Those analogues keep the switches that followed
the present level (the tails) without the other mode's whole share (the body). The CRPS at 6 h
fell from 0.058 to 0.057 at both seeds, with every row's coverage within 0.003 of before and
the planner's plans unchanged. Ten, as for the matched analogues, took bimodal 6 h below the
band (0.920), twenty to its edge (0.931); a stronger support prior lifted it but cost the
planner (docs/architecture.md, 4.7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.stats import t as student_t

from forecaster.distribution import Distribution
from forecaster.history import FloatArray
from forecaster.horizon import sample_spacing


@dataclass(frozen=True)
class AnalogOptions:
    """Knobs of :func:`analog_horizon` (defaults chosen on the shared traces, see above)."""

    lookback_s: float = 14 * 86400.0
    neighbours: float = 0.1  # share of past windows used as analogues
    min_neighbours: int = 40
    state_samples: int = 2
    floor_std: float = 0.005  # absolute kernel floor (availability units)
    # >0: the analogues' kernel floor is at most this share of the host's spread over the last
    # week (its standard deviation), and at least ``floor_min``: a steady host's window means
    # spread less than the floor a variable host's analogues need (sixth pass).
    floor_spread: float = 0.0
    floor_min: float = 0.002
    floor_window_s: float = 7 * 86400.0  # the history the host's spread is read from
    floor_rel: float = 0.0  # kernel floor relative to the mean (for bandwidths)
    components: int = 32  # analogues are summarised into this many mixture components
    first_passage: bool = True  # effective availability to finish the work, not window mean
    unconditional_weight: float = 0.1  # share of all past starts blended in (regime changes)
    relative: bool = False  # shift each analogue by (present state - its state)
    epoch_band: float = 0.0  # >0: also match the age of the current level (band: share of range)
    epoch_cap_s: float = 86400.0  # ages beyond this count as equal
    background: str = "all"  # blend target: "all" past starts, or "state" analogues (no age)
    clock_hazard: bool = False  # scale the chance of a fall by its rate at this hour of day
    clock_window_s: float = 3 * 3600.0  # width of the hour-of-day window for that rate
    clock_prior: float = 100.0  # pseudo-starts at the all-day rate (shrinks a sparse hour)
    recency_s: float = 0.0  # >0: weigh the matched analogues by exp(-age / recency_s)
    # Honest fallback (fifth pass): >0 drops analogues whose horizon runs past the history's end
    # and blends toward all past windows when fewer than this many independent ones remain.
    min_support: int = 0
    widen: float = 0.0  # extra kernel spread of a fallback, times the blend's missing share
    # Seventh pass: a supported forecast gives all past windows the weight of this many
    # pseudo-episodes (c / (c + support)), tapered to 0 at ``prior_reach`` episodes.
    prior_strength: float = 0.0
    prior_reach: int = 0
    #: Ninth pass (>0): a fallback gives the weight its matched analogues lack to the analogues
    #: of the present level alone before all past windows, in full from this many independent
    #: ones (:func:`_state_tier`).
    state_support: int = 0
    # Kernel floor of a fallback's distributions (None: floor_std). Window means over long
    # horizons spread less than the short-run analogues the floor was chosen for.
    fallback_floor_std: float | None = None
    #: Eighth pass: a horizon shorter than this (its window, samples times spacing) scales the
    #: background's weight by its share of it (:func:`_short_horizon`).
    short_ramp_s: float = 0.0
    #: The range the metric can take (CPU availability: [0, 1]); a widened fallback's spread
    #: stays within what a distribution on it can have (:func:`spread_cap`). None: unbounded.
    value_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not self.recency_s >= 0:
            raise ValueError(f"recency_s must be >= 0, got {self.recency_s!r}")
        if not (self.floor_spread >= 0 and self.floor_min >= 0):
            raise ValueError("floor_spread and floor_min must be >= 0")
        if not self.short_ramp_s >= 0:
            raise ValueError(f"short_ramp_s must be >= 0, got {self.short_ramp_s!r}")
        if not (self.prior_strength >= 0 and self.prior_reach >= 0):
            raise ValueError("prior_strength and prior_reach must be >= 0")
        if self.state_support < 0:
            raise ValueError(f"state_support must be >= 0, got {self.state_support!r}")
        if self.value_range is not None and not self.value_range[0] < self.value_range[1]:
            raise ValueError(f"value_range must be (low, high) with low < high: {self.value_range}")


DAY_S = 86400.0

CPU_ANALOG = AnalogOptions(
    relative=True,
    epoch_band=0.1,
    background="state",
    unconditional_weight=0.5,
    clock_hazard=True,
    recency_s=3 * DAY_S,
    min_support=10,
    widen=1.0,
    prior_strength=1.0,
    prior_reach=25,
    state_support=40,
    fallback_floor_std=0.002,
    value_range=(0.0, 1.0),
    floor_spread=0.1,
    short_ramp_s=1800.0,
)
#: The analogue method before the fallback (``ppe forecast-eval --horizons`` baseline).
LEGACY_ANALOG = replace(
    CPU_ANALOG,
    min_support=0,
    widen=0.0,
    fallback_floor_std=None,
    floor_spread=0.0,
    prior_strength=0.0,
    state_support=0,
    short_ramp_s=0.0,
)
BANDWIDTH_ANALOG = AnalogOptions(floor_std=0.0, floor_rel=0.005)


def analog_values(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float | None,
    opts: AnalogOptions = CPU_ANALOG,
    conditional: bool = True,
) -> FloatArray | None:
    """Run-average availability of the past starts whose preceding state is nearest now's
    (see :func:`_analogues`, which also says when each of them started)."""
    found = _analogues(timestamps, values, now, horizon_s, opts, conditional)
    return None if found is None else found.outcomes


class _Analogues(NamedTuple):
    outcomes: FloatArray  # what each analogue delivered (shifted to the present, if relative)
    starts: FloatArray  # when each of them started
    level: float  # the present state they were matched to
    positions: NDArray[np.int64]  # sample index of each start
    complete: NDArray[np.bool_]  # its outcome is known from the history (not extrapolated)
    width: int  # the horizon in samples
    window_s: float  # the horizon's window: ``width`` samples at the history's spacing

    def only(self, keep: NDArray[np.bool_]) -> _Analogues:
        return self._replace(
            outcomes=self.outcomes[keep],
            starts=self.starts[keep],
            positions=self.positions[keep],
            complete=self.complete[keep],
        )


def _analogues(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float | None,
    opts: AnalogOptions,
    conditional: bool,
) -> _Analogues | None:
    """Run-average availability of the past starts whose preceding state is nearest now's.

    With ``opts.first_passage`` the effective availability of getting a run's work done
    (see :func:`_first_passage`), otherwise the plain mean over the window. Uses samples
    with ``now - lookback_s <= t < now`` only; windows are counted in samples
    (``horizon_s`` / median spacing). ``conditional=False`` gives every past start (the
    unconditional distribution). None when the history is too short.
    """
    ts = np.asarray(timestamps, dtype=np.float64)
    xs = np.asarray(values, dtype=np.float64)
    keep = (ts < now) & (ts >= now - opts.lookback_s) & np.isfinite(xs)
    ts, xs = ts[keep], xs[keep]
    spacing = sample_spacing(ts)
    width = 1 if horizon_s is None else max(1, int(round(horizon_s / spacing)))
    k0 = opts.state_samples
    if xs.size < k0 + width + opts.min_neighbours // 4:
        return None
    csum = np.concatenate(([0.0], np.cumsum(xs)))
    last = xs.size if opts.first_passage else xs.size - width + 1
    j = np.arange(k0, last)  # window from j on, state [j - k0, j)
    state = (csum[j] - csum[j - k0]) / k0
    now_state = float(xs[-k0:].mean())
    k = min(j.size, max(opts.min_neighbours, int(opts.neighbours * j.size)))
    if conditional:
        dist = _rank(np.abs(state - now_state))
        if opts.epoch_band > 0:
            band = opts.epoch_band * float(np.ptp(xs))
            cap = max(1, int(round(opts.epoch_cap_s / spacing)))
            ages = np.log1p(
                _epoch_ages(xs, np.append(j, xs.size), np.append(state, now_state), band, cap)
            )
            dist = np.maximum(dist, _rank(np.abs(ages[:-1] - ages[-1])))
        nearest = j[np.argpartition(dist, k - 1)[:k]]
    else:
        nearest = j
    if opts.first_passage:
        out, complete = _first_passage(csum, xs, nearest, width)
    else:
        out = (csum[nearest + width] - csum[nearest]) / width
        complete = np.ones(nearest.size, dtype=bool)
    if opts.relative and conditional:
        out = np.clip(out + (now_state - state[nearest - k0]), xs.min(), xs.max())
    return _Analogues(
        out,
        ts[np.minimum(nearest, ts.size - 1)],
        now_state,
        nearest,
        complete,
        width,
        width * spacing,
    )


def _clock_distance(t: FloatArray, now: float) -> FloatArray:
    """Seconds between each time's hour of the day and ``now``'s (0 to 12 h, around the clock)."""
    d = np.mod(np.asarray(t, dtype=np.float64) - now, DAY_S)
    out: FloatArray = np.minimum(d, DAY_S - d)
    return out


def _rank(d: FloatArray) -> FloatArray:
    """How many values are strictly smaller (ties share the lowest rank)."""
    out: FloatArray = np.searchsorted(np.sort(d), d, side="left").astype(np.float64)
    return out


def _epoch_ages(
    xs: FloatArray, ends: NDArray[np.int64], level: FloatArray, band: float, cap: int
) -> FloatArray:
    """For each end index: how many samples just before it stayed within ``band`` of
    ``level`` (capped at ``cap``) — how long the present load epoch has lasted.

    "The last L samples all lie in the band" is monotone in L, so each end's age is found by
    bisection, with the window's min and max from a sparse table (O(1) per query).
    """
    ends = np.asarray(ends, dtype=np.int64)
    n = xs.size
    mx = np.full((1, n), -np.inf)
    mn = np.full((1, n), np.inf)
    mx[0], mn[0] = xs, xs
    while 2 ** mx.shape[0] <= min(cap, n):  # row k: min/max of xs[i : i + 2**k]
        h = 2 ** (mx.shape[0] - 1)
        up, down = np.full(n, -np.inf), np.full(n, np.inf)
        up[: n - h] = np.maximum(mx[-1, : n - h], mx[-1, h:])
        down[: n - h] = np.minimum(mn[-1, : n - h], mn[-1, h:])
        mx, mn = np.vstack((mx, up)), np.vstack((mn, down))
    lo = np.zeros(ends.size, dtype=np.int64)  # the band holds for the last lo samples
    hi = np.minimum(ends, cap)  # ... and the answer is at most hi
    while np.any(lo < hi):
        mid = np.maximum((lo + hi + 1) // 2, 1)
        k = np.floor(np.log2(mid)).astype(np.int64)
        first, second = np.maximum(ends - mid, 0), np.maximum(ends - 2**k, 0)
        top = np.maximum(mx[k, first], mx[k, second])
        bottom = np.minimum(mn[k, first], mn[k, second])
        inside = (lo < hi) & (top <= level + band) & (bottom >= level - band)
        lo = np.where(inside, mid, lo)
        hi = np.where(inside | (lo >= hi), hi, mid - 1)
    out: FloatArray = lo.astype(np.float64)
    return out


def _first_passage(
    csum: FloatArray, xs: FloatArray, starts: NDArray[np.int64], width: int
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Availability each analogue *effectively* delivered to a run of ``width`` samples.

    The run's work is what the host typically does in ``width`` samples; the analogue's
    time to get it done (its first passage) may be far longer than ``width`` when a slow
    epoch starts and persists — which is what stalls a real run, and what a window mean
    caps. Past the end of the history the newest value is assumed to persist; the second array
    says which analogues finished their work (and their window) inside the history.
    """
    n = xs.size
    full = starts + width <= n
    block = (csum[np.minimum(starts + width, n)] - csum[starts]) / width
    typical = float(np.median(block[full])) if full.any() else float(xs[-1])
    work = width * typical
    target = csum[starts] + work
    inside = target <= csum[n]
    pos = np.clip(np.searchsorted(csum, target, side="left"), 1, n)
    t_in = (pos - 1) + (target - csum[pos - 1]) / np.maximum(xs[pos - 1], 1e-12)
    t_out = n + (target - csum[n]) / max(float(xs[-1]), 1e-12)
    took = np.where(inside, t_in, t_out) - starts
    out: FloatArray = work / np.maximum(took, 1e-12)
    return out, inside & full


def _kernel_components(
    sample: FloatArray, opts: AnalogOptions, parts: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """A Gaussian-kernel density of ``sample`` as ``parts`` components (weights sum to 1).

    Sorted values are cut into equal-count groups; each group becomes one component
    with the group's mean and its spread plus the kernel's (Silverman's bandwidth, at
    least the floor), so mean and variance match the kernel density's.
    """
    x = np.sort(np.asarray(sample, dtype=np.float64))
    n = x.size
    sd = float(x.std())
    q75, q25 = np.percentile(x, [75, 25])
    scale = min(sd, (q75 - q25) / 1.34) if q75 > q25 else sd
    h = max(0.9 * scale * n**-0.2, opts.floor_std, opts.floor_rel * abs(float(x.mean())))
    groups = np.array_split(x, min(parts, n))
    weights = np.array([g.size for g in groups], dtype=np.float64) / n
    means = np.array([g.mean() for g in groups])
    stds = np.sqrt(np.array([g.var() for g in groups]) + h * h)
    return weights, means, stds


def kernel_distribution(
    sample: FloatArray, opts: AnalogOptions = CPU_ANALOG, background: FloatArray | None = None
) -> Distribution:
    """Kernel density of the analogues, blended with ``background`` (all past starts) at
    weight ``opts.unconditional_weight``; a point when nothing varies."""
    w, m, sd = _kernel_components(sample, opts, opts.components)
    if background is not None and background.size and opts.unconditional_weight > 0:
        bw, bm, bsd = _kernel_components(background, opts, max(4, opts.components // 2))
        e = opts.unconditional_weight
        w, m, sd = (
            np.concatenate(((1 - e) * w, e * bw)),
            np.concatenate((m, bm)),
            np.concatenate((sd, bsd)),
        )
    w = w / w.sum()
    mean = float(np.dot(w, m))
    std = float(math.sqrt(max(float(np.dot(w, sd**2 + (m - mean) ** 2)), 0.0)))
    n = int(sample.size)
    if not np.any(sd > 0) and np.ptp(m) == 0:
        return Distribution("point", [(1.0, mean, 0.0)], mean, 0.0, False, n)
    comps = [(float(a), float(b), float(c)) for a, b, c in zip(w, m, sd, strict=True)]
    return Distribution("mixture", comps, mean, std, False, n)


def analog_horizon(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float | None,
    opts: AnalogOptions = CPU_ANALOG,
) -> Distribution | None:
    """The run-average distribution conditioned on the present; None when history is short.

    With ``opts.min_support``, the ``support`` (independent analogues whose outcome the history
    knows, :func:`_episodes`) is counted and reported; below ``min_support`` the forecast falls
    back (:func:`_fallback`)."""
    opts = _spread_floor(timestamps, values, now, opts)
    found = _analogues(timestamps, values, now, horizon_s, opts, True)
    if found is None:
        return None
    opts = _short_horizon(opts, found.window_s)
    support = None
    if opts.min_support > 0:
        support = _episodes(found.positions[found.complete], found.width)
        if support < opts.min_support:
            return _fallback(timestamps, values, now, horizon_s, opts, found, support)
    state_only = None
    if opts.epoch_band > 0 and (opts.background == "state" or opts.clock_hazard):
        state_only = _analogues(
            timestamps, values, now, horizon_s, replace(opts, epoch_band=0.0), True
        )
    background = None
    if opts.unconditional_weight > 0:
        if opts.epoch_band > 0 and opts.background == "state":
            background = None if state_only is None else state_only.outcomes
        else:
            background = analog_values(timestamps, values, now, horizon_s, opts, conditional=False)
    ref = found if state_only is None else state_only
    dist = _weighted_kernel(found, ref, now, opts, opts, background)
    if support is None:
        return dist
    return replace(
        _with_prior(timestamps, values, now, horizon_s, opts, dist, support), support=support
    )


def prior_weight(support: int, opts: AnalogOptions) -> float:
    """The share of all past windows in a forecast resting on ``support`` independent
    analogues (seventh pass): ``c / (c + support)``, tapered linearly to 0 at ``prior_reach``."""
    if opts.prior_strength <= 0 or opts.prior_reach <= 0 or support >= opts.prior_reach:
        return 0.0
    return (
        opts.prior_strength / (opts.prior_strength + support) * (1.0 - support / opts.prior_reach)
    )


def _with_prior(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float | None,
    opts: AnalogOptions,
    dist: Distribution,
    support: int,
) -> Distribution:
    """``dist`` mixed with the kernel of every complete past window at :func:`prior_weight`."""
    weight = prior_weight(support, opts)
    past = _past_windows(timestamps, values, now, horizon_s, opts) if weight > 0 else None
    if past is None:
        return dist
    parts = [(1.0 - weight, dist), (weight, past[1])]
    return _combined(parts, 1.0, _seen_range(timestamps, values, now, opts), support, None, opts)


def _spread_floor(
    timestamps: FloatArray, values: FloatArray, now: float, opts: AnalogOptions
) -> AnalogOptions:
    """``opts`` with the kernel floor scaled to the host's spread over the ``floor_window_s``
    before ``now`` (``floor_spread``; the fallback's own floor is separate)."""
    if opts.floor_spread <= 0:
        return opts
    recent = values[(timestamps < now) & (timestamps >= now - opts.floor_window_s)]
    if recent.size == 0:
        return opts
    scaled = max(opts.floor_min, opts.floor_spread * float(recent.std()))
    return replace(opts, floor_std=min(opts.floor_std, scaled))


def _short_horizon(opts: AnalogOptions, window_s: float) -> AnalogOptions:
    """``opts`` for a window (:attr:`_Analogues.window_s`) shorter than ``short_ramp_s``: the
    background's weight times the window's share of it (eighth pass).

    The background (state-only analogues) stands for the present epoch ending inside the
    window, a chance that grows with the window's length; its weight was sized for half-hour
    runs, and one sample ahead it spread the mass of a next value that mostly repeats the
    present one.
    """
    if opts.short_ramp_s <= 0:
        return opts
    share = window_s / opts.short_ramp_s
    if share >= 1.0:
        return opts
    return replace(opts, unconditional_weight=opts.unconditional_weight * share)


def _fallback(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float | None,
    opts: AnalogOptions,
    found: _Analogues,
    support: int,
) -> Distribution | None:
    """Too few analogues with the whole horizon after them: back off toward wider evidence.

    An analogue whose window runs past the newest sample has no known outcome; the analogue
    method assumes the newest value persists, which is right for a short run and wrong for a
    long one: a host idle for a day was told by its own idle spell that it "stays idle" for
    three more (issue 17). Here only analogues with a known outcome are used, with weight
    ``support / min_support``. With ``state_support`` the rest goes first to the analogues of
    the present level alone (:func:`_state_tier`), then to the unconditional distribution of
    every past window of the horizon (``fallback="blend"``, or ``"unconditional"`` when nothing
    conditional is left). The mixture is then widened around its mean by the Student-t
    predictive factor of the independent windows it rests on (:func:`_widening`): a few windows
    say little about the spread of the next. None when no past window is complete (too short a
    history).
    """
    complete = found.only(found.complete)
    past = _past_windows(timestamps, values, now, horizon_s, opts)
    if past is None:
        return None
    everything, everywhere = past
    share = support / opts.min_support  # < 1 (else this is not called)
    kopts = _fallback_options(opts)
    backoff = opts.state_support > 0 and opts.epoch_band > 0
    level = None
    if share > 0 or backoff:
        state_only = _analogues(
            timestamps, values, now, horizon_s, replace(opts, epoch_band=0.0), True
        )
        level = None if state_only is None else state_only.only(state_only.complete)
    parts: list[tuple[float, Distribution]] = []
    if share > 0:
        parts.append((share, _known_kernel(complete, level, now, opts, kopts)))
    rest = 1.0 - share
    if backoff and level is not None:
        tier = _state_tier(level, found.width, now, opts, kopts)
        if tier is not None:
            parts.append((rest * tier[0], tier[1]))
            rest *= 1.0 - tier[0]
    if rest > 0:
        parts.append((rest, everywhere))
    episodes = max(support, _episodes(everything.positions, found.width))
    fallback = "unconditional" if len(parts) == 1 and rest > 0 else "blend"
    bounds = _seen_range(timestamps, values, now, opts)
    return _combined(parts, _widening(episodes, opts), bounds, support, fallback, kopts)


def _known_kernel(
    complete: _Analogues,
    level: _Analogues | None,
    now: float,
    opts: AnalogOptions,
    kopts: AnalogOptions,
) -> Distribution:
    """The kernel of the matched analogues whose outcome is known, weighted by recency and by
    this hour's chance of a fall, with the present level's known analogues as background."""
    ref = complete if level is None else level
    background = ref.outcomes if opts.unconditional_weight > 0 else None
    return _weighted_kernel(complete, ref, now, opts, kopts, background)


def _state_tier(
    level: _Analogues, width: int, now: float, opts: AnalogOptions, kopts: AnalogOptions
) -> tuple[float, Distribution] | None:
    """The back-off between the matched analogues and all past windows (ninth pass): the
    analogues of the present level alone (any epoch age) whose outcome is known, and the share
    of the remaining weight they earn, ``min(1, support / state_support)`` less the
    :func:`prior_weight` of their own support. None when none is known."""
    if level.outcomes.size == 0:
        return None
    support = _episodes(level.positions, width)
    weight = min(1.0, support / opts.state_support) * (1.0 - prior_weight(support, opts))
    return weight, _weighted_kernel(level, level, now, opts, kopts)


def _past_windows(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float | None,
    opts: AnalogOptions,
) -> tuple[_Analogues, Distribution] | None:
    """Every past window of the horizon whose outcome the history holds, and their kernel (with
    the fallback's floor); None when there is none."""
    uncond = _analogues(timestamps, values, now, horizon_s, opts, False)
    if uncond is None or not uncond.complete.any():
        return None
    everything = uncond.only(uncond.complete)
    kopts = replace(_fallback_options(opts), unconditional_weight=0.0)
    return everything, kernel_distribution(everything.outcomes, kopts)


def _seen_range(
    timestamps: FloatArray, values: FloatArray, now: float, opts: AnalogOptions
) -> tuple[float, float]:
    """The range the history before ``now`` took over the lookback."""
    ts, xs = np.asarray(timestamps), np.asarray(values)
    seen = xs[(ts < now) & (ts >= now - opts.lookback_s) & np.isfinite(xs)]
    return float(seen.min()), float(seen.max())


def _episodes(index: NDArray[np.int64], width: int) -> int:
    """How many of these starts are at least ``width`` samples apart (greedy from the first):
    overlapping windows share their future, so they count as one piece of evidence."""
    count, last = 0, -np.inf
    for i in np.sort(index):
        if i - last >= width:
            count, last = count + 1, i
    return count


def _widening(episodes: int, opts: AnalogOptions) -> float:
    """Student-t predictive factor for a new draw from ``episodes`` independent ones, against
    the normal's (1 for many; 1.8 for four, the most three-day windows two weeks hold)."""
    if opts.widen <= 0 or episodes >= 1000:
        return 1.0
    n = max(episodes, 2)
    t = float(student_t.ppf(0.975, n - 1))
    return 1.0 + opts.widen * (t * math.sqrt(1.0 + 1.0 / n) / 1.959964 - 1.0)


def widened(
    dist: Distribution,
    episodes: int,
    bounds: tuple[float, float],
    opts: AnalogOptions = CPU_ANALOG,
    support: int = 0,
    fallback: str = "unconditional",
) -> Distribution:
    """``dist`` (a fallback resting on ``episodes`` independent windows) widened like the
    analogue fallback, and labelled with its ``support`` and ``fallback``."""
    # The kernel floor of short runs (not the fallback's): with no whole window of the horizon
    # in the history, nothing measured how little such windows spread.
    return _combined([(1.0, dist)], _widening(episodes, opts), bounds, support, fallback, opts)


def _fallback_options(opts: AnalogOptions) -> AnalogOptions:
    """The options a fallback's kernels use: its own floor, when it has one."""
    if opts.fallback_floor_std is None:
        return opts
    return replace(opts, floor_std=opts.fallback_floor_std)


def _combined(
    parts: list[tuple[float, Distribution]],
    stretch: float,
    bounds: tuple[float, float],
    support: int,
    fallback: str | None,
    opts: AnalogOptions,
) -> Distribution:
    """One mixture of weighted distributions, stretched around its mean by ``stretch`` (the
    components' means kept within ``bounds``, the range the history took, and the metric's
    ``value_range``: a stretched saturated mode below the availability floor would be a state
    the host never showed; a component without spread gets the kernel floor first, so a point
    can widen too). The spread is then capped (:func:`spread_cap`), never below the stretched
    floor: a history at the range's edge (an idle host's 1.0s) still widens."""
    lo, hi = _within(bounds, opts.value_range)
    comps = [(w * cw, m, sd) for w, d in parts for cw, m, sd in d.components]
    w = np.array([c[0] for c in comps])
    m = np.array([c[1] for c in comps])
    sd = np.array([c[2] for c in comps])
    w = w / w.sum()
    centre = float(np.dot(w, m))
    m = np.clip(centre + stretch * (m - centre), lo, hi)
    sd = stretch * (np.maximum(sd, opts.floor_std) if stretch > 1 else sd)
    mean = float(np.dot(w, m))
    between = float(np.dot(w, (m - mean) ** 2))
    within = float(np.dot(w, sd**2))
    if opts.value_range is not None:
        cap = max(spread_cap(mean, opts.value_range), stretch * opts.floor_std) ** 2
        if between + within > cap and within > 0:
            sd = sd * math.sqrt(max(cap - between, 0.0) / within)
            within = float(np.dot(w, sd**2))
    std = math.sqrt(max(between + within, 0.0))
    n = sum(d.n for _, d in parts)
    if not np.any(sd > 0) and np.ptp(m) == 0:
        return Distribution("point", [(1.0, mean, 0.0)], mean, 0.0, False, n, {}, support, fallback)
    out = [(float(a), float(b), float(c)) for a, b, c in zip(w, m, sd, strict=True)]
    return Distribution("mixture", out, mean, std, False, n, {}, support, fallback)


def _within(
    bounds: tuple[float, float], value_range: tuple[float, float] | None
) -> tuple[float, float]:
    """``bounds`` inside ``value_range`` (a history outside it is pulled to its nearest edge):
    with every mean in the range, the spread between them is within :func:`spread_cap`."""
    if value_range is None:
        return bounds
    low, high = value_range
    return min(max(bounds[0], low), high), max(min(bounds[1], high), low)


def spread_cap(mean: float, value_range: tuple[float, float]) -> float:
    """The largest standard deviation a distribution on ``value_range`` with this mean can
    have (Bhatia and Davis, 2000: variance <= (high - mean)(mean - low)). The Student-t
    stretch of a fallback resting on one window is 7.9x; on a new host's few samples with one
    outlier it made CPU availability 0.95 +/- 1.04, and the planner then gave that host 47 of
    1000 rows. Capped, the spread stays the widest honest one."""
    low, high = value_range
    m = min(max(mean, low), high)
    return math.sqrt((high - m) * (m - low))


def _falls(outcomes: FloatArray, level: float) -> NDArray[np.bool_]:
    """Outcomes that lost half of the present level or more: a change of load epoch."""
    out: NDArray[np.bool_] = outcomes < 0.5 * level
    return out


def _clock_factor(
    outcomes: FloatArray, starts: FloatArray, level: float, now: float, opts: AnalogOptions
) -> float:
    """How much likelier a fall is at this hour of the day than over the whole day.

    Among analogues of the present state, the share that fell when they started within
    ``clock_window_s`` of now's hour, against the share over all hours; the hour's count is
    shrunk toward the all-day share by ``clock_prior`` pseudo-starts, so an hour with few
    starts (or none that fell) moves the chance only as far as its evidence allows.
    """
    fell = _falls(outcomes, level)
    overall = float(fell.mean()) if fell.size else 0.0
    if overall <= 0.0:
        return 1.0
    near = _clock_distance(starts, now) <= opts.clock_window_s / 2
    rate = (float(fell[near].sum()) + opts.clock_prior * overall) / (
        float(near.sum()) + opts.clock_prior
    )
    return rate / overall


def _fall_weights(
    outcomes: FloatArray, level: float, factor: float, weights: FloatArray | None = None
) -> FloatArray:
    """Weights (on top of ``weights``) that scale the odds of a fall among ``outcomes`` by
    ``factor``."""
    w = np.ones(outcomes.size) if weights is None else np.asarray(weights, dtype=np.float64)
    fell = _falls(outcomes, level)
    p = float(w[fell].sum() / w.sum()) if outcomes.size else 0.0
    if p <= 0.0 or p >= 1.0 or factor == 1.0:
        return w
    new_p = factor * p / (factor * p + (1.0 - p))
    out: FloatArray = w * np.where(fell, new_p / p, (1.0 - new_p) / (1.0 - p))
    return out


def _weighted_kernel(
    sample: _Analogues,
    ref: _Analogues,
    now: float,
    opts: AnalogOptions,
    kopts: AnalogOptions,
    background: FloatArray | None = None,
) -> Distribution:
    """The kernel (with ``kopts``) of ``sample``'s outcomes resampled by recency
    (:func:`_recency_weights`) and by this hour's chance of a fall as judged among ``ref``
    (:func:`_clock_factor`), and of ``background`` resampled by that chance alone: the one
    weighting every analogue kernel gets."""
    weights = _recency_weights(sample.starts, now, opts.recency_s)
    if opts.clock_hazard and ref.outcomes.size:
        factor = _clock_factor(ref.outcomes, ref.starts, ref.level, now, opts)
        weights = _fall_weights(sample.outcomes, ref.level, factor, weights)
        if background is not None and background.size:
            background = _resample(background, _fall_weights(background, ref.level, factor))
    return kernel_distribution(_resample(sample.outcomes, weights), kopts, background)


def _recency_weights(starts: FloatArray, now: float, recency_s: float) -> FloatArray:
    """``exp(-age / recency_s)`` per analogue (all equal when ``recency_s`` is 0).

    A host's habits drift over days (a periodic job changes its period, an application
    goes quiet for a week), so among starts that match the present state and epoch age,
    the recent ones say more about what comes next. The matched analogues are weighted, and
    the level back-off that stands in for them in a fallback (:func:`_state_tier`); the
    state-only background blended into a forecast keeps the long memory of rare falls
    (weighting it too, replay gave a host that had not fallen for days a full share, and it
    fell).
    """
    ages = now - np.asarray(starts, dtype=np.float64)
    if recency_s <= 0 or ages.size == 0:
        return np.ones(ages.size)
    out: FloatArray = np.exp(-(ages - ages.min()) / recency_s)
    return out


def _resample(values: FloatArray, weights: FloatArray) -> FloatArray:
    """An equal-weight sample of the same size as ``values`` drawn with ``weights``
    (systematic resampling of the sorted values: deterministic, no randomness). Equal weights
    give ``values`` back as they are: the bandwidth inputs, unweighted, skip the sort."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0 or np.all(w == w[0]):
        return values
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(w[order])
    picks = (np.arange(values.size) + 0.5) / values.size
    idx = np.minimum(np.searchsorted(cum, picks * cum[-1], side="left"), values.size - 1)
    out: FloatArray = values[order][idx]
    return out
