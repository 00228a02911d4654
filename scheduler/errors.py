"""Errors the scheduler raises, and the bound checks shared by every host kind."""

from __future__ import annotations


class Infeasible(ValueError):
    """No schedule satisfies the hosts' row bounds for the requested number of rows."""


def check_bounds(name: str, min_rows: int, max_rows: int | None) -> None:
    """Reject bounds that no schedule could honour, naming the host, so callers see why."""
    if not isinstance(name, str) or not name:
        raise ValueError("host name must be a non-empty string")
    if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < 0:
        raise ValueError(f"host {name!r}: min_rows must be an integer >= 0, got {min_rows!r}")
    if max_rows is None:
        return
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < min_rows:
        raise ValueError(
            f"host {name!r}: max_rows must be an integer >= min_rows ({min_rows}), got {max_rows!r}"
        )


def check_names(names: list[str]) -> None:
    """Rows are reported per host name, so names must be unique."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"duplicate host name {name!r}")
        seen.add(name)
