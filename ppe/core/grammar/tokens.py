"""Tokens of the performance grammar: one regular expression, and the newline rules that
let a statement continue on the next line (inside brackets, or after/before an operator)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import GrammarError

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
  | (?P<op>\.\.|==|!=|<=|>=|[-+*/^()\[\],:=<>])
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
    {"+", "-", "*", "/", "^", "=", ",", "..", "and", "or", "not", "if", "then", "else"}
)
_CONT_BEFORE = frozenset({"+", "-", "*", "/", "^", "..", "and", "or", "then", "else"})


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
