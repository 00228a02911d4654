"""One mapping from domain exceptions to HTTP answers, shared by the planning endpoints."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import HTTPException

import scheduler
from forecaster import InsufficientData
from ppe.core import ModelError
from ppe.service.planning import PlanningError


@contextmanager
def domain_errors() -> Iterator[None]:
    try:
        yield
    except HTTPException:
        raise
    except PlanningError as exc:
        raise HTTPException(exc.status, [{"field": exc.field, "reason": str(exc)}]) from exc
    except InsufficientData as exc:
        raise HTTPException(
            409, [{"field": "hosts", "reason": f"too little data to forecast: {exc}"}]
        ) from exc
    except ModelError as exc:
        errors = getattr(exc, "errors", None) or [exc]
        raise HTTPException(422, [e.to_dict() for e in errors]) from exc
    except scheduler.Infeasible as exc:
        reason = f"no feasible schedule: {exc}"
        raise HTTPException(422, [{"field": "hosts", "reason": reason}]) from exc
    except LookupError as exc:
        raise HTTPException(422, [{"field": "app", "reason": str(exc).strip("'\"")}]) from exc
    except ValueError as exc:
        raise HTTPException(422, [{"field": None, "reason": str(exc)}]) from exc
