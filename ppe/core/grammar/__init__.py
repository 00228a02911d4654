"""The performance grammar: a small, safe language for structural models.

The text is tokenised and parsed by hand (recursive descent) into an AST; it is
never ``eval``-ed.  :func:`compile_model` parses and validates it and returns a
:class:`CompiledModel`; problems raise :class:`~ppe.core.errors.GrammarError`
with line, column and the offending token (``.errors`` lists all of them).
The language is described in ``ppe/core/GRAMMAR.md``; in short::

    # comment
    param n                        # application parameter (required)
    param I alias iterations       # ... with another accepted name
    param Size = 8                 # ... with a default
    require n >= 1 : "n must be positive"

    NumElts[p] = rows[p] * n / 2   # component, one index
    RComp[p]   = NumElts[p] * Benchmark[p] / FracAvailCPU[p]
    Comm[p]    = sum(q in neighbours(p): n * Size / BWAvail[p, q] + Latency[p, q])
    Edge[p]    = if p > 0 then 1 else 0
    HostTime[p] = I * (RComp[p] + Comm[p])          # required: per-host time
    ExecTime    = max(p in hosts: HostTime[p])      # required: the makespan

Operators: ``+ - * /`` and ``^`` (power: deterministic operands only, groups right, binds
tighter than a prefix ``-``).  Built-in symbols: ``P`` (number of hosts), ``rows[p]``,
``Benchmark[p]``, ``FracAvailCPU[p]`` (stochastic), ``BWAvail[p, q]`` (stochastic) and
``Latency[p, q]``, and each machine-profile figure of ``PROFILE_PARAMETERS`` host-indexed
(``flops_dense[p]``, ``mem_read_unit_largest[p]``, ...: ``HostInputs.system``); functions
``max(a, b, ...)``, ``min(...)``; aggregations ``sum|max|min(v in DOMAIN: expr)`` with DOMAIN
``hosts``, ``neighbours(p)`` or ``lo..hi`` (inclusive).

Limits (:mod:`.limits`, checked while parsing and compiling; over one raises
:class:`GrammarLimitError`): expressions nest at most ``MAX_DEPTH`` (100) levels, a model
defines at most ``MAX_DEFINITIONS`` (1 000) components, chained at most ``MAX_CHAIN`` (200) deep.

Modules, each using only those before it: :mod:`.tokens` (tokeniser), :mod:`.limits`,
:mod:`.nodes` (syntax tree), :mod:`.parser` (text to statements),
:mod:`.symbols` (built-in names, :class:`CompiledModel`), :mod:`.checker`
(semantic checks, :func:`compile_model`, :func:`validate_model`), :mod:`.expression`
(one expression over free names and named functions, :func:`compile_expression`: Prophecy's
parameterization templates).
"""

from .checker import compile_model, validate_model
from .expression import CompiledExpression, Function, compile_expression, define_function
from .limits import MAX_CHAIN, MAX_DEFINITIONS, MAX_DEPTH, GrammarLimitError
from .nodes import (
    EMPIRICAL,
    Agg,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Definition,
    Domain,
    Empirical,
    IfExpr,
    Index,
    Name,
    Neg,
    Node,
    Not,
    NumberLit,
    ParamDecl,
    Require,
    Statement,
    first_token,
    preorder,
    unparse,
)
from .parser import parse
from .symbols import (
    BUILTINS,
    FUNCTIONS,
    PROFILE_BUILTINS,
    REQUIRED,
    RESERVED,
    Builtin,
    CompiledModel,
    EmpiricalSource,
    ParamSpec,
)
from .tokens import KEYWORDS, Token, tokenize

__all__ = [
    "EMPIRICAL",
    "Empirical",
    "EmpiricalSource",
    "BUILTINS",
    "FUNCTIONS",
    "KEYWORDS",
    "MAX_CHAIN",
    "MAX_DEFINITIONS",
    "MAX_DEPTH",
    "PROFILE_BUILTINS",
    "REQUIRED",
    "RESERVED",
    "Agg",
    "BinOp",
    "BoolOp",
    "Builtin",
    "Call",
    "Compare",
    "CompiledExpression",
    "CompiledModel",
    "Definition",
    "Domain",
    "Function",
    "GrammarLimitError",
    "IfExpr",
    "Index",
    "Name",
    "Neg",
    "Node",
    "Not",
    "NumberLit",
    "ParamDecl",
    "ParamSpec",
    "Require",
    "Statement",
    "Token",
    "compile_expression",
    "compile_model",
    "define_function",
    "first_token",
    "preorder",
    "parse",
    "tokenize",
    "unparse",
    "validate_model",
]
