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

Built-in symbols: ``P`` (number of hosts), ``rows[p]``, ``Benchmark[p]``,
``FracAvailCPU[p]`` (stochastic), ``BWAvail[p, q]`` (stochastic) and
``Latency[p, q]``; functions ``max(a, b, ...)``, ``min(...)``; aggregations
``sum|max|min(v in DOMAIN: expr)`` with DOMAIN ``hosts``, ``neighbours(p)`` or
``lo..hi`` (inclusive).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..errors import GrammarError

# --------------------------------------------------------------------------- tokens

KEYWORDS = frozenset({"param", "alias", "require", "if", "then", "else", "and", "or", "not", "in"})


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # NUMBER NAME KW STRING OP NEWLINE EOF
    text: str
    line: int
    column: int


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\f]+)
  | (?P<comment>\#[^\n]*)
  | (?P<nl>\n)
  | (?P<number>(?:\d+\.\d*(?!\.)|\d*\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<string>"[^"\n]*")
  | (?P<op>\.\.|==|!=|<=|>=|[-+*/()\[\],:=<>])
    """,
    re.VERBOSE,
)


def tokenize(text: str) -> list[Token]:
    """Tokens of ``text``; newlines inside brackets are dropped (continuation)."""
    out: list[Token] = []
    pos, line, line_start, depth = 0, 1, 0, 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        col = pos - line_start + 1
        if m is None:
            ch = text[pos]
            if ch == '"':
                raise GrammarError("unterminated string", line=line, column=col, token=ch)
            raise GrammarError(f"unexpected character {ch!r}", line=line, column=col, token=ch)
        kind = m.lastgroup or ""
        tok_text = m.group()
        if kind == "nl":
            if depth == 0:
                out.append(Token("NEWLINE", "\\n", line, col))
            line += 1
            line_start = m.end()
        elif kind == "number":
            out.append(Token("NUMBER", tok_text, line, col))
        elif kind == "name":
            out.append(Token("KW" if tok_text in KEYWORDS else "NAME", tok_text, line, col))
        elif kind == "string":
            out.append(Token("STRING", tok_text, line, col))
        elif kind == "op":
            if tok_text in "([":
                depth += 1
            elif tok_text in ")]":
                depth = max(depth - 1, 0)
            out.append(Token("OP", tok_text, line, col))
        pos = m.end()
    out.append(Token("NEWLINE", "\\n", line, pos - line_start + 1))
    out.append(Token("EOF", "", line, pos - line_start + 1))
    return _join_continuations(out)


_CONT_AFTER = frozenset(
    {"+", "-", "*", "/", "=", ",", "..", "and", "or", "not", "if", "then", "else"}
)
_CONT_BEFORE = frozenset({"+", "-", "*", "/", "..", "and", "or", "then", "else"})


def _join_continuations(tokens: list[Token]) -> list[Token]:
    """Drop newlines that cannot end a statement: after a binary operator or
    before a line that starts with one (no statement starts with an operator)."""
    following: list[Token | None] = [None] * len(tokens)
    upcoming: Token | None = None
    for k in range(len(tokens) - 1, -1, -1):
        following[k] = upcoming
        if tokens[k].kind != "NEWLINE":
            upcoming = tokens[k]
    out: list[Token] = []
    for k, tok in enumerate(tokens):
        if tok.kind == "NEWLINE":
            prev = out[-1] if out else None
            nxt = following[k]
            if prev is not None and prev.kind in ("OP", "KW") and prev.text in _CONT_AFTER:
                continue
            if nxt is not None and nxt.kind in ("OP", "KW") and nxt.text in _CONT_BEFORE:
                continue
        out.append(tok)
    return out


# ----------------------------------------------------------------------------- AST


@dataclass(frozen=True, eq=False)
class Node:
    tok: Token


@dataclass(frozen=True, eq=False)
class NumberLit(Node):
    """A number written in the model text (``2``, ``1e-3``)."""

    value: float


@dataclass(frozen=True, eq=False)
class Name(Node):
    name: str


@dataclass(frozen=True, eq=False)
class Index(Node):
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Call(Node):
    func: str
    args: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Domain(Node):
    kind: str  # hosts | neighbours | range
    args: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Agg(Node):
    op: str  # sum | max | min
    var: str
    domain: Domain
    body: Node


@dataclass(frozen=True, eq=False)
class BinOp(Node):
    op: str  # + - * /
    left: Node
    right: Node


@dataclass(frozen=True, eq=False)
class Neg(Node):
    operand: Node


@dataclass(frozen=True, eq=False)
class Compare(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, eq=False)
class BoolOp(Node):
    op: str  # and | or
    left: Node
    right: Node


@dataclass(frozen=True, eq=False)
class Not(Node):
    operand: Node


@dataclass(frozen=True, eq=False)
class IfExpr(Node):
    cond: Node
    then: Node
    orelse: Node


@dataclass(frozen=True, eq=False)
class ParamDecl:
    tok: Token
    name: str
    aliases: tuple[str, ...]
    default: float | None


@dataclass(frozen=True, eq=False)
class Require:
    tok: Token
    cond: Node
    message: str | None


@dataclass(frozen=True, eq=False)
class Definition:
    tok: Token
    name: str
    indices: tuple[str, ...]
    body: Node


Statement = ParamDecl | Require | Definition


def first_token(node: Node) -> Token:
    """The leftmost token of an expression (where an error about it should point)."""
    if isinstance(node, BinOp | Compare | BoolOp):
        return first_token(node.left)
    return node.tok


def unparse(node: Node) -> str:
    """Readable text of an expression (for messages and memo keys)."""
    if isinstance(node, NumberLit):
        return node.tok.text
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Index):
        return f"{node.name}[{', '.join(unparse(a) for a in node.args)}]"
    if isinstance(node, Call):
        return f"{node.func}({', '.join(unparse(a) for a in node.args)})"
    if isinstance(node, Agg):
        return f"{node.op}({node.var} in {unparse(node.domain)}: {unparse(node.body)})"
    if isinstance(node, Domain):
        if node.kind == "hosts":
            return "hosts"
        if node.kind == "neighbours":
            return f"neighbours({unparse(node.args[0])})"
        return f"{unparse(node.args[0])}..{unparse(node.args[1])}"
    if isinstance(node, BinOp | Compare | BoolOp):
        return f"({unparse(node.left)} {node.op} {unparse(node.right)})"
    if isinstance(node, Neg):
        return f"(-{unparse(node.operand)})"
    if isinstance(node, Not):
        return f"(not {unparse(node.operand)})"
    if isinstance(node, IfExpr):
        return f"(if {unparse(node.cond)} then {unparse(node.then)} else {unparse(node.orelse)})"
    raise TypeError(type(node).__name__)


# -------------------------------------------------------------------------- parser

_AGG_FUNCS = frozenset({"sum", "max", "min"})
_CMP_OPS = frozenset({"<", "<=", ">", ">=", "==", "!="})


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.i = 0

    # helpers
    @property
    def cur(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != "EOF":
            self.i += 1
        return tok

    def at(self, kind: str, text: str | None = None) -> bool:
        tok = self.cur
        return tok.kind == kind and (text is None or tok.text == text)

    def error(self, message: str, tok: Token | None = None) -> GrammarError:
        t = tok or self.cur
        shown = (
            "end of line" if t.kind == "NEWLINE" else ("end of text" if t.kind == "EOF" else t.text)
        )
        return GrammarError(message, line=t.line, column=t.column, token=shown)

    def expect(self, kind: str, text: str | None = None, what: str | None = None) -> Token:
        if self.at(kind, text):
            return self.advance()
        wanted = what or (repr(text) if text else kind.lower())
        got = self.cur
        shown = "end of line" if got.kind == "NEWLINE" else repr(got.text)
        raise self.error(f"expected {wanted}, found {shown}")

    def close(self, opener: Token, text: str) -> None:
        """Expect the bracket closing ``opener``; if the text moved on to a later
        line meanwhile, blame the opener (newlines inside brackets are joined)."""
        if self.at("OP", text):
            self.advance()
            return
        if self.cur.line > opener.line:
            raise self.error(f"{opener.text!r} is never closed", opener)
        self.expect("OP", text)

    # statements
    def parse_model(self) -> tuple[list[Statement], list[GrammarError]]:
        stmts: list[Statement] = []
        errors: list[GrammarError] = []
        while not self.at("EOF"):
            if self.at("NEWLINE"):
                self.advance()
                continue
            try:
                stmts.append(self.statement())
                if not self.at("NEWLINE"):
                    shown = repr(self.cur.text)
                    raise self.error(f"unexpected {shown} after the end of the statement")
                self.advance()
            except GrammarError as exc:
                errors.append(exc)
                while not self.at("NEWLINE") and not self.at("EOF"):
                    self.advance()
        return stmts, errors

    def statement(self) -> Statement:
        if self.at("KW", "param"):
            return self.param()
        if self.at("KW", "require"):
            return self.require()
        if self.at("NAME"):
            return self.definition()
        raise self.error("expected 'param', 'require' or a component definition 'Name = ...'")

    def param(self) -> ParamDecl:
        self.advance()
        name_tok = self.expect("NAME", what="a parameter name")
        aliases: list[str] = []
        if self.at("KW", "alias"):
            self.advance()
            aliases.append(self.expect("NAME", what="an alias name").text)
            while self.at("OP", ","):
                self.advance()
                aliases.append(self.expect("NAME", what="an alias name").text)
        default: float | None = None
        if self.at("OP", "="):
            self.advance()
            sign = 1.0
            if self.at("OP", "-"):
                self.advance()
                sign = -1.0
            num = self.expect("NUMBER", what="a number (parameter defaults are constants)")
            default = sign * float(num.text)
        return ParamDecl(name_tok, name_tok.text, tuple(aliases), default)

    def require(self) -> Require:
        tok = self.advance()
        cond = self.expr()
        message: str | None = None
        if self.at("OP", ":"):
            self.advance()
            message = self.expect("STRING", what="a message in double quotes").text[1:-1]
        return Require(tok, cond, message)

    def definition(self) -> Definition:
        name_tok = self.advance()
        indices: list[str] = []
        if self.at("OP", "["):
            self.advance()
            indices.append(self.expect("NAME", what="an index variable").text)
            while self.at("OP", ","):
                self.advance()
                indices.append(self.expect("NAME", what="an index variable").text)
            self.expect("OP", "]")
        self.expect("OP", "=", what="'='")
        body = self.expr()
        return Definition(name_tok, name_tok.text, tuple(indices), body)

    # expressions (lowest to highest precedence)
    def expr(self) -> Node:
        if self.at("KW", "if"):
            tok = self.advance()
            cond = self.expr()
            self.expect("KW", "then")
            then = self.expr()
            self.expect("KW", "else")
            orelse = self.expr()
            return IfExpr(tok, cond, then, orelse)
        return self.or_expr()

    def or_expr(self) -> Node:
        left = self.and_expr()
        while self.at("KW", "or"):
            tok = self.advance()
            left = BoolOp(tok, "or", left, self.and_expr())
        return left

    def and_expr(self) -> Node:
        left = self.not_expr()
        while self.at("KW", "and"):
            tok = self.advance()
            left = BoolOp(tok, "and", left, self.not_expr())
        return left

    def not_expr(self) -> Node:
        if self.at("KW", "not"):
            tok = self.advance()
            return Not(tok, self.not_expr())
        return self.compare()

    def compare(self) -> Node:
        left = self.additive()
        if self.cur.kind == "OP" and self.cur.text in _CMP_OPS:
            tok = self.advance()
            right = self.additive()
            if self.cur.kind == "OP" and self.cur.text in _CMP_OPS:
                raise self.error("comparisons cannot be chained; use 'and'")
            return Compare(tok, tok.text, left, right)
        return left

    def additive(self) -> Node:
        left = self.term()
        while self.cur.kind == "OP" and self.cur.text in "+-":
            tok = self.advance()
            left = BinOp(tok, tok.text, left, self.term())
        return left

    def term(self) -> Node:
        left = self.unary()
        while self.cur.kind == "OP" and self.cur.text in "*/":
            tok = self.advance()
            left = BinOp(tok, tok.text, left, self.unary())
        return left

    def unary(self) -> Node:
        if self.at("OP", "-"):
            tok = self.advance()
            return Neg(tok, self.unary())
        if self.at("OP", "+"):
            self.advance()
            return self.unary()
        return self.atom()

    def atom(self) -> Node:
        tok = self.cur
        if tok.kind == "NUMBER":
            self.advance()
            return NumberLit(tok, float(tok.text))
        if self.at("OP", "("):
            opener = self.advance()
            inner = self.expr()
            self.close(opener, ")")
            return inner
        if tok.kind == "NAME":
            self.advance()
            if self.at("OP", "["):
                args = self.arglist(self.advance(), "]")
                return Index(tok, tok.text, args)
            if self.at("OP", "("):
                opener = self.advance()
                if tok.text in _AGG_FUNCS and self.at("NAME") and self.peek().text == "in":
                    return self.aggregation(tok, opener)
                args = self.arglist(opener, ")")
                return Call(tok, tok.text, args)
            return Name(tok, tok.text)
        if tok.kind in ("NEWLINE", "EOF"):
            raise self.error("expression ends too early")
        raise self.error(f"unexpected {tok.text!r} in an expression")

    def arglist(self, opener: Token, close: str) -> tuple[Node, ...]:
        args = [self.expr()]
        while self.at("OP", ","):
            self.advance()
            args.append(self.expr())
        self.close(opener, close)
        return tuple(args)

    def aggregation(self, tok: Token, opener: Token) -> Agg:
        var = self.advance().text
        self.expect("KW", "in")
        domain = self.domain()
        self.expect("OP", ":", what="':' before the aggregated expression")
        body = self.expr()
        self.close(opener, ")")
        return Agg(tok, tok.text, var, domain, body)

    def domain(self) -> Domain:
        tok = self.cur
        if tok.kind == "NAME" and tok.text == "hosts" and self.peek().text != "..":
            self.advance()
            return Domain(tok, "hosts", ())
        if tok.kind == "NAME" and tok.text == "neighbours" and self.peek().text == "(":
            self.advance()
            opener = self.advance()
            arg = self.expr()
            self.close(opener, ")")
            return Domain(tok, "neighbours", (arg,))
        lo = self.additive()
        self.expect("OP", "..", what="a domain: 'hosts', 'neighbours(p)' or 'lo..hi'")
        hi = self.additive()
        return Domain(tok, "range", (lo, hi))


def parse(text: str) -> tuple[list[Statement], list[GrammarError]]:
    """Statements of ``text`` and the syntax errors found (parsing resumes at the
    next line after an error)."""
    try:
        tokens = tokenize(text)
    except GrammarError as exc:
        return [], [exc]
    return _Parser(tokens).parse_model()


# ----------------------------------------------------------------- symbol tables


@dataclass(frozen=True)
class Builtin:
    """A system parameter the engine supplies."""

    name: str
    arity: int
    stochastic: bool
    doc: str


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin("P", 0, False, "number of hosts in the chain"),
        Builtin("rows", 1, False, "rows of the grid allocated to host p"),
        Builtin("Benchmark", 1, False, "dedicated seconds to update one element on host p"),
        Builtin("FracAvailCPU", 1, True, "fraction of host p's CPU available (floored at 0.01)"),
        Builtin("BWAvail", 2, True, "bandwidth available from host p to neighbour q, bytes/s"),
        Builtin("Latency", 2, False, "per-message latency from host p to neighbour q, s"),
    )
}
FUNCTIONS = frozenset({"max", "min"})
RESERVED = frozenset(BUILTINS) | FUNCTIONS | {"sum", "hosts", "neighbours"} | KEYWORDS
#: Components a model must define: the per-host time and the makespan.
REQUIRED = {"HostTime": 1, "ExecTime": 0}


@dataclass(frozen=True)
class ParamSpec:
    name: str
    aliases: tuple[str, ...]
    default: float | None
    line: int


@dataclass(frozen=True)
class CompiledModel:
    """A validated model, ready for :func:`ppe.core.predict`."""

    text: str
    digest: str
    params: tuple[ParamSpec, ...]
    requires: tuple[Require, ...]
    definitions: dict[str, Definition]
    stochastic: dict[str, bool]
    #: canonical body text per component (index variables renamed), for sharing
    canonical: dict[str, str]
    #: free index variables of every expression node, by ``id(node)``
    free_vars: dict[int, frozenset[str]] = field(repr=False)

    def param(self, name: str) -> ParamSpec | None:
        for spec in self.params:
            if name == spec.name or name in spec.aliases:
                return spec
        return None

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary (for ``GET /models``)."""
        return {
            "digest": self.digest,
            "params": [
                {"name": p.name, "aliases": list(p.aliases), "default": p.default}
                for p in self.params
            ],
            "components": [
                {"name": d.name, "indices": list(d.indices), "stochastic": self.stochastic[d.name]}
                for d in self.definitions.values()
            ],
        }


# -------------------------------------------------------------------------- checker


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

    # recursion
    def check_cycles(self) -> list[str]:
        """Report recursion; return the components in dependency order."""
        order: list[str] = []
        state: dict[str, int] = {}

        def visit(name: str, path: list[str]) -> None:
            state[name] = 1
            for ref, tok in self.refs.get(name, []):
                if ref not in self.defs:
                    continue
                if state.get(ref) == 1:
                    cycle = path[path.index(ref) :] + [name, ref] if ref in path else [name, ref]
                    chain = " -> ".join(dict.fromkeys(cycle[:-1])) + f" -> {ref}"
                    self.err(f"recursive definition: {chain}", tok, ref)
                elif state.get(ref) is None:
                    visit(ref, path + [name])
            state[name] = 2
            order.append(name)

        for name in self.defs:
            if state.get(name) is None:
                visit(name, [])
        return order

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
        return None if b == 0 else a / b
    if isinstance(node, IfExpr):
        a, b = _constant(node.then), _constant(node.orelse)
        return a if a is not None and a == b else None
    return None


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
    if stmts:
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
    )
