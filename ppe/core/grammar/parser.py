"""Recursive-descent parser: tokens to statements.  It never ``eval``s; after a syntax error
it resumes at the next line, so one pass reports every broken statement.

Operators are parsed by precedence with explicit stacks and only brackets, ``if`` and
aggregations recurse, each one nesting level: the limits of :mod:`.limits` are checked on
entry to a level and as each node is built, before any deep recursion can happen."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import GrammarError
from .limits import (
    MAX_DEFINITIONS,
    MAX_DEPTH,
    GrammarLimitError,
    definitions_message,
    depth_message,
)
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
)
from .tokens import Token, tokenize

_AGG_FUNCS = frozenset({"sum", "max", "min"})
_CMP_OPS = frozenset({"<", "<=", ">", ">=", "==", "!="})
# Binding powers, loosest first; _NOT and _NEG are the prefix operators.  '^' binds tighter
# than a prefix '-' (-x^2 is -(x^2)) and groups to the right (2^3^2 is 2^9).
_OR, _AND, _NOT, _CMP, _ADDITIVE, _MUL, _NEG, _EXP = 1, 2, 3, 4, 5, 6, 7, 8
_POWER = {"or": _OR, "and": _AND, "+": _ADDITIVE, "-": _ADDITIVE, "*": _MUL, "/": _MUL, "^": _EXP}
_POWER.update(dict.fromkeys(_CMP_OPS, _CMP))


def _binary_power(tok: Token) -> int | None:
    if tok.kind == "KW" and tok.text in ("or", "and"):
        return _POWER[tok.text]
    if tok.kind == "OP":
        return _POWER.get(tok.text)
    return None


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.i = 0
        self.level = 0  # nesting levels open (MAX_DEPTH)
        self.heights: dict[int, int] = {}  # height of each node above 1, by id (this statement)
        self.definitions = 0  # definitions started (MAX_DEFINITIONS)

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
            self.heights.clear()  # ids of a failed statement's nodes may be reused
            try:
                stmts.append(self.statement())
                if not self.at("NEWLINE"):
                    shown = repr(self.cur.text)
                    raise self.error(f"unexpected {shown} after the end of the statement")
                self.advance()
            except GrammarError as exc:
                errors.append(exc)
                if isinstance(exc, GrammarLimitError) and exc.limit == "definitions":
                    break  # the rest is not read at all
                while not self.at("NEWLINE") and not self.at("EOF"):
                    self.advance()
        return stmts, errors

    def statement(self) -> Statement:
        if self.at("KW", "param"):
            return self.param()
        if self.at("KW", "require"):
            return self.require()
        if self.at("NAME"):
            self.definitions += 1
            if self.definitions > MAX_DEFINITIONS:
                tok = self.cur
                raise GrammarLimitError(
                    definitions_message(),
                    limit="definitions",
                    maximum=MAX_DEFINITIONS,
                    line=tok.line,
                    column=tok.column,
                    token=tok.text,
                    name=tok.text,
                )
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

    # expressions
    @contextmanager
    def nested(self) -> Iterator[None]:
        """One nesting level deeper; refused beyond MAX_DEPTH *before* recursing, so the
        parser (at most 5 frames per level) never nears Python's recursion limit."""
        self.level += 1
        try:
            if self.level > MAX_DEPTH:
                raise self.depth_error(self.cur)
            yield
        finally:
            self.level -= 1

    def depth_error(self, tok: Token) -> GrammarLimitError:
        return GrammarLimitError(
            depth_message(),
            limit="depth",
            maximum=MAX_DEPTH,
            line=tok.line,
            column=tok.column,
            token=tok.text,
        )

    def made(self, node: Node, height: int, at: Token | None = None) -> Node:
        """Record the height of a new node (its subtree's depth); refuse trees deeper than
        MAX_DEPTH, which operator chains such as ``1 + 1 + ... + 1`` build without nesting."""
        if height > MAX_DEPTH:
            raise self.depth_error(at or node.tok)
        if height > 1:
            self.heights[id(node)] = height
        return node

    def height(self, *nodes: Node) -> int:
        """1 + the height of the tallest of ``nodes``."""
        return 1 + max((self.heights.get(id(n), 1) for n in nodes), default=0)

    def expr(self) -> Node:
        with self.nested():
            if self.at("KW", "if"):
                tok = self.advance()
                cond = self.expr()
                self.expect("KW", "then")
                then = self.expr()
                self.expect("KW", "else")
                orelse = self.expr()
                return self.made(IfExpr(tok, cond, then, orelse), self.height(cond, then, orelse))
            return self.operators(_OR)

    def operators(self, lowest: int) -> Node:
        """Operands joined by prefix and binary operators that bind at least as tightly as
        ``lowest``, by operator precedence with explicit stacks: long operator chains cost
        no recursion.  Precedence, loosest first: ``or``, ``and``, prefix ``not``, one
        (unchained) comparison, ``+ -``, ``* /``, prefix ``-``, ``^``; binary operators group
        left except ``^``, which groups right (its exponent may carry a prefix ``-``)."""
        operands: list[Node] = []
        ops: list[tuple[Token, int]] = []  # operator, binding power (_NOT, _NEG: prefix)
        while True:
            while True:  # prefix operators, then an atom
                tok = self.cur
                if tok.kind == "KW" and tok.text == "not":
                    # only where the loose grammar allows it: first, or after and/or/not
                    if (ops[-1][1] if ops else lowest) > _NOT:
                        break
                    ops.append((self.advance(), _NOT))
                elif tok.kind == "OP" and tok.text in ("-", "+"):
                    ops.append((self.advance(), _NEG))  # a prefix '+' builds no node
                else:
                    break
            operands.append(self.atom())
            tok = self.cur
            power = _binary_power(tok)
            if power is None or power < lowest:
                break
            while ops and (ops[-1][1] > power or (ops[-1][1] == power and power != _EXP)):
                if power == _CMP and ops[-1][1] == _CMP:
                    raise self.error("comparisons cannot be chained; use 'and'")
                self.reduce(ops, operands)
            ops.append((self.advance(), power))
        while ops:
            self.reduce(ops, operands)
        return operands[0]

    def reduce(self, ops: list[tuple[Token, int]], operands: list[Node]) -> None:
        tok, power = ops.pop()
        if power in (_NOT, _NEG):
            if tok.text == "+":
                return
            operand = operands.pop()
            node: Node = Not(tok, operand) if power == _NOT else Neg(tok, operand)
            operands.append(self.made(node, self.height(operand)))
            return
        right = operands.pop()
        left = operands.pop()
        if power == _CMP:
            node = Compare(tok, tok.text, left, right)
        elif power in (_OR, _AND):
            node = BoolOp(tok, tok.text, left, right)
        else:
            node = BinOp(tok, tok.text, left, right)
        operands.append(self.made(node, self.height(left, right)))

    def atom(self) -> Node:
        tok = self.cur
        if tok.kind == "NUMBER":
            self.advance()
            return NumberLit(tok, float(tok.text))
        if self.at("OP", "("):
            opener = self.advance()
            inner = self.expr()
            self.close(opener, ")")
            # the brackets are a level too (the parser nested for them)
            return self.made(inner, self.height(inner), opener)
        if tok.kind == "NAME":
            self.advance()
            if self.at("OP", "["):
                args = self.arglist(self.advance(), "]")
                return self.made(Index(tok, tok.text, args), self.height(*args))
            if self.at("OP", "("):
                opener = self.advance()
                if tok.text in _AGG_FUNCS and self.at("NAME") and self.peek().text == "in":
                    return self.aggregation(tok, opener)
                if tok.text == EMPIRICAL:
                    return self.empirical(tok, opener)
                args = self.arglist(opener, ")")
                return self.made(Call(tok, tok.text, args), self.height(*args))
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

    def empirical(self, tok: Token, opener: Token) -> Node:
        """``empirical("app", "kernel", name = expr, ...)`` or ``empirical("model", ...)``."""
        usage = 'empirical("model") or empirical("app", "kernel"), then the point as name = value'
        ref = [self.expect("STRING", what=f"a name in double quotes: {usage}").text[1:-1]]
        names: list[str] = []
        args: list[Node] = []
        while self.at("OP", ","):
            self.advance()
            if self.at("STRING") and not names and len(ref) == 1:
                ref.append(self.advance().text[1:-1])
                continue
            names.append(self.expect("NAME", what=f"a parameter name: {usage}").text)
            self.expect("OP", "=", what=f"'=' after {names[-1]!r}: {usage}")
            args.append(self.expr())
        self.close(opener, ")")
        node = Empirical(tok, tuple(ref), tuple(names), tuple(args))
        return self.made(node, self.height(*args))

    def aggregation(self, tok: Token, opener: Token) -> Node:
        var = self.advance().text
        self.expect("KW", "in")
        domain = self.domain()
        self.expect("OP", ":", what="':' before the aggregated expression")
        body = self.expr()
        self.close(opener, ")")
        return self.made(Agg(tok, tok.text, var, domain, body), self.height(domain, body))

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
            node = Domain(tok, "neighbours", (arg,))
        else:
            with self.nested():
                lo = self.operators(_ADDITIVE)
            self.expect("OP", "..", what="a domain: 'hosts', 'neighbours(p)' or 'lo..hi'")
            with self.nested():
                hi = self.operators(_ADDITIVE)
            node = Domain(tok, "range", (lo, hi))
        self.made(node, self.height(*node.args))
        return node


def parse(text: str) -> tuple[list[Statement], list[GrammarError]]:
    """Statements of ``text`` and the syntax errors found (parsing resumes at the
    next line after an error)."""
    try:
        tokens = tokenize(text)
    except GrammarError as exc:
        return [], [exc]
    return _Parser(tokens).parse_model()
