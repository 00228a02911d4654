"""Evaluation of a compiled model with stochastic inputs, vectorised over hosts.

Every expression is evaluated for ``m`` *lanes* at once: a component ``X[p]``
asked for all hosts is one evaluation with ``p = [0, 1, ..., P-1]``; an
aggregation ``sum(q in neighbours(p): ...)`` expands the lanes to one per
(p, q) pair and reduces them back.  Lane values are points (float arrays),
separable forms (numeric engine), canonical normal forms (analytic engine) or
aligned samples (Monte Carlo) - see :mod:`ppe.core.lanes`.

Semantics worth knowing:

* **one draw per run.**  Inputs are the forecaster's distributions of each
  host's availability *averaged over the run's horizon*: one random value for
  the whole run, not a fresh draw per iteration.  So ``sum(i in 1..I: E)``
  where ``E`` does not use ``i`` is exactly ``I * E`` (the same random value I
  times), and ``sum_i max_p T_p = I * max_p T_p = max_p (I * T_p)``.  A
  per-iteration independent draw would instead shrink the run's relative spread
  by ~sqrt(I); it is not what a horizon average describes.
* components are evaluated once per distinct index tuple and shared, and two
  components with the same formula (e.g. RComp and BComp) are the same value,
  so they are fully correlated - in both engines.
* ``FracAvailCPU`` is floored at ``CPU_FLOOR`` (0.01) and ``BWAvail`` at
  ``BW_FLOOR_FRACTION`` (1 %) of its mean, sample by sample under Monte Carlo, so
  quotients stay finite when a normal forecast puts mass near zero.  The
  numeric engine applies the same floors exactly (a point mass at the floor);
  the analytic engine never sees that region: it hands over to Monte Carlo when
  an availability has non-negligible mass (beyond 7 sigma) below its floor.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field, replace
from types import GeneratorType
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from . import analytic as an
from . import lanes
from . import numeric as nm
from .analytic import HandOver, Lin
from .errors import EvaluationError, ModelError, ParameterError, StochasticError
from .grammar import (
    PROFILE_BUILTINS,
    Agg,
    BinOp,
    BoolOp,
    Call,
    Compare,
    CompiledExpression,
    CompiledModel,
    Domain,
    Empirical,
    EmpiricalSource,
    Function,
    IfExpr,
    Index,
    Name,
    Neg,
    Node,
    Not,
    NumberLit,
    ParamSpec,
    first_token,
    preorder,
    unparse,
)
from .lanes import LaneCtx, Value
from .montecarlo import Smp, Space
from .stochastic import StochasticValue, as_stochastic

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Result = Value | BoolArray
T = TypeVar("T")

#: Availability floor: FracAvailCPU samples below it are raised to it.
CPU_FLOOR = 0.01
#: Bandwidth floor, as a fraction of the bandwidth forecast's mean.
BW_FLOOR_FRACTION = 0.01
#: Sigmas of clearance above a floor the analytic engine requires.
FLOOR_SIGMAS = 7.0
#: Largest number of lanes an aggregation may expand to.
MAX_LANES = 200_000
#: Largest lanes x samples array (8 bytes each) under Monte Carlo.
MAX_MC_CELLS = 40_000_000


# ------------------------------------------------------------------------ inputs


@dataclass
class InputBanks:
    """The hosts' inputs laid out once for an engine; shared by evaluations with
    different rows so that their results stay correlated exactly.  ``empirical`` holds the
    values of the model's ``empirical(...)`` calls (one per distinct model and point) and
    ``sites`` each call's slot in it, by ``id(node)``; ``system`` the machine-profile figures
    the model reads (deterministic per host, like ``benchmark``)."""

    names: list[str]
    benchmark: FloatArray
    latency: FloatArray
    cpu: list[StochasticValue]
    links: list[StochasticValue | None]  # slot 2p: p -> p+1, slot 2p+1: p -> p-1
    mode: str  # "numeric" | "analytic" | "mc"
    strict: bool
    space: Space | None = None
    empirical: list[StochasticValue] = field(default_factory=list)
    sites: dict[int, int] = field(default_factory=dict)
    #: machine-profile figures by name, one per host (NaN: the host has none)
    system: Mapping[str, FloatArray] = field(default_factory=dict)
    _cache: dict[str, Value] = field(default_factory=dict)
    _sources: tuple[nm.Sources, dict[str, list[int]]] | None = None

    @property
    def P(self) -> int:  # noqa: N802 - the grammar's name
        return len(self.names)

    def floors(self, what: str) -> FloatArray:
        """FracAvailCPU at CPU_FLOOR; bandwidths and empirical times at a fraction of their mean
        (a time near 0 would make a rate computed from it unbounded)."""
        if what == "FracAvailCPU":
            return np.full(self.P, CPU_FLOOR)
        values = self.links if what == "BWAvail" else self.empirical
        means = np.array([abs(v.mean()) if v is not None else 1.0 for v in values])
        return BW_FLOOR_FRACTION * means

    def values(self, what: str) -> list[Any]:
        if what == "FracAvailCPU":
            return list(self.cpu)
        return list(self.links) if what == "BWAvail" else list(self.empirical)

    def bank(self, what: str) -> Value:
        """All of one kind of input as lanes: ``FracAvailCPU``, ``BWAvail`` or ``empirical``."""
        if what not in self._cache:
            self._cache[what] = self._bank(self.values(what), self.floors(what), what)
        return self._cache[what]

    def cpu_bank(self) -> Value:
        return self.bank("FracAvailCPU")

    def link_bank(self) -> Value:
        return self.bank("BWAvail")

    def _bank(self, values: list[Any], floors: FloatArray, what: str) -> Value:
        if self.mode == "numeric":
            src, cols = self.num_sources()
            return nm.bank(values, floors, src, cols[what])
        if self.mode == "mc":
            assert self.space is not None
            out = np.empty((len(values), self.space.n))
            for k, v in enumerate(values):
                if v is None:
                    out[k] = 1.0
                else:
                    v._draw_into(self.space, out[k])
            np.maximum(out, floors[:, None], out=out)
            return Smp(out, self.space)
        return self._lin_bank(values, floors, what)

    def label(self, k: int, what: str) -> str:
        if what == "empirical":
            return f"the empirical value {k}"
        return f"{what} of host {self.names[k // 2 if what == 'BWAvail' else k]!r}"

    def num_sources(self) -> tuple[nm.Sources, dict[str, list[int]]]:
        """The numeric engine's sources: one per distinct stochastic input (the
        same object used twice is one source; inputs that merely share part of
        their randomness hand over), with each input's column (-1: a point)."""
        if self._sources is None:
            reg = _SourceRegistry()
            cols = {
                what: [
                    reg.column(v, f, self.label(k, what))
                    for k, (v, f) in enumerate(
                        zip(self.values(what), self.floors(what), strict=True)
                    )
                ]
                for what in ("FracAvailCPU", "BWAvail", "empirical")
            }
            self._sources = (nm.Sources.build(reg.values, reg.floors), cols)
        return self._sources

    def _lin_bank(self, values: list[Any], floors: FloatArray, what: str) -> Lin:
        """Canonical forms of the inputs; points are floored like samples are."""
        mus = np.ones(len(values))
        rows: list[int] = []
        src: list[Any] = []
        coefs: list[Any] = []
        thirds: list[Any] = []
        for k, v in enumerate(values):
            if v is None:
                continue
            if not v.analytic:
                raise HandOver(f"{self.label(k, what)} is a {v.kind}")
            mu, sd = v.mean(), v.std()
            if sd == 0:
                mus[k] = max(mu, floors[k])
                continue
            if self.strict and mu - FLOOR_SIGMAS * sd < floors[k]:
                raise HandOver(
                    f"{self.label(k, what)} N({mu:.3g}, {sd:.3g}) has mass near its floor"
                )
            mus[k] = mu
            rows.extend([k] * v._ids.size)
            src.append(v._ids)
            coefs.append(v._coefs)
            thirds.append(v._g)
        if not src:
            return an.lin_const(mus)
        all_src = np.concatenate(src)
        ids, first = np.unique(all_src, return_index=True)
        A = np.zeros((len(values), ids.size))
        np.add.at(A, (np.array(rows), np.searchsorted(ids, all_src)), np.concatenate(coefs))
        return Lin(mus, ids, A, np.concatenate(thirds)[first])


class _SourceRegistry:
    """Distinct stochastic inputs for the numeric engine, by identity."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.floors: list[float] = []
        self._keys: dict[tuple[Any, ...], int] = {}
        self._owner: dict[int, tuple[Any, ...]] = {}

    def column(self, v: Any, floor: float, label: str) -> int:
        if v is None or v.kind == "point" or (v.kind == "normal" and v.std() == 0):
            return -1
        if v.kind == "normal":
            ids = tuple(int(i) for i in v._ids)
            key: tuple[Any, ...] = ("normal", ids, v.mu, tuple(v._coefs.tolist()), float(floor))
        elif v.kind == "mixture":
            ids = (int(v.uid),)
            key = ("mixture", ids, float(floor))
        else:
            raise HandOver(f"{label} is a {v.kind} value")
        for i in ids:
            if self._owner.setdefault(i, key) != key:
                raise HandOver(f"{label} shares randomness with another input")
        col = self._keys.get(key)
        if col is None:
            col = len(self.values)
            self._keys[key] = col
            self.values.append(v)
            self.floors.append(float(floor))
        return col


# --------------------------------------------------------------------- evaluator


def _unique_rows(args: list[FloatArray]) -> tuple[FloatArray, IntArray]:
    """Distinct index tuples and, per lane, which one it is."""
    if len(args) == 1:
        a = args[0]
        if a.shape[0] < 2 or bool((a[1:] > a[:-1]).all()):  # the usual 0..P-1
            return a[:, None], np.arange(a.shape[0])
    stacked = np.stack(args, axis=1)
    uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return uniq, inverse.ravel()


def _is_bool(v: Result) -> bool:
    return isinstance(v, np.ndarray) and v.dtype == np.bool_


def _err(message: str, node: Node, name: str | None = None) -> EvaluationError:
    tok = first_token(node)
    return EvaluationError(message, line=tok.line, column=tok.column, token=tok.text, name=name)


_ROWS_FREE: dict[str, frozenset[str]] = {}


def rows_free(model: CompiledModel) -> frozenset[str]:
    """Names of the components whose value does not depend on ``rows`` (directly
    or through other components), cached per model text."""
    hit = _ROWS_FREE.get(model.digest)
    if hit is not None:
        return hit
    defs = model.definitions
    refs = {
        name: {n.name for n in preorder(d.body) if isinstance(n, Name | Index)}
        for name, d in defs.items()
    }
    depends: dict[str, bool] = {}
    for start in defs:  # depth first with an explicit stack: chains may be MAX_CHAIN deep
        stack, seen = [start], set()
        while stack:
            name = stack[-1]
            if name in depends:
                stack.pop()
            elif name not in seen:
                seen.add(name)
                stack.extend(
                    r for r in refs[name] if r in defs and r not in depends and r not in seen
                )
            else:
                stack.pop()
                # a component still in progress is a cycle: none in a valid model; be safe anyway
                depends[name] = "rows" in refs[name] or any(
                    depends.get(r, True) for r in refs[name] if r in defs
                )
    out = frozenset(n for n in defs if not depends[n])
    _ROWS_FREE[model.digest] = out
    return out


#: An evaluation in progress (a generator): it yields what it needs -- a sub-step, or a
#: value ready at once -- and is sent its result; :func:`_drive` runs the whole tree of them.
Steps = Generator[Any, Any, T]


def _drive(step: Steps[T]) -> T:
    """Run an evaluation with an explicit stack of generators instead of Python recursion,
    so that neither nested expressions nor chains of components can exhaust the
    interpreter's stack.  Steps run in the order calls would; exceptions travel up through
    every waiting step, as they would through calls."""
    stack: list[Generator[Any, Any, Any]] = [step]
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                sub = stack[-1].send(value)
            else:
                sub, error = stack[-1].throw(error), None
        except StopIteration as done:
            stack.pop()
            if not stack:
                return cast(T, done.value)
            value = done.value
            continue
        except BaseException as exc:
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        if isinstance(sub, GeneratorType):
            stack.append(sub)
            value = None
        else:  # a value that needed no step of its own
            value = sub


class Evaluator:
    """Evaluates one model for one set of parameters, inputs and rows.

    Evaluation is iterative: :meth:`_eval` gives a leaf's value at once and any other
    node's step (a generator, :data:`Steps`); where a recursive evaluator would call itself
    on a subexpression or a component's body, a step yields that and :func:`_drive` sends
    back the result.  The public methods drive one evaluation to the end.
    """

    def __init__(
        self,
        model: CompiledModel,
        params: Mapping[str, float],
        banks: InputBanks,
        rows: FloatArray,
        shared: dict[tuple[str, int, bytes], Value] | None = None,
    ) -> None:
        """``shared``: a memo for the components that do not depend on ``rows``,
        passed to every evaluation on the same banks (linear_host_models evaluates
        three row counts; the communication terms are computed once)."""
        self.model = model
        self.params = dict(params)
        self.banks = banks
        self.rows = np.asarray(rows, dtype=np.float64)
        self.P = banks.P
        self.ctx = LaneCtx(strict=banks.strict, space=banks.space)
        self.memo: dict[tuple[str, int, bytes], Value] = {}
        self.shared = shared
        self._rows_free = rows_free(model) if shared is not None else frozenset()
        self._alias = {a: spec.name for spec in model.params for a in (spec.name, *spec.aliases)}

    # entry points
    def component(self, name: str, args: list[FloatArray], m: int) -> Value:
        """``name[args]`` for ``m`` lanes (each component body evaluated once per
        distinct index tuple and shared by components with the same formula)."""
        return _drive(self._component(name, args, m))

    def eval(self, node: Node, env: dict[str, FloatArray], m: int) -> Result:
        step = self._eval(node, env, m)
        return cast(Result, _drive(step) if isinstance(step, GeneratorType) else step)

    def num(self, node: Node, env: dict[str, FloatArray], m: int) -> Value:
        return self._num(self.eval(node, env, m), node)

    def det(self, node: Node, env: dict[str, FloatArray], m: int) -> FloatArray:
        return self._det(self.eval(node, env, m), node)

    def cond(self, node: Node, env: dict[str, FloatArray], m: int) -> BoolArray:
        return self._cond(self.eval(node, env, m), node)

    # components
    def _component(self, name: str, args: list[FloatArray], m: int) -> Steps[Value]:
        d = self.model.definitions[name]
        canon = self.model.canonical[name]
        memo = self.shared if self.shared is not None and name in self._rows_free else self.memo
        if not args:
            key = (canon, 0, b"")
            val = memo.get(key)
            if val is None:
                val = self._as_value((yield self._eval(d.body, {}, 1)), d.body)
                memo[key] = val
            return lanes.broadcast(val, m)
        uniq, inverse = _unique_rows(args)
        key = (canon, len(args), uniq.tobytes())
        val = memo.get(key)
        if val is None:
            env = {ix: uniq[:, k] for k, ix in enumerate(d.indices)}
            val = self._as_value((yield self._eval(d.body, env, uniq.shape[0])), d.body)
            memo[key] = val
        if uniq.shape[0] == m and np.array_equal(inverse, np.arange(m)):
            return val
        return lanes.take_lanes(val, inverse)

    def _as_value(self, v: Result, node: Node) -> Value:
        if _is_bool(v):
            raise _err("a component must be a number, not a condition", node)
        return cast(Value, v)

    # expressions: a leaf's value, or the step computing the node
    def _eval(self, node: Node, env: dict[str, FloatArray], m: int) -> Steps[Result] | Result:
        if isinstance(node, NumberLit):
            return np.full(m, node.value)
        if isinstance(node, Name):
            nm = node.name
            if nm in env:
                return env[nm]
            if nm in self._alias:
                return np.full(m, self.params[self._alias[nm]])
            if nm == "P":
                return np.full(m, float(self.P))
            return self._component(nm, [], m)
        if isinstance(node, Index):
            return self._index(node, env, m)
        if isinstance(node, BinOp):
            return self._binop(node, env, m)
        if isinstance(node, Neg):
            return self._neg(node, env, m)
        if isinstance(node, Compare):
            return self._compare(node, env, m)
        if isinstance(node, BoolOp):
            return self._boolop(node, env, m)
        if isinstance(node, Not):
            return self._not(node, env, m)
        if isinstance(node, IfExpr):
            return self._if_expr(node, env, m)
        if isinstance(node, Call):
            return self._call(node, env, m)
        if isinstance(node, Agg):
            return self._aggregate(node, env, m)
        if isinstance(node, Empirical):
            slot = self.banks.sites[id(node)]
            return lanes.take_lanes(self.banks.bank("empirical"), np.full(m, slot, np.int64))
        raise TypeError(type(node).__name__)

    def _num(self, v: Result, node: Node) -> Value:
        if _is_bool(v):
            raise _err(f"expected a number: {unparse(node)}", node)
        return cast(Value, v)

    def _det(self, v: Result, node: Node) -> FloatArray:
        v = self._num(v, node)
        if not lanes.is_det(v):
            raise _err(f"must not be stochastic: {unparse(node)}", node)
        return np.asarray(v, dtype=np.float64)

    def _cond(self, v: Result, node: Node) -> BoolArray:
        if not _is_bool(v):
            raise _err(f"expected a condition: {unparse(node)}", node)
        return cast(BoolArray, v)

    def _binop(self, node: BinOp, env: dict[str, FloatArray], m: int) -> Steps[Value]:
        left = self._num((yield self._eval(node.left, env, m)), node.left)
        right = self._num((yield self._eval(node.right, env, m)), node.right)
        return self.arith(node, node.op, left, right)

    def _neg(self, node: Neg, env: dict[str, FloatArray], m: int) -> Steps[Value]:
        return lanes.negate(self._num((yield self._eval(node.operand, env, m)), node.operand))

    def _boolop(self, node: BoolOp, env: dict[str, FloatArray], m: int) -> Steps[BoolArray]:
        a = self._cond((yield self._eval(node.left, env, m)), node.left)
        b = self._cond((yield self._eval(node.right, env, m)), node.right)
        return a & b if node.op == "and" else a | b

    def _not(self, node: Not, env: dict[str, FloatArray], m: int) -> Steps[BoolArray]:
        return ~self._cond((yield self._eval(node.operand, env, m)), node.operand)

    def arith(self, node: Node, op: str, left: Value, right: Value) -> Value:
        try:
            return lanes.binary(op, left, right, self.ctx)
        except StochasticError as exc:
            raise _err(f"{exc} in {unparse(node)}", node) from exc
        except HandOver as exc:
            tok = first_token(node)
            raise HandOver(f"{exc.reason} (line {tok.line}: {unparse(node)})") from exc

    def _compare(self, node: Compare, env: dict[str, FloatArray], m: int) -> Steps[BoolArray]:
        a = self._det((yield self._eval(node.left, env, m)), node.left)
        b = self._det((yield self._eval(node.right, env, m)), node.right)
        ops = {
            "<": np.less,
            "<=": np.less_equal,
            ">": np.greater,
            ">=": np.greater_equal,
            "==": np.equal,
            "!=": np.not_equal,
        }
        return np.asarray(ops[node.op](a, b), dtype=np.bool_)

    def _if_expr(self, node: IfExpr, env: dict[str, FloatArray], m: int) -> Steps[Result]:
        c = self._cond((yield self._eval(node.cond, env, m)), node.cond)
        if c.all():
            return (yield self._eval(node.then, env, m))
        if not c.any():
            return (yield self._eval(node.orelse, env, m))
        pieces: list[tuple[IntArray, Value]] = []
        for branch, mask in ((node.then, c), (node.orelse, ~c)):
            idx = np.flatnonzero(mask).astype(np.int64)
            sub = {k: v[idx] for k, v in env.items()}
            # a boolean-valued 'if' merges like any deterministic lanes
            pieces.append((idx, cast(Value, (yield self._eval(branch, sub, idx.shape[0])))))
        return lanes.merge(m, pieces)

    # indexing
    def host_index(self, node: Index, v: FloatArray) -> IntArray:
        bad = (v < 0) | (v >= self.P)
        if bad.any():
            raise _err(
                f"{node.name}: host index {int(v[bad][0])} is out of range 0..{self.P - 1}",
                node,
                node.name,
            )
        return v.astype(np.int64)

    def system_figure(self, node: Index, nm: str, p: IntArray) -> FloatArray:
        """Host p's machine-profile figure ``nm``; a host without it is an error naming the
        host, the figure and how to supply it."""
        column = self.banks.system.get(nm)
        values = np.full(self.P, np.nan) if column is None else column
        out = values[p]
        lacking = np.flatnonzero(np.isnan(out))
        if lacking.size:
            k = int(p[lacking[0]])
            host = self.banks.names[k]
            raise _err(
                f"host {host!r} has no machine-profile figure {nm!r} ({unparse(node)}); "
                f"post its profile (`ppe profile`, POST /api/v1/resources/{host}/profiles) "
                f"or give it in HostInputs.system",
                node,
                f"hosts[{k}].system.{nm}",
            )
        return out

    def _index(self, node: Index, env: dict[str, FloatArray], m: int) -> Steps[Value]:
        args = []
        for a in node.args:
            if isinstance(a, Name) and a.name in env:  # index variables are integers
                args.append(env[a.name])
                continue
            v = self._det((yield self._eval(a, env, m)), a)
            if not np.isfinite(v).all() or (v != np.round(v)).any():
                bad = v[(~np.isfinite(v)) | (v != np.round(v))][0]
                raise _err(f"index of {node.name} must be an integer, got {bad:g}", a, node.name)
            args.append(v)
        nm = node.name
        if nm in self.model.definitions:
            return (yield self._component(nm, args, m))
        p = self.host_index(node, args[0])
        if nm == "rows":
            return self.rows[p]
        if nm == "Benchmark":
            return self.banks.benchmark[p]
        if nm in PROFILE_BUILTINS:
            return self.system_figure(node, nm, p)
        if nm == "FracAvailCPU":
            return lanes.take_lanes(self.banks.cpu_bank(), p)
        q = self.host_index(node, args[1])
        step = q - p
        if (np.abs(step) != 1).any():
            k = int(np.flatnonzero(np.abs(step) != 1)[0])
            raise _err(
                f"{nm}[{p[k]}, {q[k]}]: hosts {p[k]} and {q[k]} are not neighbours in the chain",
                node,
                nm,
            )
        if nm == "Latency":
            return self.banks.latency[p]
        slots = 2 * p + (step == -1)
        missing = [s for s in slots.tolist() if self.banks.links[s] is None]
        if missing:
            s = missing[0]
            host = self.banks.names[s // 2]
            side = "bw_next" if s % 2 == 0 else "bw_prev"
            raise _err(
                f"no bandwidth given for host {host!r} ({side}) but the model uses it",
                node,
                f"hosts[{s // 2}].{side}",
            )
        return lanes.take_lanes(self.banks.link_bank(), slots)

    # functions and aggregations
    def _call(self, node: Call, env: dict[str, FloatArray], m: int) -> Steps[Value]:
        vals = []
        for a in node.args:
            vals.append(self._num((yield self._eval(a, env, m)), a))
        if len(vals) == 1:
            return vals[0]
        k = len(vals)
        stacked = lanes.concat_lanes(vals)
        order = (np.arange(k)[None, :] * m + np.arange(m)[:, None]).ravel()
        grouped = lanes.take_lanes(stacked, order)
        return self.reduce(node, node.func, grouped, np.arange(0, m * k, k))

    def reduce(self, node: Node, op: str, v: Value, starts: IntArray) -> Value:
        try:
            return lanes.reduce(op, v, starts, self.ctx)
        except StochasticError as exc:
            raise _err(f"{exc} in {unparse(node)}", node) from exc
        except HandOver as exc:
            tok = first_token(node)
            raise HandOver(f"{exc.reason} (line {tok.line}: {unparse(node)})") from exc

    def _expand(
        self, dom: Domain, env: dict[str, FloatArray], m: int
    ) -> Steps[tuple[FloatArray, IntArray]]:
        """Domain values for every lane: (values, counts per outer lane)."""
        if dom.kind == "hosts":
            return np.tile(np.arange(self.P, dtype=np.float64), m), np.full(m, self.P)
        if dom.kind == "neighbours":
            e = self._det((yield self._eval(dom.args[0], env, m)), dom.args[0])
            if (e != np.round(e)).any() or ((e < 0) | (e >= self.P)).any():
                raise _err(f"neighbours(): not a host index: {unparse(dom.args[0])}", dom)
            cand = np.stack([e - 1, e + 1], axis=1)
            valid = (cand >= 0) & (cand < self.P)
            return cand[valid], valid.sum(axis=1)
        lo = self._det((yield self._eval(dom.args[0], env, m)), dom.args[0])
        hi = self._det((yield self._eval(dom.args[1], env, m)), dom.args[1])
        for bound, arg in ((lo, dom.args[0]), (hi, dom.args[1])):
            if not np.all(np.isfinite(bound)) or np.any(bound != np.round(bound)):
                bad = float(bound[(~np.isfinite(bound)) | (bound != np.round(bound))][0])
                message = f"range bound must be an integer: {unparse(arg)} = {bad:g}"
                if isinstance(arg, Name) and arg.name in self._alias:  # a parameter's fault
                    tok = arg.tok
                    raise ParameterError(
                        message,
                        name=self._alias[arg.name],
                        line=tok.line,
                        column=tok.column,
                        token=tok.text,
                    )
                raise _err(message, arg)
        counts = np.maximum(hi - lo + 1, 0).astype(np.int64)
        total = int(counts.sum())
        if total > MAX_LANES:
            raise _err(f"range {unparse(dom)} is too large ({total} terms)", dom)
        outer = np.repeat(np.arange(m), counts)
        starts = np.cumsum(counts) - counts
        return lo[outer] + (np.arange(total) - starts[outer]), counts

    def _aggregate(self, node: Agg, env: dict[str, FloatArray], m: int) -> Steps[Value]:
        uses_var = node.var in self.model.free_vars.get(id(node.body), frozenset({node.var}))
        if not uses_var:
            counts = yield self._counts(node.domain, env, m)
            body = self._num((yield self._eval(node.body, env, m)), node.body)
            if node.op == "sum":
                return self.arith(node, "*", counts.astype(np.float64), body)
            self.no_empty(node, counts)
            return body
        values, counts = yield self._expand(node.domain, env, m)
        total = int(counts.sum())
        self.check_size(node, total)
        outer = np.repeat(np.arange(m), counts)
        sub = {k: v[outer] for k, v in env.items()}
        sub[node.var] = values.astype(np.float64)
        if total == 0:
            self.no_empty(node, counts)
            return np.zeros(m)
        body = self._num((yield self._eval(node.body, sub, total)), node.body)
        full = counts > 0
        starts = (np.cumsum(counts) - counts)[full]
        red = self.reduce(node, node.op, body, starts)
        if full.all():
            return red
        self.no_empty(node, counts)
        return lanes.merge(
            m, [(np.flatnonzero(full), red), (np.flatnonzero(~full), np.zeros(int((~full).sum())))]
        )

    def _counts(self, dom: Domain, env: dict[str, FloatArray], m: int) -> Steps[IntArray]:
        if dom.kind == "hosts":
            return np.full(m, self.P)
        return (yield self._expand(dom, env, m))[1]

    def no_empty(self, node: Agg, counts: IntArray) -> None:
        if node.op != "sum" and (counts == 0).any():
            raise _err(f"{node.op} over an empty domain: {unparse(node.domain)}", node)

    def check_size(self, node: Node, lanes_: int) -> None:
        if lanes_ > MAX_LANES:
            raise _err(f"{unparse(node)} expands to too many terms ({lanes_})", node)
        if self.banks.space is not None and lanes_ * self.banks.space.n > MAX_MC_CELLS:
            raise _err(
                f"{unparse(node)} needs {lanes_} x {self.banks.space.n} samples; "
                "too large for Monte Carlo",
                node,
            )


# ------------------------------------------------------------------- parameters


def ref_text(ref: tuple[str, ...]) -> str:
    """How the text names an empirical model: ``empirical("app", "kernel")``."""
    return f"empirical({', '.join(f'{r!r}'.replace(chr(39), chr(34)) for r in ref)})"


def bind_empirical(
    model: CompiledModel, sources: Mapping[tuple[str, ...], EmpiricalSource], binding: str = ""
) -> CompiledModel:
    """``model`` with the fitted models its ``empirical(...)`` calls read; ``binding`` names
    them (for memo keys: the same text over another fit is another model)."""
    missing = [ref for ref in model.empirical_refs() if ref not in sources]
    if missing:
        raise ParameterError(f"no model is bound for {ref_text(missing[0])}", name="empirical")
    wanted = {ref: sources[ref] for ref in model.empirical_refs()}
    return replace(model, empirical_models=wanted, binding=binding)


def empirical_values(
    model: CompiledModel, values: Mapping[str, float], hosts: int
) -> tuple[list[StochasticValue], dict[int, int]]:
    """Each ``empirical(...)`` call's value at its point (parameters and ``P`` only), and the
    call's slot: calls of one model at one point share a value, so they are one random draw."""
    if not model.empirical_calls:
        return [], {}
    banks = InputBanks(
        [str(k) for k in range(hosts)], np.zeros(hosts), np.zeros(hosts), [], [], "mc", False
    )
    ev = Evaluator(model, values, banks, np.zeros(hosts))
    out: list[StochasticValue] = []
    slots: dict[tuple[Any, ...], int] = {}
    sites: dict[int, int] = {}
    for call in model.empirical_calls:
        source = model.empirical_models.get(call.ref)
        if source is None:
            raise _err(f"no model is bound for {ref_text(call.ref)}", call, "empirical")
        point = {k: float(ev.det(a, {}, 1)[0]) for k, a in zip(call.names, call.args, strict=True)}
        key = (call.ref, tuple(sorted(point.items())))
        if key not in slots:
            try:
                value = as_stochastic(source.to_stochastic(point))
            except ModelError as exc:
                raise _err(f"{unparse(call)}: {exc.message}", call, exc.name) from exc
            slots[key] = len(out)
            out.append(value)
        sites[id(call)] = slots[key]
    return out, sites


def bind_params(model: CompiledModel, params: Mapping[str, Any]) -> dict[str, float]:
    """Parameter values by declared name; unknown, missing or non-numeric
    parameters raise :class:`ParameterError` naming them."""
    out: dict[str, float] = {}
    for key, raw in params.items():
        spec = model.param(str(key))
        if spec is None:
            known = ", ".join(n for p in model.params for n in (p.name, *p.aliases)) or "none"
            raise ParameterError(f"unknown parameter {key!r}; this model takes: {known}", name=key)
        if spec.name in out:
            raise ParameterError(f"parameter {spec.name!r} given twice (as {key!r})", name=key)
        if isinstance(raw, bool) or not isinstance(raw, int | float | np.integer | np.floating):
            raise ParameterError(f"parameter {key!r} must be a number, got {raw!r}", name=key)
        val = float(raw)
        if not np.isfinite(val):
            raise ParameterError(f"parameter {key!r} must be finite, got {raw!r}", name=key)
        out[spec.name] = val
    for spec in model.params:
        if spec.name not in out:
            if spec.default is None:
                raise ParameterError(
                    f"missing parameter {spec.name!r}", name=spec.name, line=spec.line
                )
            out[spec.name] = spec.default
    return out


def check_requires(model: CompiledModel, values: Mapping[str, float], hosts: int) -> None:
    """Evaluate the model's ``require`` statements; a failure names the parameter."""
    if not model.requires:
        return
    banks = InputBanks(
        [f"h{k}" for k in range(hosts)], np.zeros(hosts), np.zeros(hosts), [], [], "analytic", False
    )
    ev = Evaluator(model, values, banks, np.zeros(hosts))
    for req in model.requires:
        if bool(ev.cond(req.cond, {}, 1)[0]):
            continue
        names = _names_in(req.cond)
        culprit = next((n for n in names if n in ev._alias), names[0] if names else None)
        shown = {n: values[ev._alias[n]] for n in names if n in ev._alias}
        msg = req.message or f"requirement failed: {unparse(req.cond)}"
        got = ", ".join(f"{k} = {v:g}" for k, v in shown.items()) or f"P = {hosts}"
        raise ParameterError(
            f"{msg} (got {got})",
            name=ev._alias.get(culprit, culprit) if culprit else None,
            line=req.tok.line,
            column=req.tok.column,
            token=first_token(req.cond).text,
        )


def _names_in(node: Node) -> list[str]:
    return list(dict.fromkeys(n.name for n in preorder(node) if isinstance(n, Name)))


# ------------------------------------------------------------------ expressions


def expression_names(
    expr: CompiledExpression, functions: Mapping[str, Function] | None = None
) -> tuple[str, ...]:
    """Every name evaluating ``expr`` needs a value for: its own free names and those of the
    named functions it calls (and they call), in order of first appearance."""
    functions = functions or {}
    names: dict[str, None] = dict.fromkeys(expr.names)
    seen: set[str] = set()
    pending = list(expr.calls)
    while pending:
        fname = pending.pop(0)
        if fname in seen:
            continue
        seen.add(fname)
        fn = functions.get(fname)
        if fn is None:
            raise ParameterError(f"no definition for function {fname!r}", name=fname)
        names.update(dict.fromkeys(fn.names))
        pending.extend(fn.expression.calls)
    return tuple(names)


class _ExpressionEvaluator(Evaluator):
    """The model evaluator on one expression without hosts: names take the supplied values,
    and a call of a named function evaluates its body with the formals bound to the
    arguments (still iteratively, through :func:`_drive`)."""

    def __init__(self, values: Mapping[str, float], functions: Mapping[str, Function]) -> None:
        model = CompiledModel(
            text="",
            digest="",
            params=tuple(ParamSpec(name, (), None, 0) for name in values),
            requires=(),
            definitions={},
            stochastic={},
            canonical={},
            free_vars={},
        )
        banks = InputBanks([], np.zeros(0), np.zeros(0), [], [], "analytic", False)
        super().__init__(model, values, banks, np.zeros(0))
        self.functions = functions
        self.calling: list[str] = []

    def _call(self, node: Call, env: dict[str, FloatArray], m: int) -> Steps[Value]:
        fn = self.functions.get(node.func)
        if fn is None:
            return cast(Value, (yield super()._call(node, env, m)))
        if node.func in self.calling:
            chain = " -> ".join([*self.calling, node.func])
            raise _err(f"recursive function definitions: {chain}", node, node.func)
        bound: dict[str, FloatArray] = {}
        for formal, arg in zip(fn.formals, node.args, strict=True):
            bound[formal] = self._det((yield self._eval(arg, env, m)), arg)
        self.calling.append(node.func)
        try:
            return self._num((yield self._eval(fn.expression.body, bound, m)), node)
        finally:
            self.calling.pop()


def evaluate_expression(
    expr: CompiledExpression,
    values: Mapping[str, float],
    functions: Mapping[str, Function] | None = None,
) -> float:
    """The value of ``expr`` with every name (its own and its functions') in ``values``.

    A missing name raises :class:`ParameterError` naming it; what only the values reveal
    (division by zero, a negative base to a fractional power, overflow) raises
    :class:`EvaluationError` pointing at the expression."""
    functions = functions or {}
    for name in expression_names(expr, functions):
        if name not in values:
            raise ParameterError(f"no value for {name!r}", name=name)
    clean: dict[str, float] = {}
    for name, raw in values.items():
        value = float(raw)
        if not np.isfinite(value):
            raise ParameterError(f"{name!r} must be finite, got {raw!r}", name=name)
        clean[name] = value
    result = float(_ExpressionEvaluator(clean, functions).det(expr.body, {}, 1)[0])
    if not np.isfinite(result):
        raise _err(f"the value is not finite (overflow): {unparse(expr.body)}", expr.body)
    return result
