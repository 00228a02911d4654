"""The execution script: PetaSIM's statements, tokenised and parsed by recursive descent.

Grammar (docs/whatif.md, "Execution scripts")::

    script     := (statement | define)*            statements end at a newline or ';'
    define     := 'define' NAME '{' statement* '}'  top level only
    statement  := 'use' 'distribution' NAME
                | 'compute' [NAME] ['fraction' NUMBER]
                | 'send' [NAME] 'halo' ['width' INTEGER]
                | 'move' [NAME] ('to' | 'from') NAME
                | 'synchronize'
                | 'repeat' (INTEGER | NAME) '{' statement* '}'
                | 'do' NAME
    '#' starts a comment.

A statement without a distribution name applies to the one the last ``use`` chose. Every
problem is reported with the script's line and column (the spec turns them into the file's):
syntax, an empty ``repeat`` or ``define``, a count that is not a whole number >= 1, ``do`` of
an unknown name (with the nearest known one), and a cycle of ``define``s calling each other.

:func:`phases` flattens a checked script into its synchronisation phases: the work each node
does between two ``synchronize`` statements (the end of the script is one too), with how many
times that phase runs. One draw per run (ppe/core/GRAMMAR.md): every run of a phase sees the
same availability, so the phases are what the model needs, not the iteration-by-iteration
trace.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

__all__ = [
    "Compute",
    "Define",
    "Do",
    "Move",
    "Phase",
    "Repeat",
    "Script",
    "ScriptError",
    "ScriptProblem",
    "Send",
    "Synchronize",
    "Use",
    "parse_script",
    "phases",
]

#: Nesting a script may use (repeats inside repeats, through ``do`` included).
MAX_NESTING = 16
#: Largest number of times a statement may run (the product of its repeat counts).
MAX_RUNS = 1e15

KEYWORDS = frozenset(
    {"use", "distribution", "compute", "fraction", "send", "halo", "width", "move", "to", "from"}
    | {"synchronize", "repeat", "define", "do"}
)
STATEMENTS = ("use", "compute", "send", "move", "synchronize", "repeat", "do", "define")


@dataclass(frozen=True)
class ScriptProblem:
    """One problem, at the script's line and column (1-based)."""

    line: int
    column: int
    message: str


class ScriptError(ValueError):
    """Every problem found in a script, in text order."""

    def __init__(self, problems: list[ScriptProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.line}:{p.column}: {p.message}" for p in problems))


# ----------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Token:
    kind: str  # NAME NUMBER LBRACE RBRACE END EOF
    text: str
    line: int
    column: int


_TOKEN = re.compile(
    r"(?P<space>[ \t\r]+)|(?P<comment>#[^\n]*)|(?P<newline>\n)|(?P<semi>;)"
    r"|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![A-Za-z_])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*)|(?P<lbrace>\{)|(?P<rbrace>\})"
)


def tokenize(text: str) -> tuple[list[Token], list[ScriptProblem]]:
    """Tokens (newlines and ';' become END) and the characters that are not any token."""
    out: list[Token] = []
    problems: list[ScriptProblem] = []
    line, start, i = 1, 0, 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        col = i - start + 1
        if m is None:
            problems.append(ScriptProblem(line, col, f"unexpected character {text[i]!r}"))
            i += 1
            continue
        kind = m.lastgroup or ""
        if kind in ("newline", "semi"):
            out.append(Token("END", m.group(0), line, col))
        elif kind not in ("space", "comment"):
            out.append(Token(kind.upper(), m.group(0), line, col))
        if kind == "newline":
            line, start = line + 1, m.end()
        i = m.end()
    out.append(Token("EOF", "", line, i - start + 1))
    return out, problems


# -------------------------------------------------------------------------------- AST


@dataclass(frozen=True)
class Use:
    distribution: str
    line: int
    column: int


@dataclass(frozen=True)
class Compute:
    distribution: str | None
    fraction: float
    line: int
    column: int


@dataclass(frozen=True)
class Send:
    distribution: str | None
    width: int
    line: int
    column: int


@dataclass(frozen=True)
class Move:
    distribution: str | None
    direction: str  # "to" | "from"
    nodeset: str
    line: int
    column: int


@dataclass(frozen=True)
class Synchronize:
    line: int
    column: int


@dataclass(frozen=True)
class Repeat:
    count: int | str  # a whole number, or the name of an execution parameter
    body: tuple[Statement, ...]
    line: int
    column: int


@dataclass(frozen=True)
class Do:
    name: str
    line: int
    column: int


Statement = Use | Compute | Send | Move | Synchronize | Repeat | Do


@dataclass(frozen=True)
class Define:
    name: str
    body: tuple[Statement, ...]
    line: int
    column: int


@dataclass(frozen=True)
class Script:
    """A checked script: the top-level statements and the named blocks they may ``do``."""

    text: str
    statements: tuple[Statement, ...]
    defines: Mapping[str, Define] = field(default_factory=dict)

    def in_order(self) -> Iterator[Statement]:
        """Statements as they run (through repeats and ``do``, each body once)."""
        seen: set[str] = set()

        def visit(body: tuple[Statement, ...]) -> Iterator[Statement]:
            for s in body:
                yield s
                if isinstance(s, Repeat):
                    yield from visit(s.body)
                elif isinstance(s, Do) and s.name in self.defines and s.name not in seen:
                    seen.add(s.name)
                    yield from visit(self.defines[s.name].body)

        yield from visit(self.statements)

    def walk(self) -> Iterator[Statement]:
        """Every statement once, the defines' bodies included (for spec checks)."""
        stack = [*self.statements, *(s for d in self.defines.values() for s in d.body)]
        while stack:
            s = stack.pop()
            yield s
            if isinstance(s, Repeat):
                stack.extend(s.body)


# ------------------------------------------------------------------------------ parser


class _Fail(Exception):
    """A statement that cannot be read (``problem`` None: already reported inside it)."""

    def __init__(self, problem: ScriptProblem | None) -> None:
        self.problem = problem


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.problems: list[ScriptProblem] = []

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def fail(self, message: str, tok: Token | None = None) -> _Fail:
        t = tok or self.tok
        return _Fail(ScriptProblem(t.line, t.column, message))

    def take(self, kind: str, what: str) -> Token:
        t = self.tok
        if t.kind != kind:
            raise self.fail(f"expected {what}, found {_show(t)}")
        self.i += 1
        return t

    def keyword(self, word: str) -> bool:
        if self.tok.kind == "NAME" and self.tok.text == word:
            self.i += 1
            return True
        return False

    def name(self, what: str) -> Token:
        t = self.take("NAME", what)
        if t.text in KEYWORDS:
            raise self.fail(f"expected {what}, found the keyword {t.text!r}", t)
        return t

    def skip_ends(self) -> None:
        while self.tok.kind == "END":
            self.i += 1

    def recover(self) -> None:
        """Skip to the next statement (past the end of this line)."""
        while self.tok.kind not in ("END", "EOF", "RBRACE"):
            self.i += 1

    def script(self) -> tuple[list[Statement], dict[str, Define]]:
        statements: list[Statement] = []
        defines: dict[str, Define] = {}
        self.skip_ends()
        while self.tok.kind != "EOF":
            try:
                if self.tok.kind == "NAME" and self.tok.text == "define":
                    d = self.define()
                    if d.name in defines:
                        first = defines[d.name]
                        self.problems.append(
                            ScriptProblem(
                                d.line,
                                d.column,
                                f"{d.name!r} is defined twice (first at line {first.line})",
                            )
                        )
                    defines[d.name] = d
                else:
                    statements.append(self.statement(0))
                self.end_of_statement()
            except _Fail as exc:
                if exc.problem is not None:
                    self.problems.append(exc.problem)
                self.recover()
                if self.tok.kind == "RBRACE":
                    self.i += 1
            self.skip_ends()
        return statements, defines

    def end_of_statement(self) -> None:
        if self.tok.kind not in ("END", "EOF", "RBRACE"):
            raise self.fail(f"expected the end of the statement, found {_show(self.tok)}")

    def define(self) -> Define:
        start = self.take("NAME", "define")
        name = self.name("a name after 'define'")
        body = self.block(f"define {name.text}", 1)
        return Define(name.text, body, start.line, start.column)

    def block(self, what: str, depth: int) -> tuple[Statement, ...]:
        opening = self.take("LBRACE", f"'{{' to open the body of {what}")
        body: list[Statement] = []
        failed = False
        self.skip_ends()
        while self.tok.kind != "RBRACE":
            if self.tok.kind == "EOF":
                raise self.fail(f"the body of {what} opened at line {opening.line} is not closed")
            if self.tok.kind == "NAME" and self.tok.text == "define":
                raise self.fail("'define' is allowed at the top level only")
            try:
                body.append(self.statement(depth))
                self.end_of_statement()
            except _Fail as exc:
                if exc.problem is not None:
                    self.problems.append(exc.problem)
                self.recover()
                failed = True
            self.skip_ends()
        self.i += 1
        if failed:
            raise _Fail(None)  # reported inside
        if not body:
            raise _Fail(ScriptProblem(opening.line, opening.column, f"the body of {what} is empty"))
        return tuple(body)

    def statement(self, depth: int) -> Statement:
        t = self.tok
        if t.kind != "NAME" or t.text not in STATEMENTS:
            near = difflib.get_close_matches(t.text, STATEMENTS, n=1) if t.kind == "NAME" else []
            hint = f"; did you mean {near[0]!r}?" if near else ""
            known = ", ".join(s for s in STATEMENTS if s != "define")
            raise self.fail(f"expected a statement ({known}), found {_show(t)}{hint}")
        self.i += 1
        word = t.text
        if word == "use":
            self.take_keyword("distribution", "'distribution' after 'use'")
            return Use(self.name("a distribution name").text, t.line, t.column)
        if word == "compute":
            dist = self.optional_name()
            fraction = 1.0
            if self.keyword("fraction"):
                num = self.take("NUMBER", "a number after 'fraction'")
                fraction = float(num.text)
                if not 0 < fraction:
                    raise self.fail("the fraction must be above 0", num)
            return Compute(dist, fraction, t.line, t.column)
        if word == "send":
            dist = self.optional_name()
            self.take_keyword("halo", "'halo' (send D halo)")
            width = 1
            if self.keyword("width"):
                width = self.whole(self.take("NUMBER", "a whole number after 'width'"), "width")
            return Send(dist, width, t.line, t.column)
        if word == "move":
            dist = self.optional_name()
            if self.keyword("to"):
                direction = "to"
            elif self.keyword("from"):
                direction = "from"
            else:
                raise self.fail(f"expected 'to' or 'from' after 'move', found {_show(self.tok)}")
            return Move(dist, direction, self.name("a nodeset name").text, t.line, t.column)
        if word == "synchronize":
            return Synchronize(t.line, t.column)
        if word == "do":
            return Do(self.name("a name after 'do'").text, t.line, t.column)
        if word == "define":  # pragma: no cover - handled by the callers
            raise self.fail("'define' is allowed at the top level only", t)
        return self.repeat(t, depth)

    def repeat(self, t: Token, depth: int) -> Repeat:
        if depth + 1 > MAX_NESTING:
            problem = self.fail(f"repeats nest deeper than {MAX_NESTING}", t)
            self.skip_block()
            raise problem
        c = self.tok
        count: int | str
        if c.kind == "NUMBER":
            self.i += 1
            count = self.whole(c, "a repeat count")
        elif c.kind == "NAME" and c.text not in KEYWORDS:
            self.i += 1
            count = c.text
        else:
            raise self.fail(f"expected a repeat count (a whole number or a name), found {_show(c)}")
        body = self.block(f"repeat {c.text}", depth + 1)
        return Repeat(count, body, t.line, t.column)

    def skip_block(self) -> None:
        """Past the next balanced ``{ ... }`` on the way (the rest of a refused statement)."""
        depth = 0
        while self.tok.kind != "EOF":
            kind = self.tok.kind
            self.i += 1
            if kind == "LBRACE":
                depth += 1
            elif kind == "RBRACE":
                depth -= 1
                if depth <= 0:
                    return

    def take_keyword(self, word: str, what: str) -> None:
        if not self.keyword(word):
            raise self.fail(f"expected {what}, found {_show(self.tok)}")

    def optional_name(self) -> str | None:
        t = self.tok
        if t.kind == "NAME" and t.text not in KEYWORDS:
            self.i += 1
            return t.text
        return None

    def whole(self, t: Token, what: str) -> int:
        value = float(t.text)
        if value != int(value) or value < 1:
            raise self.fail(f"{what} must be a whole number >= 1, got {t.text}", t)
        return int(value)


def _show(t: Token) -> str:
    if t.kind == "EOF":
        return "the end of the script"
    if t.kind == "END":
        return "the end of the line" if t.text == "\n" else "';'"
    return repr(t.text)


def parse_script(text: str) -> Script:
    """A checked script; :class:`ScriptError` lists every problem found."""
    tokens, problems = tokenize(text)
    parser = _Parser(tokens)
    statements, defines = parser.script()
    problems.extend(parser.problems)
    problems.extend(_check_calls(statements, defines))
    if not problems:
        problems.extend(_check_depth(statements, defines))
    if not statements and not problems:
        problems.append(ScriptProblem(1, 1, "the script has no statements"))
    if problems:
        problems.sort(key=lambda p: (p.line, p.column))
        raise ScriptError(problems)
    return Script(text, tuple(statements), dict(defines))


def _calls(body: tuple[Statement, ...]) -> Iterator[Do]:
    stack = list(body)
    while stack:
        s = stack.pop()
        if isinstance(s, Do):
            yield s
        elif isinstance(s, Repeat):
            stack.extend(s.body)


def _check_calls(statements: list[Statement], defines: Mapping[str, Define]) -> list[ScriptProblem]:
    """``do`` names a define; defines do not call each other in a cycle."""
    problems = []
    for d in [*_calls(tuple(statements)), *(c for x in defines.values() for c in _calls(x.body))]:
        if d.name not in defines:
            near = difflib.get_close_matches(d.name, list(defines), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            problems.append(ScriptProblem(d.line, d.column, f"'do {d.name}': no such define{hint}"))
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for call in _calls(defines[name].body):
            if call.name not in defines:
                continue
            if state.get(call.name) == 1:
                cycle = " -> ".join([*path[path.index(call.name) :], call.name])
                problems.append(
                    ScriptProblem(
                        call.line, call.column, f"the defines call each other in a cycle: {cycle}"
                    )
                )
            elif call.name not in state:
                visit(call.name, [*path, call.name])
        state[name] = 2

    for name in defines:
        if name not in state:
            visit(name, [name])
    return problems


def _check_depth(statements: list[Statement], defines: Mapping[str, Define]) -> list[ScriptProblem]:
    """Nesting through ``do`` stays within :data:`MAX_NESTING` (no cycles by now)."""
    memo: dict[str, int] = {}

    def depth(body: tuple[Statement, ...]) -> int:
        out = 0
        for s in body:
            if isinstance(s, Repeat):
                out = max(out, 1 + depth(s.body))
            elif isinstance(s, Do):
                if s.name not in memo:
                    memo[s.name] = depth(defines[s.name].body)
                out = max(out, memo[s.name])
        return out

    for s in statements:
        if isinstance(s, Repeat | Do) and depth((s,)) > MAX_NESTING:
            return [
                ScriptProblem(
                    s.line, s.column, f"repeats nest deeper than {MAX_NESTING} (through 'do')"
                )
            ]
    return []


# ------------------------------------------------------------------------------ phases

#: A unit of work a node does: ("compute", dist, fraction), ("halo", dist, width),
#: ("move", dist, direction, nodeset); distribution names are resolved (never None).
Term = tuple[str | float | int, ...]


@dataclass(frozen=True)
class Phase:
    """Work between two synchronisations, run ``count`` times: term -> times per run."""

    count: float
    terms: tuple[tuple[Term, float], ...]


@dataclass
class _Seq:
    """What a statement sequence does: the work before its first synchronisation (``head``),
    the complete phases inside, and the work after its last (``tail``); unsynchronised
    sequences only have a head."""

    head: dict[Term, float]
    middle: list[tuple[float, dict[Term, float]]]
    tail: dict[Term, float]
    synced: bool


def _add(a: Mapping[Term, float], b: Mapping[Term, float], times: float = 1.0) -> dict[Term, float]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + times * v
    return out


def _then(a: _Seq, b: _Seq) -> _Seq:
    if not a.synced:
        if b.synced:
            return _Seq(_add(a.head, b.head), b.middle, b.tail, True)
        return _Seq(_add(a.head, b.head), [], {}, False)
    if not b.synced:
        return _Seq(a.head, a.middle, _add(a.tail, b.head), True)
    return _Seq(a.head, [*a.middle, (1.0, _add(a.tail, b.head)), *b.middle], b.tail, True)


def _times(s: _Seq, n: float) -> _Seq:
    if not s.synced:
        return _Seq(_add({}, s.head, n), [], {}, False)
    middle = [(c * n, t) for c, t in s.middle]
    if n > 1:
        middle.append((n - 1, _add(s.tail, s.head)))
    return _Seq(s.head, middle, s.tail, True)


def phases(script: Script, counts: Mapping[str, float], first: str | None = None) -> list[Phase]:
    """The script's phases, identical ones merged (their counts added), empty ones dropped.

    ``counts`` gives the value of each name a repeat may use; ``first`` is the distribution
    in use before any ``use`` statement. Raises ``KeyError`` naming an unknown count.
    """
    current = [first]

    def seq(body: tuple[Statement, ...]) -> _Seq:
        out = _Seq({}, [], {}, False)
        for s in body:
            out = _then(out, one(s))
        return out

    def one(s: Statement) -> _Seq:
        if isinstance(s, Use):
            current[0] = s.distribution
            return _Seq({}, [], {}, False)
        if isinstance(s, Synchronize):
            return _Seq({}, [], {}, True)
        if isinstance(s, Repeat):
            n = float(counts[s.count]) if isinstance(s.count, str) else float(s.count)
            return _times(seq(s.body), n)
        if isinstance(s, Do):
            return seq(script.defines[s.name].body)
        dist = s.distribution or current[0]
        if dist is None:
            raise KeyError("a statement names no distribution and none is in use")
        if isinstance(s, Compute):
            return _Seq({("compute", dist, s.fraction): 1.0}, [], {}, False)
        if isinstance(s, Send):
            return _Seq({("halo", dist, s.width): 1.0}, [], {}, False)
        return _Seq({("move", dist, s.direction, s.nodeset): 1.0}, [], {}, False)

    whole = seq(script.statements)
    raw = (
        [(1.0, whole.head), *whole.middle, (1.0, whole.tail)]
        if whole.synced
        else [(1.0, whole.head)]
    )
    merged: dict[tuple[tuple[Term, float], ...], float] = {}
    for count, terms in raw:
        key = tuple(sorted((t, v) for t, v in terms.items() if v > 0))
        if key and count > 0:
            merged[key] = merged.get(key, 0.0) + count
    return [Phase(count, key) for key, count in merged.items()]
