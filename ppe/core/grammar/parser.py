"""Recursive-descent parser: tokens to statements.  It never ``eval``s; after a syntax error
it resumes at the next line, so one pass reports every broken statement."""

from __future__ import annotations

from ..errors import GrammarError
from .nodes import (
    Agg,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Definition,
    Domain,
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
