"""The grammar's syntax tree.

Nodes are frozen and compare by identity (``eq=False``): the checker records facts per node by
``id(node)``, and two equal-looking subexpressions are still two places in the text.  Each keeps
its token, so an error about it can point at line and column.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .tokens import Token


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


#: The function that reads a fitted empirical model (:class:`Empirical`).
EMPIRICAL = "empirical"


@dataclass(frozen=True, eq=False)
class Empirical(Node):
    """``empirical("app", "kernel", n = N)`` or ``empirical("model", n = N)``: a fitted empirical
    model's stochastic value at a point; ``ref`` names the model, ``names[k] = args[k]`` the point.
    The caller binds the models (``CompiledModel.empirical_models``); the grammar never reads them.
    """

    ref: tuple[str, ...]
    names: tuple[str, ...]
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
    op: str  # + - * / ^
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


def preorder(node: Node) -> Iterator[Node]:
    """Every node of an expression, parents first and children in text order (iterative)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        children: list[Node] = []
        for child in vars(n).values():
            if isinstance(child, Node):
                children.append(child)
            elif isinstance(child, tuple):
                children.extend(c for c in child if isinstance(c, Node))
        stack.extend(reversed(children))


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
    if isinstance(node, Empirical):
        refs = [f'"{r}"' for r in node.ref]
        point = [f"{k} = {unparse(a)}" for k, a in zip(node.names, node.args, strict=True)]
        return f"empirical({', '.join([*refs, *point])})"
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
