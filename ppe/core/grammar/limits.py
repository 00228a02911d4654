"""Size limits of a model text, enforced while parsing and compiling.

Models arrive over HTTP, so hostile text must fail with a :class:`GrammarError` (a 422), never
with Python's ``RecursionError``.  The limits bound every walk over a model: the parser's
recursion (checked on entry to each nesting level, before it recurses), the checker's and
``unparse``'s recursion over one expression's tree, and the work per model.  The evaluator
itself is iterative (see :mod:`ppe.core.evaluate`).  Real models are far below them: the
built-in SOR model nests 8 levels, defines 8 components and chains 4 deep (Jacobi2D: 5, 6, 4).
"""

from __future__ import annotations

from typing import Any

from ..errors import GrammarError

#: Deepest expression: a level per bracket pair, operator, index, call, aggregation (and its
#: domain), ``if``, ``-`` and ``not`` -- the height of the syntax tree with brackets counted.
#: The parser spends at most 5 Python frames per level and the checker 3, so 100 levels stay
#: well inside the default recursion limit of 1 000 frames together with any caller's stack.
MAX_DEPTH = 100
#: Most components (``Name = ...`` definitions) in one model.
MAX_DEFINITIONS = 1000
#: Longest chain of components built on one another (``ExecTime -> IterTime -> RComp ->
#: NumElts`` is 4 deep).
MAX_CHAIN = 200


class GrammarLimitError(GrammarError):
    """The text exceeds a size limit: ``limit`` is ``"depth"``, ``"definitions"`` or
    ``"chain"`` and ``maximum`` its value (the message names both)."""

    def __init__(self, message: str, *, limit: str, maximum: int, **where: Any) -> None:
        super().__init__(message, **where)
        self.limit = limit
        self.maximum = maximum


def depth_message() -> str:
    return (
        f"expression nesting exceeds the limit of {MAX_DEPTH} levels (MAX_DEPTH; each bracket, "
        "operator, index, call, aggregation and 'if' is a level)"
    )


def definitions_message() -> str:
    return (
        f"number of components exceeds the limit of {MAX_DEFINITIONS} (MAX_DEFINITIONS): "
        f"this is definition {MAX_DEFINITIONS + 1}"
    )


def chain_message(chain: list[str]) -> str:
    shown = chain if len(chain) <= 6 else [*chain[:3], "...", *chain[-2:]]
    return (
        f"chain of components exceeds the limit of {MAX_CHAIN} (MAX_CHAIN): "
        f"{' -> '.join(shown)} is {len(chain)} deep"
    )
