"""``/docs`` (Swagger UI) and ``/redoc`` that render without the internet.

FastAPI's own pages load their JavaScript and CSS from a CDN, so on a machine
without internet access (or behind a strict proxy) they stay blank. The same
pages are served here with the assets shipped by the ``fastapi-offline`` package
(a dependency of the ``service`` extra), as FastAPI documents for self-hosting
them: the app is created with ``docs_url=None, redoc_url=None`` and these routes
take their place.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
ASSETS_URL = "/docs-assets"
ASSETS = ("fastapi_offline", "static")
"""Package and folder of the assets: swagger-ui-bundle.js, swagger-ui.css,
redoc.standalone.js, favicon.png."""


def install_docs(app: FastAPI) -> None:
    """Serve the documentation pages of ``app`` (created with ``docs_url=None`` and
    ``redoc_url=None``) and their assets, all from this service."""
    app.mount(ASSETS_URL, StaticFiles(packages=[ASSETS]), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=root + OAUTH2_REDIRECT_URL,
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )


def _root(request: Request) -> str:
    """The path the app is mounted at behind a proxy (``--root-path``), or ``""``."""
    return str(request.scope.get("root_path", "")).rstrip("/")
