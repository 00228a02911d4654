"""PPE core (pure): stochastic values, the performance grammar, built-in
structural models (SOR, Jacobi2D) and interval predictions.

See ``ppe/core/GRAMMAR.md`` for the model language and the engines.
"""

from .errors import EvaluationError, GrammarError, ModelError, ParameterError, StochasticError
from .evaluate import BW_FLOOR_FRACTION, CPU_FLOOR, bind_empirical
from .grammar import CompiledModel, EmpiricalSource, compile_model, validate_model
from .predict import (
    HostInputs,
    Prediction,
    builtin_models,
    get_model,
    linear_host_models,
    predict,
)
from .stochastic import (
    Mixture,
    Normal,
    Numeric,
    Point,
    Samples,
    Stochastic,
    StochasticValue,
    from_components,
    smax,
    smin,
    ssum,
    use_engine,
)

__all__ = [
    "BW_FLOOR_FRACTION",
    "CPU_FLOOR",
    "CompiledModel",
    "EmpiricalSource",
    "EvaluationError",
    "GrammarError",
    "HostInputs",
    "Mixture",
    "ModelError",
    "Normal",
    "Numeric",
    "ParameterError",
    "Point",
    "Prediction",
    "Samples",
    "Stochastic",
    "StochasticError",
    "StochasticValue",
    "bind_empirical",
    "builtin_models",
    "compile_model",
    "from_components",
    "get_model",
    "linear_host_models",
    "predict",
    "smax",
    "smin",
    "ssum",
    "use_engine",
    "validate_model",
]
