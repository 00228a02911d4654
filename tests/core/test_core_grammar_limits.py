"""Size limits of the grammar: nesting depth, number of components and chains of components.

Each limit is checked just under (compiles, and predicts) and just over (a GrammarLimitError
naming the limit and its value, pointing at the place), hostile texts of the sizes reported
(thousands of levels or components) fail fast with the same error rather than a
RecursionError, and the worst shapes at the limits compile and evaluate within a tight
recursion budget: the parser and checker are bounded by the limits, evaluation is iterative.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest

from ppe.core import (
    GrammarError,
    HostInputs,
    Normal,
    builtin_models,
    compile_model,
    predict,
    validate_model,
)
from ppe.core.grammar import (
    MAX_CHAIN,
    MAX_DEFINITIONS,
    MAX_DEPTH,
    GrammarLimitError,
    parse,
    unparse,
)

TAIL = "HostTime[p] = X\nExecTime = max(p in hosts: HostTime[p])\n"
BOUNDED_TAIL = "HostTime[p] = rows[p] * Benchmark[p] / FracAvailCPU[p] + X\n" + TAIL.split("\n")[1]


def hosts(k: int = 3) -> list[HostInputs]:
    return [
        HostInputs(
            f"h{i}",
            2e-8,
            Normal(0.5, 0.05),
            Normal(1e7, 1e6) if i < k - 1 else None,
            Normal(1e7, 1e6) if i > 0 else None,
            1e-4,
        )
        for i in range(k)
    ]


def over(text: str, limit: str) -> GrammarLimitError:
    """The error compiling ``text`` (cache bypassed), which must be the ``limit`` one."""
    compile_model.cache_clear()
    with pytest.raises(GrammarLimitError) as info:
        compile_model(text)
    err = info.value
    assert err.limit == limit
    maximum = {"depth": MAX_DEPTH, "definitions": MAX_DEFINITIONS, "chain": MAX_CHAIN}[limit]
    assert err.maximum == maximum
    assert f"limit of {maximum}" in err.message
    name = {"depth": "MAX_DEPTH", "definitions": "MAX_DEFINITIONS", "chain": "MAX_CHAIN"}[limit]
    assert name in err.message
    body = err.to_dict()  # the 422 body's shape is every grammar error's
    assert body["type"] == "grammar" and body["line"] == err.line and body["message"]
    return err


# ------------------------------------------------------------------ expressions


def parens(k: int) -> str:
    return "X = " + "(" * k + "1" + ")" * k + "\n"


# Expressions of height exactly ``k`` (the tree's depth, brackets counted), by shape.
SHAPES = {
    "brackets": lambda k: "(" * (k - 1) + "1" + ")" * (k - 1),
    "operator chain": lambda k: " + ".join(["1"] * k),
    "right-nested operators": lambda k: "1 * (" * ((k - 1) // 2) + "1" + ")" * ((k - 1) // 2),
    "unary minus": lambda k: "-" * (k - 1) + "1",
    "calls": lambda k: "max(" * (k - 1) + "1" + ")" * (k - 1),
    "indices": lambda k: "rows[" * (k - 1) + "0" + "]" * (k - 1),
    "aggregations": lambda k: "sum(i in hosts: " * (k - 1) + "1" + ")" * (k - 1),
    "neighbours": lambda k: (
        "sum(q in neighbours(" * ((k - 1) // 2) + "0" + "): 1)" * ((k - 1) // 2)
    ),
    "range bounds": lambda k: "sum(i in 1..(" * ((k - 1) // 3) + "1" + "): 1)" * ((k - 1) // 3),
    "if": lambda k: "if 1 > 0 then " * (k - 2) + "1" + " else 0" * (k - 2),
    "not": lambda k: "if " + "not " * (k - 3) + "1 > 0 then 1 else 0",
}
# shapes that climb two or three levels per repetition reach the limit exactly only on odd/even k
EXACT = {"right-nested operators": 2, "neighbours": 2, "range bounds": 3}


@pytest.mark.parametrize("shape", SHAPES)
def test_nesting_depth_just_under_compiles_just_over_is_refused(shape: str) -> None:
    step = EXACT.get(shape, 1)
    top = MAX_DEPTH - (MAX_DEPTH - 1) % step
    under = SHAPES[shape](top)
    compile_model.cache_clear()
    compile_model(f"X = {under}\n{TAIL}")
    err = over(f"X = {SHAPES[shape](top + step)}\n{TAIL}", "depth")
    assert err.line == 1


def test_depth_error_points_at_the_level_beyond_the_limit() -> None:
    err = over(parens(MAX_DEPTH) + TAIL, "depth")  # 100 brackets around 1: 101 levels
    assert (err.line, err.column, err.token) == (1, 5 + MAX_DEPTH, "1")
    err = over(parens(5000) + TAIL, "depth")  # the first bracket too many
    assert (err.line, err.column, err.token) == (1, 5 + MAX_DEPTH, "(")
    err = over("X = 1" + " + 1" * MAX_DEPTH + "\n" + TAIL, "depth")
    assert (err.column, err.token) == (5 + 4 * MAX_DEPTH - 2, "+")  # the 100th '+'


def test_depth_limit_applies_to_requires_and_is_reported_with_other_errors() -> None:
    deep_require = "param n\nrequire " + "(" * MAX_DEPTH + "n > 0" + ")" * MAX_DEPTH + "\n"
    err = over(deep_require + "X = n\n" + TAIL, "depth")
    assert err.line == 2
    errors = validate_model("X = 1 +* 2\n" + parens(3000) + "Y = " + parens(3000)[4:] + TAIL)
    assert [(e.line, type(e).__name__) for e in errors] == [
        (1, "GrammarError"),
        (2, "GrammarLimitError"),
        (3, "GrammarLimitError"),
    ]


# ----------------------------------------------------------------- components


def components(k: int) -> str:
    """A model with exactly ``k`` components (the last ``k - 3`` are constants)."""
    return "X = C0\n" + TAIL + "".join(f"C{i} = {i}\n" for i in range(k - 3))


def test_number_of_components_just_under_compiles_just_over_is_refused() -> None:
    compile_model.cache_clear()
    assert len(compile_model(components(MAX_DEFINITIONS)).definitions) == MAX_DEFINITIONS
    err = over(components(MAX_DEFINITIONS + 1), "definitions")
    first = f"C{MAX_DEFINITIONS - 3}"
    assert (err.line, err.column, err.token, err.name) == (MAX_DEFINITIONS + 1, 1, first, first)
    # the rest of the text is not read: no cascade of errors about what was left out
    assert [e.message for e in validate_model(components(MAX_DEFINITIONS + 1))] == [err.message]


def chain(k: int, reverse: bool = False, tail: str = TAIL) -> str:
    """``A0 = 1``, ``A1 = A0 + 1``, ..., used by X: a chain of ``k`` components (X,
    HostTime and ExecTime included)."""
    lines = ["A0 = 1\n"] + [f"A{i} = A{i - 1} + 1\n" for i in range(1, k - 3)]
    if reverse:
        lines.reverse()
    return "".join(lines) + f"X = A{k - 4}\n" + tail


def test_chain_of_components_just_under_compiles_just_over_is_refused() -> None:
    compile_model.cache_clear()
    compile_model(chain(MAX_CHAIN))
    err = over(chain(MAX_CHAIN + 1), "chain")
    # reported once, at the component where the chain first exceeds the limit
    assert [e.message for e in validate_model(chain(MAX_CHAIN + 1))] == [err.message]
    assert (err.line, err.column, err.token, err.name) == (MAX_CHAIN + 1, 1, "ExecTime", "ExecTime")
    shown = "ExecTime -> HostTime -> X -> ... -> A1 -> A0"
    assert err.message.endswith(f": {shown} is {MAX_CHAIN + 1} deep")
    # the order of the text does not matter (the cycle check was recursive in text order)
    assert over(chain(MAX_CHAIN + 1, reverse=True), "chain").name == "ExecTime"
    # nor where the chain starts: the first component over the limit is named
    err = over(chain(MAX_CHAIN + 1, tail=TAIL + f"Top = A{MAX_CHAIN - 3} * 2\n"), "chain")
    assert err.name == "ExecTime"
    longer = chain(MAX_CHAIN - 2) + "Y = X\nZ = Y\nW = Z\nV = W\nU = V\n"  # X is 196 deep
    assert [e.name for e in validate_model(longer)] == ["U"]
    # chains through indexed components and several references count the same
    text = "B0[p] = rows[p]\n" + "".join(
        f"B{i}[p] = B{i - 1}[p] * 2 + B{i - 1}[p]\n" for i in range(1, MAX_CHAIN - 1)
    )
    compile_model(text + f"HostTime[p] = B{MAX_CHAIN - 2}[p]\nExecTime = 1\n")
    over(text + f"HostTime[p] = B{MAX_CHAIN - 2}[p]\nExecTime = HostTime[0]\n", "chain")


def test_recursion_is_still_reported_as_before() -> None:
    errors = validate_model("X = Y\nY = Z + X\nZ = 1\nW = W\n" + TAIL)
    assert [e.message for e in errors] == [
        "recursive definition: X -> Y -> X",
        "recursive definition: W -> W",
    ]


# ------------------------------------------------------- the reported attacks


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        (chain(4000), "definitions"),  # 70 KB, stored: under the 100 000-character limit
        (chain(20000), "definitions"),  # inline, 20 000 lines
        (chain(4000, reverse=True), "definitions"),
        (chain(MAX_DEFINITIONS - 10, reverse=True), "chain"),
        (parens(5000) + TAIL, "depth"),
        (parens(3000) + TAIL, "depth"),
        ("X = 1" + " + 1" * 20000 + "\n" + TAIL, "depth"),
        ("X = " + "- " * 5000 + "1\n" + TAIL, "depth"),
        ("X = if " + "not " * 5000 + "1 > 0 then 1 else 0\n" + TAIL, "depth"),
        ("X = " + "max(" * 5000 + "1" + ")" * 5000 + "\n" + TAIL, "depth"),
        ("X = " + "if 1 > 0 then " * 5000 + "1" + " else 0" * 5000 + "\n" + TAIL, "depth"),
        ("X = " + "sum(i in 1..(" * 3000 + "1" + "): 1)" * 3000 + "\n" + TAIL, "depth"),
    ],
    ids=[
        "chain-4000",
        "chain-20000-lines",
        "chain-4000-reversed",
        "chain-990-reversed",
        "parens-5000",
        "parens-3000",
        "plus-20000",
        "minus-5000",
        "not-5000",
        "calls-5000",
        "if-5000",
        "range-bounds-3000",
    ],
)
def test_hostile_texts_fail_with_the_limit(text: str, limit: str) -> None:
    over(text, limit)


# --------------------------------------------------------- recursion budget


def stack_depth() -> int:
    frame: FrameType | None = sys._getframe()
    depth = 0
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


@contextmanager
def recursion_budget(frames: int) -> Iterator[None]:
    """Allow only ``frames`` more Python frames than the caller uses now."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(stack_depth() + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def test_the_parser_and_checker_stay_within_600_frames_at_the_limits() -> None:
    """MAX_DEPTH is chosen so: <= 5 frames per level in the parser, <= 3 in the checker."""
    texts = [f"X = {make(MAX_DEPTH)}\n{TAIL}" for shape, make in SHAPES.items() if shape != "if"]
    texts.append(f"X = {SHAPES['if'](MAX_DEPTH)}\n{TAIL}")
    # errors about deep expressions render them (unparse) and still fit
    texts.append("X = " + "(" * (MAX_DEPTH - 2) + "1 > 0" + ")" * (MAX_DEPTH - 2) + "\n" + TAIL)
    texts.append(parens(5000) + TAIL)
    for text in texts:
        compile_model.cache_clear()
        with recursion_budget(600):
            try:
                compile_model(text)
            except GrammarError:
                pass


def deepest_model() -> str:
    """A chain of MAX_CHAIN components, each MAX_DEPTH levels deep, on stochastic inputs."""
    half = (MAX_DEPTH - 3) // 2
    body = "1e-9 + (" * half + "A{prev}[p]" + ")" * half
    lines = ["param n\nparam I\nA0[p] = rows[p] * n * Benchmark[p] / FracAvailCPU[p]\n"]
    lines += [f"A{i}[p] = " + body.format(prev=i - 1) + "\n" for i in range(1, MAX_CHAIN - 3)]
    last = f"A{MAX_CHAIN - 4}[p]"
    lines.append(f"X[p] = {last} + sum(q in neighbours(p): n * 8 / BWAvail[p, q])\n")
    lines.append("HostTime[p] = I * X[p]\nExecTime = max(p in hosts: HostTime[p])\n")
    return "".join(lines)


@pytest.mark.parametrize("engine", ["auto", "analytic", "mc"])
def test_evaluation_is_iterative_at_the_limits(engine: str) -> None:
    model = compile_model(deepest_model())
    assert len(model.definitions) == MAX_CHAIN
    with recursion_budget(150):  # a recursive evaluator needs > 40 000 frames here
        pred = predict(model, {"n": 100, "I": 10}, hosts(), [10, 20, 30], engine, samples=2000)
    first = 10 * 100 * 2e-8 / 0.5
    assert pred.makespan.mean() > first  # it really went down the whole chain
    assert pred.engine == ("numeric" if engine == "auto" else engine)


# ----------------------------------------------------------- nothing else moved


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("1 + 2 * 3 - 4 / 5 / 6", "((1 + (2 * 3)) - ((4 / 5) / 6))"),
        ("-2 * -x + +y", "(((-2) * (-x)) + y)"),
        ("- - x - y", "((-(-x)) - y)"),
        ("not a < b and c == d or not not e", "(((not (a < b)) and (c == d)) or (not (not e)))"),
        ("a or b and c", "(a or (b and c))"),
        ("(a < b) < c", "((a < b) < c)"),
        ("not -a + b > 0", "(not (((-a) + b) > 0))"),
        (
            "if a then b + 1 else if c then d else e * 2",
            "(if a then (b + 1) else (if c then d else (e * 2)))",
        ),
        (
            "sum(i in a - 1..b * 2: i) + max(q in hosts: q)",
            "(sum(i in (a - 1)..(b * 2): i) + max(q in hosts: q))",
        ),
        ("rows[p - 1] * max(1, -2, (3))", "(rows[(p - 1)] * max(1, (-2), 3))"),
    ],
)
def test_operator_precedence_is_unchanged(text: str, tree: str) -> None:
    stmts, errors = parse(f"X = {text}\n")
    assert errors == []
    assert unparse(stmts[0].body) == tree  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("a < b < c", 11, "comparisons cannot be chained; use 'and'"),
        ("not a == b + c != d", 20, "comparisons cannot be chained; use 'and'"),
        ("a < not b", 9, "unexpected 'not' in an expression"),
        ("-not a", 6, "unexpected 'not' in an expression"),
        ("+not a", 6, "unexpected 'not' in an expression"),
        ("1 + if a then 1 else 2", 9, "unexpected 'if' in an expression"),
        ("sum(i in not a..b: 1)", 14, "unexpected 'not' in an expression"),
        ("sum(i in a < b..c: 1)", 16, "expected a domain"),
    ],
)
def test_operator_syntax_errors_are_unchanged(text: str, column: int, message: str) -> None:
    _, errors = parse(f"X = {text}\n")
    assert errors[0].column == column and errors[0].message.startswith(message)


def test_builtin_models_are_far_within_the_limits() -> None:
    for text in builtin_models().values():
        model = compile_model(text)
        assert len(model.definitions) <= 10
