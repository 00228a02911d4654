"""NWS-style forecaster: predictor battery, adaptive selection, intervals, distributions, horizons.

Pure library (no I/O). The service and the replay call :func:`forecast_series`; long-lived online
state per series is a :class:`SeriesForecaster`; :func:`batch_forecasts` replays a whole series
vectorised and gives the same answers row for row.
"""

from forecaster.analog import BANDWIDTH_ANALOG, CPU_ANALOG, AnalogOptions, analog_horizon
from forecaster.api import InsufficientData, SeriesForecast, forecast_series, series_distribution
from forecaster.batch import BatchResult, batch_forecasts, select_batch
from forecaster.config import DEFAULT_CONFIG, ForecasterConfig
from forecaster.dependence import co_movement, snap_dependence_horizon
from forecaster.distribution import Distribution, FitOptions, consolidate, fit_distribution
from forecaster.horizon import block_means, horizon_distribution, sample_spacing, snap_horizon
from forecaster.members import batch_member_forecasts, member_names
from forecaster.online import MemberError, OneStep, SeriesForecaster

__all__ = [
    "BANDWIDTH_ANALOG",
    "CPU_ANALOG",
    "AnalogOptions",
    "analog_horizon",
    "series_distribution",
    "DEFAULT_CONFIG",
    "BatchResult",
    "Distribution",
    "FitOptions",
    "ForecasterConfig",
    "InsufficientData",
    "MemberError",
    "OneStep",
    "SeriesForecast",
    "SeriesForecaster",
    "batch_forecasts",
    "batch_member_forecasts",
    "co_movement",
    "block_means",
    "consolidate",
    "fit_distribution",
    "forecast_series",
    "horizon_distribution",
    "member_names",
    "select_batch",
    "snap_dependence_horizon",
    "sample_spacing",
    "snap_horizon",
]
