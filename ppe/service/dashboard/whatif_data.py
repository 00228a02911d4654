"""JSON the dashboard's What-if page offers as starting points: the shipped example specs
(examples/whatif/ in a source checkout) that the service can evaluate.

Authenticated like the API the other pages call: the session cookie with the page's CSRF
header (or a bearer token), operator or admin. Not part of the public API (no schema).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from ppe.service.auth import OPERATE, require
from ppe.service.errors import ROUTER_RESPONSES, ProblemRoute
from ppe.service.whatif import check
from ppe.whatif import SpecError

DATA_PATH = "/dashboard/data/whatif/examples"
#: The examples of a source checkout; an installed wheel has none (the list is then empty).
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "examples" / "whatif"

router = APIRouter(include_in_schema=False, route_class=ProblemRoute, responses=ROUTER_RESPONSES)
Operator = Annotated[str, Depends(require(*OPERATE))]


@lru_cache(maxsize=4)
def examples(directory: Path = EXAMPLES_DIR) -> tuple[dict[str, str], ...]:
    """Every example spec in ``directory`` the service can check (a SimGrid platform file is
    for ``ppe whatif --simgrid``, so that one is left out), by file name."""
    out = []
    for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        text = path.read_text(encoding="utf-8")
        try:
            title = check(text).points[0].spec.title
        except SpecError:
            continue
        out.append({"name": path.name, "title": title or path.stem, "spec": text})
    return tuple(out)


@router.get(DATA_PATH)
def example_specs(_role: Operator) -> list[dict[str, Any]]:
    """The example specs: ``[{name, title, spec}]``."""
    return [dict(e) for e in examples()]
