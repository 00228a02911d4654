"""PPE: stochastic grid scheduling — forecasts, structural models, time balancing."""

__version__ = "0.1.0"
