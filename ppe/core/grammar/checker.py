"""Semantic checks (names, arity, types, recursion, division by a constant 0) and the entry
points :func:`compile_model` and :func:`validate_model`, which report every problem at once."""

from __future__ import annotations

import difflib
import hashlib
import math
import re
from functools import lru_cache

from ..errors import GrammarError
from .limits import MAX_CHAIN, GrammarLimitError, chain_message
from .nodes import (
    Agg,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Definition,
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
    unparse,
)
from .parser import parse
from .symbols import BUILTINS, FUNCTIONS, REQUIRED, RESERVED, CompiledModel, ParamSpec
from .tokens import Token


class _Checker:
    """Semantic validation: names, arity, types, constant-zero divisors, recursion."""

    def __init__(self, stmts: list[Statement]) -> None:
        self.stmts = stmts
        self.errors: list[GrammarError] = []
        self.params: dict[str, ParamDecl] = {}
        self.param_names: dict[str, str] = {}  # name or alias -> param name
        self.defs: dict[str, Definition] = {}
        self.refs: dict[str, list[tuple[str, Token]]] = {}
        self.stoch: dict[str, bool] = {}
        self.free: dict[int, frozenset[str]] = {}
        self.empirical: list[Empirical] = []

    def err(self, message: str, tok: Token, name: str | None = None) -> None:
        self.errors.append(
            GrammarError(message, line=tok.line, column=tok.column, token=tok.text, name=name)
        )

    def run(self) -> None:
        self.declare()
        for d in self.defs.values():
            self.refs[d.name] = []
            self.scope_check(d.body, set(d.indices), d.name)
        for r in (s for s in self.stmts if isinstance(s, Require)):
            self.scope_check(r.cond, set(), None, in_require=True)
        for name in self.check_cycles():
            d = self.defs[name]
            self.stoch[name] = self.typecheck(d.body, want="num")
        for r in (s for s in self.stmts if isinstance(s, Require)):
            self.typecheck(r.cond, want="bool")
        self.check_required()

    # declarations
    def declare(self) -> None:
        for s in self.stmts:
            if isinstance(s, ParamDecl):
                for nm in (s.name, *s.aliases):
                    if self.reserved_or_taken(nm, s.tok):
                        continue
                    self.param_names[nm] = s.name
                self.params.setdefault(s.name, s)
            elif isinstance(s, Definition):
                if self.reserved_or_taken(s.name, s.tok):
                    continue
                seen: set[str] = set()
                for ix in s.indices:
                    if ix in seen:
                        self.err(f"index variable {ix!r} appears twice", s.tok, ix)
                    seen.add(ix)
                    if ix in RESERVED:
                        self.err(f"{ix!r} is reserved and cannot be an index variable", s.tok, ix)
                self.defs[s.name] = s

    def reserved_or_taken(self, nm: str, tok: Token) -> bool:
        if nm in RESERVED:
            self.err(f"{nm!r} is a reserved name", tok, nm)
            return True
        if nm in self.param_names or nm in self.defs:
            self.err(f"{nm!r} is defined twice", tok, nm)
            return True
        return False

    # names and arity
    def known_names(self, scope: set[str]) -> list[str]:
        return sorted(set(scope) | set(self.param_names) | set(self.defs) | set(BUILTINS))

    def unknown(self, nm: str, tok: Token, scope: set[str]) -> None:
        close = difflib.get_close_matches(nm, self.known_names(scope), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        self.err(f"unknown name {nm!r}{hint}", tok, nm)

    def scope_check(
        self, node: Node, scope: set[str], owner: str | None, in_require: bool = False
    ) -> frozenset[str]:
        """Resolve names, check arity; returns and records free index variables."""
        free = self._scope(node, scope, owner, in_require)
        self.free[id(node)] = free
        return free

    def _scope(
        self, node: Node, scope: set[str], owner: str | None, in_req: bool
    ) -> frozenset[str]:
        sc = self.scope_check
        if isinstance(node, NumberLit):
            return frozenset()
        if isinstance(node, Name):
            return self.check_name(node, scope, owner, in_req)
        if isinstance(node, Index):
            free = frozenset().union(*(sc(a, scope, owner, in_req) for a in node.args))
            self.check_index(node, scope, owner, in_req)
            return free
        if isinstance(node, Call):
            if node.func not in FUNCTIONS:
                if node.func in ("neighbours", "sum"):
                    self.err(f"{node.func}(...) is only allowed as an aggregation domain", node.tok)
                else:
                    self.unknown(node.func, node.tok, scope)
            return frozenset().union(*(sc(a, scope, owner, in_req) for a in node.args))
        if isinstance(node, Empirical):
            self.check_empirical(node, scope, owner, in_req)
            return frozenset()
        if isinstance(node, Agg):
            if in_req:
                self.err("aggregations are not allowed in 'require'", node.tok)
            if node.var in RESERVED or node.var in self.param_names or node.var in self.defs:
                self.err(
                    f"{node.var!r} cannot be used as an aggregation variable", node.tok, node.var
                )
            dom_free = frozenset().union(*(sc(a, scope, owner, in_req) for a in node.domain.args))
            self.free[id(node.domain)] = dom_free
            body_free = sc(node.body, scope | {node.var}, owner, in_req)
            return dom_free | (body_free - {node.var})
        if isinstance(node, BinOp | Compare | BoolOp):
            return sc(node.left, scope, owner, in_req) | sc(node.right, scope, owner, in_req)
        if isinstance(node, Neg | Not):
            return sc(node.operand, scope, owner, in_req)
        if isinstance(node, IfExpr):
            return (
                sc(node.cond, scope, owner, in_req)
                | sc(node.then, scope, owner, in_req)
                | sc(node.orelse, scope, owner, in_req)
            )
        raise TypeError(type(node).__name__)

    def check_name(
        self, node: Name, scope: set[str], owner: str | None, in_req: bool
    ) -> frozenset[str]:
        nm = node.name
        if nm in scope:
            return frozenset({nm})
        if nm in self.param_names or nm == "P":
            return frozenset()
        if in_req:
            self.err(f"'require' may only use parameters and P, not {nm!r}", node.tok, nm)
            return frozenset()
        if nm in BUILTINS:
            self.err(f"{nm!r} needs {BUILTINS[nm].arity} index(es): {nm}[...]", node.tok, nm)
        elif nm in self.defs:
            d = self.defs[nm]
            if d.indices:
                self.err(f"{nm!r} needs {len(d.indices)} index(es): {nm}[...]", node.tok, nm)
            if owner is not None:
                self.refs[owner].append((nm, node.tok))
        elif nm in ("hosts", "neighbours", "sum", "max", "min"):
            self.err(f"{nm!r} cannot be used as a value here", node.tok, nm)
        else:
            self.unknown(nm, node.tok, scope)
        return frozenset()

    def check_empirical(
        self, node: Empirical, scope: set[str], owner: str | None, in_req: bool
    ) -> None:
        """A point of parameters, P and numbers only: the model is read once per prediction,
        the same value for every host (one source of randomness, shared)."""
        if in_req:
            self.err("'require' may only use parameters and P, not empirical(...)", node.tok)
            return
        if len(node.ref) == 2 and "+" in node.ref[1]:
            self.err(
                f"{node.ref[1]!r} is a pair of kernels run together; name one kernel", node.tok
            )
        seen: set[str] = set()
        for name, arg in zip(node.names, node.args, strict=True):
            if name in seen:
                self.err(f"empirical(...) names {name!r} twice", node.tok, name)
            seen.add(name)
            self.scope_check(arg, scope, owner, in_req)
            bad = _outside_point(arg, set(self.param_names))
            if bad is not None:
                self.err(
                    f"the point of empirical(...) may use parameters, P and numbers only, "
                    f"not {unparse(bad)!r} ({name} = {unparse(arg)})",
                    first_token(bad),
                    name,
                )
        if owner is not None:
            self.empirical.append(node)

    def check_index(self, node: Index, scope: set[str], owner: str | None, in_req: bool) -> None:
        nm, k = node.name, len(node.args)
        if in_req:
            self.err(f"'require' may only use parameters and P, not {nm!r}", node.tok, nm)
            return
        if nm in BUILTINS:
            want = BUILTINS[nm].arity
        elif nm in self.defs:
            want = len(self.defs[nm].indices)
            if owner is not None:
                self.refs[owner].append((nm, node.tok))
        elif nm in scope or nm in self.param_names:
            self.err(f"{nm!r} is a number and cannot be indexed", node.tok, nm)
            return
        else:
            self.unknown(nm, node.tok, scope)
            return
        if want != k:
            self.err(f"{nm!r} takes {want} index(es), got {k}", node.tok, nm)

    # recursion and chains
    def check_cycles(self) -> list[str]:
        """Report recursion and chains of components deeper than MAX_CHAIN; return the
        components in dependency order.  A depth-first search with an explicit stack: a chain
        is only known to be too deep once it has been walked."""
        order: list[str] = []
        state: dict[str, int] = {}  # 1: on the stack, 2: done
        chain: dict[str, int] = {}  # longest chain of components from each one, itself included
        for root in self.defs:
            if root in state:
                continue
            state[root] = 1
            stack = [(root, iter(self.refs.get(root, [])))]
            while stack:
                name, pending = stack[-1]
                for ref, tok in pending:
                    if ref not in self.defs:
                        continue
                    if state.get(ref) == 1:
                        path = [n for n, _ in stack[:-1]]
                        cycle = (
                            path[path.index(ref) :] + [name, ref] if ref in path else [name, ref]
                        )
                        shown = " -> ".join(dict.fromkeys(cycle[:-1])) + f" -> {ref}"
                        self.err(f"recursive definition: {shown}", tok, ref)
                    elif state.get(ref) is None:
                        state[ref] = 1
                        stack.append((ref, iter(self.refs.get(ref, []))))
                        break
                else:
                    stack.pop()
                    state[name] = 2
                    order.append(name)
                    chain[name] = 1 + max((chain.get(r, 0) for r, _ in self.refs[name]), default=0)
        for name in order:
            if chain[name] == MAX_CHAIN + 1:  # where a chain first exceeds the limit
                self.chain_error(name, chain)
        return order

    def chain_error(self, name: str, chain: dict[str, int]) -> None:
        names = [name]
        while chain[names[-1]] > 1:  # follow the longest chain down (never a cycle's back edge)
            below = chain[names[-1]] - 1
            names.append(next(r for r, _ in self.refs[names[-1]] if chain.get(r) == below))
        tok = self.defs[name].tok
        self.errors.append(
            GrammarLimitError(
                chain_message(names),
                limit="chain",
                maximum=MAX_CHAIN,
                line=tok.line,
                column=tok.column,
                token=tok.text,
                name=name,
            )
        )

    # types: returns whether the expression is stochastic
    def typecheck(self, node: Node, want: str) -> bool:
        kind, stoch = self._type(node)
        if kind != want:
            what = "a number" if want == "num" else "a condition"
            got = "a condition" if kind == "bool" else "a number"
            self.err(f"expected {what}, got {got}: {unparse(node)}", first_token(node))
        return stoch

    def deterministic(self, node: Node, role: str) -> None:
        if self.typecheck(node, "num"):
            msg = f"{role} must not depend on stochastic values: {unparse(node)}"
            self.err(msg, first_token(node))

    def _type(self, node: Node) -> tuple[str, bool]:
        if isinstance(node, NumberLit):
            return "num", False
        if isinstance(node, Name):
            return "num", self.stoch.get(node.name, False) if node.name in self.defs else False
        if isinstance(node, Index):
            for a in node.args:
                self.deterministic(a, f"index of {node.name}")
            if node.name in BUILTINS:
                return "num", BUILTINS[node.name].stochastic
            return "num", self.stoch.get(node.name, False)
        if isinstance(node, Call):
            if not node.args:
                self.err(f"{node.func}() needs at least one argument", node.tok)
            return "num", any([self.typecheck(a, "num") for a in node.args])
        if isinstance(node, Empirical):
            for a in node.args:
                self.deterministic(a, "the point of empirical(...)")
            return "num", True
        if isinstance(node, Agg):
            for a in node.domain.args:
                self.deterministic(a, "an aggregation domain")
            return "num", self.typecheck(node.body, "num")
        if isinstance(node, BinOp):
            ls = self.typecheck(node.left, "num")
            rs = self.typecheck(node.right, "num")
            if node.op == "/" and _constant_zero(node.right):
                self.err(
                    f"division by zero: {unparse(node.right)} is always 0",
                    first_token(node.right),
                )
            if node.op == "^" and (ls or rs):
                self.err(
                    f"'^' needs deterministic operands (no engine keeps powers of random "
                    f"values exact): {unparse(node)}",
                    first_token(node),
                )
            return "num", ls or rs
        if isinstance(node, Neg):
            return "num", self.typecheck(node.operand, "num")
        if isinstance(node, Compare):
            self.deterministic(node.left, "a comparison")
            self.deterministic(node.right, "a comparison")
            return "bool", False
        if isinstance(node, BoolOp):
            self.typecheck(node.left, "bool")
            self.typecheck(node.right, "bool")
            return "bool", False
        if isinstance(node, Not):
            self.typecheck(node.operand, "bool")
            return "bool", False
        if isinstance(node, IfExpr):
            self.typecheck(node.cond, "bool")
            t_kind, t_st = self._type(node.then)
            e_kind, e_st = self._type(node.orelse)
            if t_kind != e_kind:
                self.err("both branches of 'if' must be numbers (or both conditions)", node.tok)
            return t_kind, t_st or e_st
        raise TypeError(type(node).__name__)

    def check_required(self) -> None:
        last = self.stmts[-1].tok if self.stmts else Token("EOF", "", 1, 1)
        for name, arity in REQUIRED.items():
            d = self.defs.get(name)
            shape = f"{name}[p]" if arity else name
            if d is None:
                self.err(f"the model must define {shape}", last, name)
            elif len(d.indices) != arity:
                self.err(f"{name} must be defined as {shape}", d.tok, name)


def _outside_point(node: Node, params: set[str]) -> Node | None:
    """The first part of ``node`` that is not a parameter, ``P``, a number or arithmetic, a
    condition or ``max``/``min`` over those (what an empirical(...) point may use)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Name):
            if n.name not in params and n.name != "P":
                return n
        elif isinstance(n, BinOp | Compare | BoolOp):
            stack.extend((n.right, n.left))
        elif isinstance(n, Neg | Not):
            stack.append(n.operand)
        elif isinstance(n, IfExpr):
            stack.extend((n.orelse, n.then, n.cond))
        elif isinstance(n, Call) and n.func in FUNCTIONS:
            stack.extend(reversed(n.args))
        elif not isinstance(n, NumberLit):
            return n
    return None


def _constant(node: Node) -> float | None:
    if isinstance(node, NumberLit):
        return node.value
    if isinstance(node, Neg):
        v = _constant(node.operand)
        return None if v is None else -v
    if isinstance(node, BinOp):
        if node.op == "*" and (_constant_zero(node.left) or _constant_zero(node.right)):
            return 0.0
        a, b = _constant(node.left), _constant(node.right)
        if a is None or b is None:
            return None
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        if node.op == "*":
            return a * b
        if node.op == "^":
            return constant_power(a, b)
        return None if b == 0 else a / b
    if isinstance(node, IfExpr):
        a, b = _constant(node.then), _constant(node.orelse)
        return a if a is not None and a == b else None
    return None


def constant_power(base: float, exponent: float) -> float | None:
    """``base ^ exponent`` when it is a finite real number, else None (no constant)."""
    if base < 0 and exponent != int(exponent):
        return None
    if base == 0 and exponent < 0:
        return None
    try:
        value = float(base**exponent)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _constant_zero(node: Node) -> bool:
    """True when the expression is 0 whatever the inputs (a divisor that can only be 0)."""
    if isinstance(node, BinOp) and node.op == "*":
        return _constant_zero(node.left) or _constant_zero(node.right)
    if isinstance(node, BinOp) and node.op == "/":
        return _constant_zero(node.left)
    v = _constant(node)
    return v is not None and v == 0.0


def _canonical(d: Definition) -> str:
    """Body text with index variables renamed by position (``$0``, ``$1``...), so
    components with the same formula share one evaluation."""
    text = unparse(d.body)
    for k, ix in enumerate(d.indices):
        text = re.sub(rf"\b{re.escape(ix)}\b", f"${k}", text)
    return text


def _sort_errors(errors: list[GrammarError]) -> list[GrammarError]:
    return sorted(errors, key=lambda e: (e.line or 0, e.column or 0))


def validate_model(text: str) -> list[GrammarError]:
    """Every problem in ``text`` (empty when the model is valid), in text order."""
    try:
        compile_model(text)
    except GrammarError as exc:
        return exc.errors
    return []


@lru_cache(maxsize=256)
def compile_model(text: str) -> CompiledModel:
    """Parse and validate a model.  Raises :class:`GrammarError` (first problem;
    ``.errors`` has all of them, in text order)."""
    if not isinstance(text, str):
        raise TypeError("model text must be a string")
    stmts, errors = parse(text)
    checker = _Checker(stmts)
    if any(isinstance(e, GrammarLimitError) for e in errors):
        pass  # over a limit: that is the answer (the text may not even have been read)
    elif stmts:
        checker.run()
    elif not errors:
        errors.append(GrammarError("the model is empty", line=1, column=1, token=""))
    all_errors = _sort_errors(errors + checker.errors)
    if all_errors:
        first = all_errors[0]
        first.errors = all_errors
        raise first
    params = tuple(
        ParamSpec(p.name, p.aliases, p.default, p.tok.line) for p in checker.params.values()
    )
    return CompiledModel(
        text=text,
        digest=hashlib.sha256(text.encode()).hexdigest(),
        params=params,
        requires=tuple(s for s in stmts if isinstance(s, Require)),
        definitions=dict(checker.defs),
        stochastic=dict(checker.stoch),
        canonical={name: _canonical(d) for name, d in checker.defs.items()},
        free_vars=checker.free,
        empirical_calls=tuple(checker.empirical),
    )
