"""The jobs dashboard at ``/ui``: one HTML page and its CSS and JavaScript modules, shipped in the
package (``api/server/ui/``) and served by the API itself: no CDN, no build step. The page calls
the JSON routes with the API key the user enters (``Authorization: Bearer``), so it sees exactly
what the key may see. ``/`` sends a browser here."""
from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

UI_DIR = Path(__file__).parent / "ui"
UI_PATH = "/ui"
ASSETS_PATH = f"{UI_PATH}/assets"
# Everything from this origin only, no inline script or style: an injected string can run nothing.
# img-src data: the favicon; downloads are links (navigation), which connect-src does not govern.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_PAGE_HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Referrer-Policy": "no-referrer",
                 "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


def install_dashboard(app: FastAPI) -> None:
    """Serve the page at ``/ui``, its assets under ``/ui/assets``, and ``/`` as a redirect to it."""
    app.mount(ASSETS_PATH, StaticFiles(directory=UI_DIR), name="ui-assets")

    @app.get(UI_PATH, include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(UI_DIR / "index.html", media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)

    @app.get("/", include_in_schema=False)
    def root(request: Request) -> RedirectResponse:
        root_path = str(request.scope.get("root_path", "")).rstrip("/")  # behind a proxy's --root-path
        return RedirectResponse(f"{root_path}{UI_PATH}")
