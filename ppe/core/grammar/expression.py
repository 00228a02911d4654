"""One expression of the grammar on its own: a formula over free names and named functions.

Prophecy's parameterization templates (``ADDM*N^3/(P-1) + 2*N*MPISR(L)/(P-1)``) are formulas,
not models: no components, no hosts, no ``HostTime``.  They are read by the model parser's own
expression rules (same tokens, precedence, limits and error shapes), so a template and a model
mean the same thing by the same text; what differs is what a name may be.  In an expression

* every name is a free variable whose value the caller supplies (no declarations);
* ``f(a, b)`` calls ``max``/``min`` or one of the caller's named ``functions`` (name -> arity);
* indexing (``X[p]``) and aggregations (``sum(i in ...)``) are refused: they need hosts.

:func:`compile_expression` reports every problem at once, as :func:`compile_model` does.
:func:`ppe.core.evaluate.evaluate_expression` evaluates the result.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import GrammarError
from .checker import _constant_zero
from .nodes import (
    Agg,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Empirical,
    IfExpr,
    Index,
    Name,
    Neg,
    Node,
    Not,
    NumberLit,
    first_token,
    unparse,
)
from .parser import _Parser
from .symbols import FUNCTIONS
from .tokens import KEYWORDS, Token, tokenize


@dataclass(frozen=True, eq=False)
class CompiledExpression:
    """A checked expression: its tree, its free names and the named functions it calls (each
    in order of first appearance)."""

    text: str
    body: Node
    names: tuple[str, ...]
    calls: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Function:
    """A named function defined by an expression of its formal parameters (and free names)."""

    name: str
    formals: tuple[str, ...]
    expression: CompiledExpression

    @property
    def names(self) -> tuple[str, ...]:
        """The free names of the body other than the formals: what a call needs supplied."""
        return tuple(n for n in self.expression.names if n not in self.formals)


class _ExpressionChecker:
    """Names, calls, types and constant-zero divisors of one expression."""

    def __init__(self, functions: Mapping[str, int]) -> None:
        self.functions = dict(functions)
        self.errors: list[GrammarError] = []
        self.names: dict[str, None] = {}
        self.calls: dict[str, None] = {}

    def err(self, message: str, tok: Token, name: str | None = None) -> None:
        self.errors.append(
            GrammarError(message, line=tok.line, column=tok.column, token=tok.text, name=name)
        )

    def kind(self, node: Node) -> str:
        """``"num"`` or ``"bool"``, recording problems; recursion is bounded by MAX_DEPTH."""
        if isinstance(node, NumberLit):
            return "num"
        if isinstance(node, Name):
            if node.name in FUNCTIONS or node.name in self.functions:
                self.err(f"{node.name!r} is a function: {node.name}(...)", node.tok, node.name)
            else:
                self.names.setdefault(node.name)
            return "num"
        if isinstance(node, Index):
            self.err(f"an expression has no indexed names: {unparse(node)}", node.tok, node.name)
            return "num"
        if isinstance(node, Agg):
            self.err(f"aggregations need hosts; not allowed here: {node.op}(...)", node.tok)
            return "num"
        if isinstance(node, Call):
            self.call(node)
            return "num"
        if isinstance(node, Empirical):
            self.err(
                "empirical(...) is for performance models; a template's values are numbers",
                node.tok,
            )
            return "num"
        if isinstance(node, BinOp):
            self.want(node.left, "num")
            self.want(node.right, "num")
            if node.op == "/" and _constant_zero(node.right):
                self.err(
                    f"division by zero: {unparse(node.right)} is always 0",
                    first_token(node.right),
                )
            return "num"
        if isinstance(node, Neg):
            self.want(node.operand, "num")
            return "num"
        if isinstance(node, Compare):
            self.want(node.left, "num")
            self.want(node.right, "num")
            return "bool"
        if isinstance(node, BoolOp):
            self.want(node.left, "bool")
            self.want(node.right, "bool")
            return "bool"
        if isinstance(node, Not):
            self.want(node.operand, "bool")
            return "bool"
        if isinstance(node, IfExpr):
            self.want(node.cond, "bool")
            self.want(node.then, "num")
            self.want(node.orelse, "num")
            return "num"
        raise TypeError(type(node).__name__)

    def want(self, node: Node, wanted: str) -> None:
        got = self.kind(node)
        if got != wanted:
            what = "a number" if wanted == "num" else "a condition"
            other = "a condition" if got == "bool" else "a number"
            self.err(f"expected {what}, got {other}: {unparse(node)}", first_token(node))

    def call(self, node: Call) -> None:
        for a in node.args:
            self.want(a, "num")
        if node.func in FUNCTIONS:
            return
        arity = self.functions.get(node.func)
        if arity is None:
            known = sorted([*FUNCTIONS, *self.functions])
            close = difflib.get_close_matches(node.func, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(known)}"
            self.err(f"unknown function {node.func!r}{hint}", node.tok, node.func)
            return
        if len(node.args) != arity:
            self.err(
                f"{node.func}() takes {arity} argument(s), got {len(node.args)}",
                node.tok,
                node.func,
            )
            return
        self.calls.setdefault(node.func)


def _parse_one(text: str) -> tuple[Node | None, list[GrammarError]]:
    """The expression ``text`` holds (comments and line breaks allowed, nothing after it)."""
    try:
        tokens = tokenize(text)
    except GrammarError as exc:
        return None, [exc]
    parser = _Parser(tokens)
    while parser.at("NEWLINE"):
        parser.advance()
    if parser.at("EOF"):
        return None, [GrammarError("the expression is empty", line=1, column=1, token="")]
    try:
        body = parser.expr()
        while parser.at("NEWLINE"):
            parser.advance()
        if not parser.at("EOF"):
            raise parser.error(f"unexpected {parser.cur.text!r} after the end of the expression")
    except GrammarError as exc:
        return None, [exc]
    return body, []


def compile_expression(text: str, functions: Mapping[str, int] | None = None) -> CompiledExpression:
    """Parse and check one expression; ``functions`` maps the named functions it may call to
    their number of arguments.  Raises :class:`GrammarError` (first problem; ``.errors`` has
    all of them, in text order; a :class:`GrammarLimitError` when over a size limit)."""
    if not isinstance(text, str):
        raise TypeError("expression text must be a string")
    body, errors = _parse_one(text)
    checker = _ExpressionChecker(functions or {})
    if body is not None:
        if checker.kind(body) != "num":
            checker.err(f"the expression is a condition, not a number: {unparse(body)}", body.tok)
    all_errors = sorted(errors + checker.errors, key=lambda e: (e.line or 0, e.column or 0))
    if all_errors:
        first = all_errors[0]
        first.errors = all_errors
        raise first
    assert body is not None
    return CompiledExpression(text, body, tuple(checker.names), tuple(checker.calls))


def define_function(
    name: str, formals: tuple[str, ...], text: str, functions: Mapping[str, int] | None = None
) -> Function:
    """A named function ``name(formals...) = text`` (its body may call ``functions``)."""
    for formal in formals:
        if formal in KEYWORDS or formal in FUNCTIONS:
            raise GrammarError(f"{formal!r} cannot be a formal parameter", name=formal)
    return Function(name, formals, compile_expression(text, functions))
