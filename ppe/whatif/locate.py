"""Line numbers for a TOML document: ``tomllib`` returns values without positions, so errors
would otherwise name a field but not where it is.

The approach (docs/whatif.md, "Where errors point"): one pass over the text that tracks what
TOML itself tracks for keys, without re-parsing values. Table headers (``[execution]``,
``[execution.params]``) and array-of-tables headers (``[[nodeset]]``, counted, so the third
``[[nodeset]]`` is ``nodeset[2]``) set the current table; a line starting with a key (bare,
quoted or dotted) records that key's position under the current table; the keys of an inline
table on the same line (``load = {kind = "normal", mean = 0.8}``), and of inline tables inside
an array on that line, are recorded under the key. Multi-line strings are skipped (a script's
lines are not keys), and their starting position is kept so a script's own line numbers can
be turned into the file's. Anything the scan cannot place falls back to the nearest enclosing
table or key that it did place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Locator", "Path", "Position"]

Path = tuple[str | int, ...]

_BARE = r"[A-Za-z0-9_-]+"
_QUOTED = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_KEY_PART = rf"(?:{_BARE}|{_QUOTED})"
_KEY = re.compile(rf"\s*({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*=")
_PART = re.compile(rf"{_KEY_PART}")


@dataclass(frozen=True)
class Position:
    """1-based line and column."""

    line: int
    column: int


def _parts(dotted: str) -> list[str]:
    out = []
    for m in _PART.finditer(dotted):
        p = m.group(0)
        out.append(p[1:-1] if p[:1] in "\"'" else p)
    return out


@dataclass
class Locator:
    """Positions of tables and keys in one TOML text, by path (``("nodeset", 1, "number")``)."""

    text: str
    _pos: dict[Path, Position] = field(default_factory=dict)
    _strings: dict[Path, Position] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._scan()

    # ------------------------------------------------------------------ queries

    def find(self, path: Sequence[str | int]) -> Position | None:
        """The position of ``path``, else of its nearest located ancestor."""
        p = tuple(path)
        while p:
            if p in self._pos:
                return self._pos[p]
            p = p[:-1]
        return None

    def string_start(self, path: Sequence[str | int]) -> Position | None:
        """Where a multi-line string's content starts (its first line after a newline that
        directly follows the opening quotes, which TOML drops)."""
        return self._strings.get(tuple(path))

    # --------------------------------------------------------------------- scan

    def _scan(self) -> None:
        counts: dict[tuple[str, ...], int] = {}
        current: Path = ()
        closing: str | None = None  # the delimiter of the multi-line string we are inside
        for lineno, line in enumerate(self.text.splitlines(), start=1):
            if closing is not None:
                if closing in line:
                    closing = None
                continue
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            if stripped.startswith("[["):
                name = _parts(stripped[2 : stripped.find("]]")])
                key = tuple(name)
                counts[key] = counts.get(key, -1) + 1
                current = (*self._resolve(name[:-1], counts), name[-1], counts[key])
                self._pos[current] = Position(lineno, indent + 1)
                self._pos.setdefault(current[:-1], Position(lineno, indent + 1))
                continue
            if stripped.startswith("["):
                current = self._resolve(_parts(stripped[1 : stripped.find("]")]), counts)
                self._pos.setdefault(current, Position(lineno, indent + 1))
                continue
            m = _KEY.match(line)
            if m is None:
                continue
            path = (*current, *_parts(m.group(1)))
            self._pos.setdefault(path, Position(lineno, m.start(1) + 1))
            rest = line[m.end() :]
            closing = self._string_start(path, rest, lineno, m.end())
            if closing is None:
                self._inline(path, rest, lineno, m.end())

    @staticmethod
    def _resolve(parts: Sequence[str], counts: dict[tuple[str, ...], int]) -> Path:
        """A header's dotted name as a path: array tables along it take their current index."""
        out: list[str | int] = []
        for i, name in enumerate(parts):
            out.append(name)
            key = tuple(parts[: i + 1])
            if key in counts:
                out.append(counts[key])
        return tuple(out)

    def _string_start(self, path: Path, rest: str, lineno: int, offset: int) -> str | None:
        """Record a multi-line string's content start; the delimiter when it stays open."""
        value = rest.lstrip()
        for delim in ('"""', "'''"):
            if value.startswith(delim):
                start = offset + (len(rest) - len(value)) + 3
                after = rest[len(rest) - len(value) + 3 :]
                if after == "":
                    self._strings[path] = Position(lineno + 1, 1)
                else:
                    self._strings[path] = Position(lineno, start + 1)
                return None if delim in after else delim
        return None

    def _inline(self, path: Path, rest: str, lineno: int, offset: int) -> None:
        """Keys of inline tables on this line: ``{a = 1}`` under ``path``, and
        ``[{a = 1}, {a = 2}]`` under ``path + (i,)``."""
        depth_brackets = 0
        stack: list[Path] = []
        item = -1
        i = 0
        while i < len(rest):
            ch = rest[i]
            if ch in "\"'":  # skip strings
                j = rest.find(ch, i + 1)
                i = len(rest) if j < 0 else j + 1
                continue
            if ch == "#":
                break
            if ch == "[":
                depth_brackets += 1
            elif ch == "]":
                depth_brackets -= 1
            elif ch == "{":
                if not stack and depth_brackets >= 1:
                    item += 1
                    base: Path = (*path, item)
                else:
                    base = path if not stack else stack[-1]
                stack.append(base)
                self._pos.setdefault(base, Position(lineno, offset + i + 1))
            elif ch == "}":
                if stack:
                    stack.pop()
            elif stack:
                m = _KEY.match(rest, i)
                if m is not None and (i == 0 or rest[i - 1] in "{, \t"):
                    key_path = (*stack[-1], *_parts(m.group(1)))
                    self._pos.setdefault(key_path, Position(lineno, offset + m.start(1) + 1))
                    i = m.end()
                    continue
            i += 1
