"""Answers that are already JSON-ready skip FastAPI's generic encoder (large documents)."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Response


def json_response(body: Any, status_code: int = 200) -> Response:
    """orjson writes NaN/inf as null rather than failing the request."""
    return Response(
        orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY),
        status_code=status_code,
        media_type="application/json",
    )
