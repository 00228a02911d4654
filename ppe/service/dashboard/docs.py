"""API documentation pages (/docs: Swagger UI, /redoc: ReDoc) served entirely from this origin.

FastAPI's own pages load swagger-ui and redoc from a CDN (blank offline) and start them with an
inline script, which a strict Content-Security-Policy forbids. Here their files come from the
installed `fastapi-offline` package, which ships current builds of both (OpenAPI 3.1 capable),
and our own small script starts Swagger UI, so the pages run under the dashboard's CSP.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from ppe.service.dashboard.routes import CSP, PAGE_HEADERS, PAGE_METHODS, STATIC_PATH, templates

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
ASSETS_PATH = "/docs/assets"
# ReDoc runs its search index in a Worker it makes from a blob: URL.
DOCS_CSP = CSP + "; worker-src 'self' blob:"
HEADERS = {**PAGE_HEADERS, "Content-Security-Policy": DOCS_CSP}

router = APIRouter(include_in_schema=False)


def assets_dir() -> Path:
    return Path(str(files("fastapi_offline").joinpath("static")))


def asset_files() -> StaticFiles:
    """swagger-ui-bundle.js, swagger-ui.css and redoc.standalone.js, mounted at ASSETS_PATH."""
    return StaticFiles(directory=str(assets_dir()))


def _context(request: Request, title: str) -> dict[str, str]:
    root = str(request.scope.get("root_path", "")).rstrip("/")
    return {
        "title": title,
        "openapi": root + str(request.app.openapi_url),
        "assets": root + ASSETS_PATH,
        "static": root + STATIC_PATH,
    }


@router.api_route(DOCS_PATH, methods=PAGE_METHODS, response_class=HTMLResponse)
def swagger_ui(request: Request) -> Response:
    context = _context(request, f"{request.app.title} API · Swagger UI")
    return templates.TemplateResponse(request, "swagger.html", context, headers=HEADERS)


@router.api_route(REDOC_PATH, methods=PAGE_METHODS, response_class=HTMLResponse)
def redoc(request: Request) -> Response:
    context = _context(request, f"{request.app.title} API · ReDoc")
    return templates.TemplateResponse(request, "redoc.html", context, headers=HEADERS)
