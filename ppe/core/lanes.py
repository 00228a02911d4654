"""Lane-wise arithmetic shared by the public stochastic values and the grammar
evaluator.

A lane value is one of

* a float array ``(m,)`` - deterministic lanes (points),
* :class:`~ppe.core.analytic.Lin` - canonical normal forms (analytic engine),
* :class:`~ppe.core.montecarlo.Smp` - aligned samples (Monte Carlo engine),
* :class:`~ppe.core.numeric.NumericLanes` - separable values and maxima (numeric engine).

The grammar evaluator runs a whole model with one lane per host (or per host
pair), so 64 hosts cost one numpy operation per model node, not 64.  Public
``Normal + Normal`` is the same code with one lane.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from . import analytic as an
from . import numeric as nm
from .analytic import Lin
from .errors import StochasticError
from .montecarlo import Smp, Space
from .numeric import NumericLanes

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Value = FloatArray | Lin | Smp | NumericLanes


@dataclass
class LaneCtx:
    """How to compute: ``strict`` makes analytic steps hand over (raise
    :class:`~ppe.core.analytic.HandOver`) where their approximation is poor;
    ``space`` is the Monte Carlo sample space when sampling is needed."""

    strict: bool = True
    space: Space | None = None


def nlanes(v: Value) -> int:
    if isinstance(v, Lin | Smp | NumericLanes):
        return v.m
    return int(v.shape[0])


def is_det(v: Value) -> bool:
    return not isinstance(v, Lin | Smp | NumericLanes)


def means(v: Value) -> FloatArray:
    """Each lane's mean (exact for points, normal forms and numeric values)."""
    if isinstance(v, Lin):
        return v.mu
    if isinstance(v, Smp):
        out: FloatArray = v.x.mean(axis=1)
        return out
    if isinstance(v, NumericLanes):
        return v.means()
    return np.asarray(v, dtype=np.float64)


def to_lin(v: Value) -> Lin:
    if isinstance(v, Lin):
        return v
    if isinstance(v, Smp | NumericLanes):
        raise TypeError(f"{type(v).__name__} values cannot be turned into a normal form")
    return an.lin_const(v)


def to_smp(v: Value, space: Space) -> Smp:
    """Samples of ``v`` in ``space`` (points broadcast, normals drawn from their
    sources, samples of another space adopted as independent)."""
    if isinstance(v, Smp):
        if v.space is space:
            return v
        return Smp(np.stack([space.adopt(row) for row in v.x]), space)
    if isinstance(v, Lin):
        z = space.z_block(v.ids)
        return Smp(v.mu[:, None] + v.A @ z, space)
    if isinstance(v, NumericLanes):
        raise TypeError("numeric values do not mix with samples in one evaluation")
    return Smp(np.broadcast_to(v[:, None], (v.shape[0], space.n)), space)


def _space_for(x: Value, y: Value, ctx: LaneCtx) -> Space:
    if isinstance(x, Smp):
        return x.space
    if isinstance(y, Smp):
        return y.space
    if ctx.space is None:
        raise RuntimeError("Monte Carlo step without a sample space")
    return ctx.space


def _check_divisor(d: FloatArray) -> None:
    if not d.all():
        raise StochasticError("division by zero")


def binary(op: str, x: Value, y: Value, ctx: LaneCtx) -> Value:
    """``x op y`` lane-wise for op in ``+ - * / ^`` (``^``: deterministic operands only;
    operands independent unless they share inputs, in which case the dependence is kept).
    Overflow gives inf silently; predictions check their results are finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _binary(op, x, y, ctx)


def _binary(op: str, x: Value, y: Value, ctx: LaneCtx) -> Value:
    if op == "^":
        if not (is_det(x) and is_det(y)):
            raise StochasticError("'^' of a random value (the grammar's checker refuses it)")
        return _power(np.asarray(x), np.asarray(y))
    if isinstance(x, NumericLanes) or isinstance(y, NumericLanes):
        if isinstance(x, Lin | Smp) or isinstance(y, Lin | Smp):
            raise TypeError("numeric values do not mix with other engines' values")
        return nm.binary(op, x, y)
    if isinstance(x, Smp) or isinstance(y, Smp):
        space = _space_for(x, y, ctx)
        return _binary_smp(op, to_smp(x, space).x, to_smp(y, space).x, space)
    if is_det(x) and is_det(y):
        return _binary_det(op, np.asarray(x), np.asarray(y))
    return _binary_lin(op, x, y, ctx.strict)


def _binary_det(op: str, x: FloatArray, y: FloatArray) -> FloatArray:
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    _check_divisor(y)
    return x / y


def _power(x: FloatArray, y: FloatArray) -> FloatArray:
    """``x ^ y`` where it is a real number: a negative base needs an integer exponent, and 0
    a positive one."""
    x, y = np.broadcast_arrays(x, y)
    if ((x < 0) & (y != np.round(y))).any():
        k = int(np.flatnonzero((x < 0) & (y != np.round(y)))[0])
        raise StochasticError(f"{x[k]:g} ^ {y[k]:g} is not a real number (negative base)")
    if ((x == 0) & (y < 0)).any():
        raise StochasticError("division by zero (0 to a negative power)")
    return np.asarray(np.power(x, y), dtype=np.float64)


def _binary_smp(op: str, x: FloatArray, y: FloatArray, space: Space) -> Smp:
    if op == "+":
        return Smp(x + y, space)
    if op == "-":
        return Smp(x - y, space)
    if op == "*":
        return Smp(x * y, space)
    _check_divisor(y)
    return Smp(x / y, space)


def _binary_lin(op: str, x: Value, y: Value, strict: bool) -> Lin:
    if op in "+-":
        if is_det(x):
            assert isinstance(y, Lin)
            yy = y if op == "+" else an.neg(y)
            return an.shift(yy, np.asarray(x))
        if is_det(y):
            assert isinstance(x, Lin)
            return an.shift(x, np.asarray(y) if op == "+" else -np.asarray(y))
        return an.add(to_lin(x), to_lin(y)) if op == "+" else an.sub(to_lin(x), to_lin(y))
    if op == "*":
        if is_det(x):
            assert isinstance(y, Lin)
            return an.scale(y, np.asarray(x))
        if is_det(y):
            assert isinstance(x, Lin)
            return an.scale(x, np.asarray(y))
        return an.mul(to_lin(x), to_lin(y), strict)
    if is_det(y):
        _check_divisor(np.asarray(y))
        assert isinstance(x, Lin)
        return an.scale(x, 1.0 / np.asarray(y))
    assert isinstance(y, Lin)
    r = an.recip(y, strict)
    if is_det(x):
        return an.scale(r, np.asarray(x))
    return an.mul(to_lin(x), r, strict)


def negate(x: Value) -> Value:
    if isinstance(x, NumericLanes):
        return nm.negate(x)
    if isinstance(x, Lin):
        return an.neg(x)
    if isinstance(x, Smp):
        return Smp(-x.x, x.space)
    return -x


def take_lanes(x: Value, idx: IntArray) -> Value:
    if isinstance(x, NumericLanes):
        return nm.take(x, idx)
    if isinstance(x, Smp):
        if idx.shape[0] == x.m and np.array_equal(idx, np.arange(x.m)):
            return x
        return Smp(x.x[idx], x.space)
    if isinstance(x, Lin):
        return an.take(x, idx)
    if isinstance(x, Smp):
        return Smp(x.x[idx], x.space)
    return x[idx]


def broadcast(x: Value, m: int) -> Value:
    """A one-lane value repeated over ``m`` lanes (same random variable)."""
    if nlanes(x) == m:
        return x
    if isinstance(x, Lin):
        return an.take(x, np.zeros(m, dtype=np.int64))
    if isinstance(x, NumericLanes):
        return nm.take(x, np.zeros(m, dtype=np.int64))
    if isinstance(x, Smp):
        return Smp(np.broadcast_to(x.x[:1], (m, x.x.shape[1])), x.space)
    return np.broadcast_to(x[:1], (m,)).copy()


def _common_space(values: list[Value]) -> Space | None:
    for v in values:
        if isinstance(v, Smp):
            return v.space
    return None


def concat_lanes(values: list[Value]) -> Value:
    """Lanes of several values one after another."""
    space = _common_space(values)
    if space is not None:
        return Smp(np.vstack([to_smp(v, space).x for v in values]), space)
    if all(is_det(v) for v in values):
        return np.concatenate([np.asarray(v) for v in values])
    if any(isinstance(v, NumericLanes) for v in values):
        return nm.concat([v for v in values if not isinstance(v, Lin | Smp)])
    return an.concat([to_lin(v) for v in values])


def merge(m: int, pieces: list[tuple[IntArray, Value]]) -> Value:
    """Assemble ``m`` lanes from pieces ``(lane indices, value)`` covering them."""
    if len(pieces) == 1 and pieces[0][0].shape[0] == m:
        idx, v = pieces[0]
        if np.array_equal(idx, np.arange(m)):
            return v
    space = _common_space([p[1] for p in pieces])
    if space is not None:  # scatter rows straight into place
        out_x = np.empty((m, space.n))
        for idx, v in pieces:
            out_x[idx] = to_smp(v, space).x
        return Smp(out_x, space)
    order = np.concatenate([p[0] for p in pieces])
    stacked = concat_lanes([p[1] for p in pieces])
    inverse = np.empty(m, dtype=np.int64)
    inverse[order] = np.arange(order.shape[0])
    out = take_lanes(stacked, inverse)
    if isinstance(out, Lin):
        return Lin(out.mu, out.ids, out.A, out.g)
    return out


def reduce(op: str, x: Value, starts: IntArray, ctx: LaneCtx) -> Value:
    """Reduce contiguous, non-empty lane segments beginning at ``starts``."""
    if op == "min":
        return negate(reduce("max", negate(x), starts, ctx))
    if isinstance(x, NumericLanes):
        return nm.reduce(op, x, starts)
    if isinstance(x, Smp):
        ufunc = np.add if op == "sum" else np.maximum
        return Smp(ufunc.reduceat(x.x, starts, axis=0), x.space)
    if is_det(x):
        arr = np.asarray(x)
        return (np.add if op == "sum" else np.maximum).reduceat(arr, starts)
    assert isinstance(x, Lin)
    if op == "sum":
        mu = np.add.reduceat(x.mu, starts)
        return Lin(mu, x.ids, np.add.reduceat(x.A, starts, axis=0), x.g)
    return _reduce_max_lin(x, starts, ctx.strict)


def _reduce_max_lin(x: Lin, starts: IntArray, strict: bool) -> Lin:
    ends = np.append(starts[1:], x.m)
    sizes = ends - starts
    if np.all(sizes == 1):
        return Lin(x.mu[starts], x.ids, x.A[starts], x.g)
    if np.all(sizes == 2):
        return an.max2(an.take(x, starts), an.take(x, starts + 1))
    parts = [
        an.max_lanes(an.take(x, np.arange(s, e)), strict)
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    return an.concat(parts)
