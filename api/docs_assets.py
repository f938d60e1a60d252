"""The API reference pages (/docs, /redoc) with their scripts, styles and icon served by the
gateway itself, from the `fastapi-offline` package: FastAPI's defaults load them from a
CDN, which leaves both pages blank on the offline machines memoryd is built for.

The pages reference nothing outside this origin: Swagger UI's online validator (an image
fetched from validator.swagger.io) is switched off, ReDoc gets no web fonts, and both pages
carry a content security policy that keeps the browser on this origin, which also stops
ReDoc's attribution logo (an image on cdn.redoc.ly; hidden when it cannot load). The
policy allows inline scripts and styles: FastAPI's page starts Swagger UI with an inline
script, ReDoc injects its styles, and neither page shows stored data.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/docs-assets"
DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
SWAGGER_UI_PARAMETERS = {"validatorUrl": None}
DOCS_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
        "worker-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _local(page: HTMLResponse) -> HTMLResponse:
    page.headers.update(DOCS_HEADERS)
    return page


def install_docs(app: FastAPI) -> None:
    """Serve /docs, its OAuth2 redirect page and /redoc from local assets. The app must be
    built with `docs_url=None, redoc_url=None` so FastAPI's CDN pages are not installed."""
    if app.docs_url is not None or app.redoc_url is not None:
        raise ValueError("build the app with docs_url=None and redoc_url=None")
    openapi_url = app.openapi_url or "/openapi.json"
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _local(get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} - API reference",
            oauth2_redirect_url=f"{root}{OAUTH2_REDIRECT_URL}",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        ))

    async def oauth2_redirect(request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _local(get_redoc_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} - API reference",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png", with_google_fonts=False,
        ))

    # Plain routes (GET and HEAD), outside the OpenAPI description, as FastAPI's own are.
    app.add_route(DOCS_URL, swagger_ui, include_in_schema=False)
    app.add_route(OAUTH2_REDIRECT_URL, oauth2_redirect, include_in_schema=False)
    app.add_route(REDOC_URL, redoc, include_in_schema=False)
