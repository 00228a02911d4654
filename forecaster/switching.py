"""Horizon means of a host that switches between load modes: a semi-Markov model (issue 17).

Tried against the analogues (``ppe forecast-eval --horizons`` reports it as ``switching``);
not used by the service: see docs/architecture.md for the measured comparison.

The host is a process that stays in a mode (idle, saturated, ...) for a spell and then jumps
to another. Modes are the components of the mixture fitted to the history
(:func:`forecaster.fit_distribution`); every sample goes to its most likely component, and
spells shorter than ``MIN_SPELL`` samples are absorbed by the spell before them (a one-sample
spike is not a mode change). From the spells: each mode's empirical spell durations (the
durations are not memoryless: semi-Markov), the jumps between modes (an embedded Markov chain)
and each mode's spell levels. The horizon mean is simulated: the present spell lasts a
remaining time drawn from its mode's durations that outlasted its present age (when none did,
uniform up to its age: a spell that has lasted ``a`` is as likely to last another ``a`` as
not), at the present level; then spells follow the chain, each at a level drawn from its
mode's past spells. The simulated means become a kernel density like the analogues'.
Seeded: the same history gives the same answer.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from forecaster.analog import CPU_ANALOG, AnalogOptions, kernel_distribution
from forecaster.distribution import Distribution, fit_distribution
from forecaster.history import FloatArray
from forecaster.horizon import sample_spacing

MIN_SPELL = 3
PATHS = 400


def spells(labels: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Run-length encoding of ``labels`` after absorbing runs shorter than ``MIN_SPELL`` into
    the run before them: (mode of each spell, its length)."""
    lab = labels.copy()
    change = np.flatnonzero(np.diff(lab)) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [lab.size]))
    for s, e in zip(starts, ends, strict=True):
        if e - s < MIN_SPELL and s > 0:
            lab[s:e] = lab[s - 1]
    change = np.flatnonzero(np.diff(lab)) + 1
    starts = np.concatenate(([0], change))
    lengths = np.diff(np.concatenate((starts, [lab.size])))
    return lab[starts], lengths


def switching_horizon(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float,
    opts: AnalogOptions = CPU_ANALOG,
    seed: int = 0,
) -> Distribution | None:
    """The simulated distribution of the mean over ``horizon_s``; None for a single-mode
    history (nothing to switch between) or one without a complete spell."""
    ts = np.asarray(timestamps, dtype=np.float64)
    xs = np.asarray(values, dtype=np.float64)
    keep = (ts < now) & (ts >= now - opts.lookback_s) & np.isfinite(xs)
    ts, xs = ts[keep], xs[keep]
    if xs.size < 4 * MIN_SPELL:
        return None
    fit = fit_distribution(xs)
    if fit.kind != "mixture" or len(fit.components) < 2:
        return None
    w = np.array([c[0] for c in fit.components])
    mu = np.array([c[1] for c in fit.components])
    sd = np.maximum(np.array([c[2] for c in fit.components]), 1e-6)
    loglik = np.log(w) - np.log(sd) - 0.5 * ((xs[:, None] - mu) / sd) ** 2
    modes, lengths = spells(np.argmax(loglik, axis=1).astype(np.int64))
    if modes.size < 2:
        return None
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    csum = np.concatenate(([0.0], np.cumsum(xs)))
    levels = (csum[bounds[1:]] - csum[bounds[:-1]]) / lengths
    k = mu.size
    done_modes, done_lengths, done_levels = modes[:-1], lengths[:-1], levels[:-1]
    jumps = np.full((k, k), 0.0)
    np.add.at(jumps, (modes[:-1], modes[1:]), 1.0)
    width = max(1, int(round(horizon_s / sample_spacing(ts))))
    rng = np.random.default_rng(seed)
    now_mode, age = int(modes[-1]), int(lengths[-1])
    now_level = float(xs[-opts.state_samples :].mean())
    out = np.empty(PATHS)
    for p in range(PATHS):
        longer = done_lengths[(done_modes == now_mode) & (done_lengths > age)]
        left = int(rng.choice(longer)) - age if longer.size else int(rng.integers(1, age + 1))
        total, filled, mode = min(left, width) * now_level, min(left, width), now_mode
        while filled < width:
            row = jumps[mode]
            if row.sum() == 0:  # never left this mode before: stays
                total += (width - filled) * now_level
                break
            mode = int(rng.choice(k, p=row / row.sum()))
            mine = done_modes == mode
            if not mine.any():
                total += (width - filled) * float(mu[mode])
                break
            pick = int(rng.choice(np.flatnonzero(mine)))
            step = min(int(done_lengths[pick]), width - filled)
            total += step * float(done_levels[pick])
            filled += step
        out[p] = total / width
    return kernel_distribution(out, opts, None)
