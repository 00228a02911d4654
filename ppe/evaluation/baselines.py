"""statsmodels baselines for ``ppe forecast-eval``: what a practitioner would try first.

Each baseline is refitted every ``refit`` samples on the last ``window`` samples and, between
refits, applied to the incoming values with its fitted parameters (exactly what the fitted model
predicts one step ahead). Forecasts are clipped to the metric's bounds, as a user would.

- ``ses``: ``SimpleExpSmoothing`` with the smoothing level estimated on the window;
- ``arN``: ``AutoReg(lags=N, trend="c")``; a window the OLS cannot identify (constant or nearly,
  e.g. an idle host) falls back to the last value, as a user would;
- ``arima``: ``ARIMA(1, 0, 1)`` with a constant (slow: about 0.2 s per fit).

For horizon forecasts (``forecast-eval --horizons``), :func:`ar1_horizon_mean`: the mean of the
next ``steps`` values under ``AutoReg(lags=1, trend="c")`` fitted on the history, with its
Gaussian spread, the textbook forecaster of a mean over a horizon.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
# A fit returns a one-step predictor: given x[:t] (t >= fit time), the forecast of x[t].
Predictor = Callable[[FloatArray, int], float]

DEFAULT_BASELINES = ("ses", "ar1", "ar3")


@dataclass(frozen=True)
class BaselineSpec:
    window: int = 288
    refit: int = 24
    bounds: tuple[float, float] = (0.01, 1.0)


def _fit_ses(window: FloatArray) -> Predictor:
    from statsmodels.tsa.holtwinters import SimpleExpSmoothing

    if np.ptp(window) == 0:
        value = float(window[-1])
        return lambda x, t: value
    res = SimpleExpSmoothing(window, initialization_method="heuristic").fit()
    alpha = float(res.params["smoothing_level"])
    state = {"t": -1, "level": float(res.forecast(1)[0])}

    def predict(x: FloatArray, t: int) -> float:
        if state["t"] >= 0:  # advance the level over the values seen since the last call
            for i in range(int(state["t"]), t):
                state["level"] = alpha * float(x[i]) + (1.0 - alpha) * state["level"]
        state["t"] = t
        return state["level"]

    return predict


def _fit_autoreg(lags: int) -> Callable[[FloatArray], Predictor]:
    def fit(window: FloatArray) -> Predictor:
        from statsmodels.tools.sm_exceptions import SingularMatrixWarning
        from statsmodels.tsa.ar_model import AutoReg

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            params = np.asarray(AutoReg(window, lags=lags, trend="c").fit().params)
        singular = any(issubclass(w.category, SingularMatrixWarning) for w in caught)
        if singular or not np.isfinite(params).all():
            return lambda x, t: float(x[t - 1])
        const, phi = float(params[0]), params[1:]
        back = np.arange(1, lags + 1)
        return lambda x, t: const + float(np.dot(phi, x[t - back]))

    return fit


def _fit_arima(window: FloatArray) -> Predictor:
    from statsmodels.tsa.arima.model import ARIMA

    if np.ptp(window) == 0:
        value = float(window[-1])
        return lambda x, t: value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ARIMA(window, order=(1, 0, 1), trend="c").fit()
    state = {"t": -1, "res": res}

    def predict(x: FloatArray, t: int) -> float:
        if state["t"] >= 0 and t > state["t"]:
            state["res"] = state["res"].append(x[int(state["t"]) : t])
        state["t"] = t
        return float(state["res"].forecast(1)[0])

    return predict


def ar1_horizon_mean(history: FloatArray, steps: int) -> tuple[float, float] | None:
    """Mean and standard deviation of the average of the next ``steps`` values under an AR(1)
    with a constant fitted (OLS, statsmodels' ``AutoReg``) on ``history``; None when the
    history cannot identify one (constant or nearly: an idle host).

    With ``x[k+1] = c + phi x[k] + e`` and ``a_i = 1 + phi + ... + phi^(i-1)``, the value ``k``
    steps on has mean ``c a_k + phi^k x_now``, and the noise ``e_j`` enters the average of the
    ``steps`` values with weight ``a_(steps-j+1) / steps``; the variances of independent noise
    terms add. statsmodels' ``get_forecast`` gives each step's variance but not the
    covariance between steps, which the variance of an average needs."""
    from statsmodels.tools.sm_exceptions import SingularMatrixWarning
    from statsmodels.tsa.ar_model import AutoReg

    if history.size < 3 or np.ptp(history) == 0 or steps < 1:
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = AutoReg(history, lags=1, trend="c").fit()
    c, phi = (float(v) for v in np.asarray(res.params))
    sigma2 = float(res.sigma2)
    singular = any(issubclass(w.category, SingularMatrixWarning) for w in caught)
    if singular or not np.isfinite([c, phi, sigma2]).all():
        return None
    powers = phi ** np.arange(steps + 1)  # phi^0 .. phi^steps
    a = np.cumsum(powers[:-1])  # a_1 .. a_steps
    mean = (c * float(a.sum()) + float(history[-1]) * float(powers[1:].sum())) / steps
    sd = float(np.sqrt(sigma2 * float(np.dot(a, a)))) / steps
    return mean, sd


def fitter(name: str) -> Callable[[FloatArray], Predictor]:
    if name == "ses":
        return _fit_ses
    if name == "arima":
        return _fit_arima
    m = re.fullmatch(r"ar(\d+)", name)
    if m and int(m.group(1)) >= 1:
        return _fit_autoreg(int(m.group(1)))
    raise ValueError(f"unknown baseline {name!r} (known: ses, arN, arima)")


def baseline_forecasts(x: FloatArray, start: int, name: str, spec: BaselineSpec) -> FloatArray:
    """Forecasts of ``x[t]`` for t = start..n-1, refitted every ``spec.refit`` samples."""
    fit = fitter(name)
    out = np.full(x.size - start, np.nan)
    predict: Predictor | None = None
    for t in range(start, x.size):
        if (t - start) % spec.refit == 0:
            predict = fit(np.ascontiguousarray(x[max(0, t - spec.window) : t]))
        assert predict is not None
        out[t - start] = predict(x, t)
    lo, hi = spec.bounds
    clipped: FloatArray = np.clip(out, lo, hi)
    return clipped
