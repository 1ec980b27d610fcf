"""The API's documentation pages, Swagger UI (``/docs``) and ReDoc (``/redoc``), from assets
served by the API itself: FastAPI's own pages load them from a CDN, so offline (an air-gapped
cluster, a laptop on a plane) they were blank. The assets are fastapi-offline's copies (a
dependency in pyproject.toml). ``/`` goes to the jobs dashboard (dashboard.py)."""
from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js and favicon.png, as the package ships them.
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS_PATH = "/docs-assets"
DOCS_PATH, REDOC_PATH = "/docs", "/redoc"


def install_docs_pages(app: FastAPI) -> None:
    """Serve the assets and both pages on ``app`` (made with ``docs_url=None, redoc_url=None``)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    oauth2_redirect = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get(DOCS_PATH, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_swagger_ui_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI",
                                   oauth2_redirect_url=f"{root}{oauth2_redirect}",
                                   swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png")

    @app.get(oauth2_redirect, include_in_schema=False)
    def swagger_ui_oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_PATH, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_redoc_html(openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - ReDoc",
                              redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png", with_google_fonts=False)


def _root(request: Request) -> str:
    """The prefix a proxy serves the API under (``--root-path``), so the pages' links work behind it."""
    return str(request.scope.get("root_path", "")).rstrip("/")
