"""The jobs dashboard as the API serves it (the browser test, tests/api/test_dashboard_browser_e2e.py,
drives it against a live stack): ``/ui`` is HTML under a strict Content-Security-Policy, every asset
it loads is a path on this API, nothing in any asset names another host, no script is inline, and
``/`` sends a browser to it (behind a proxy's prefix too)."""
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from poolq.api.server import dashboard
from poolq.api.server.app import create_app
from poolq.worker.local_runner import local_context

UI_DIR = Path(dashboard.__file__).parent / "ui"


class _Page(HTMLParser):
    """What a page loads (<script src>, <link href>), its inline scripts, and any inline handlers or styles."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "script":
            self._in_script = "src" not in named
            self.loads += [named["src"] or ""] if "src" in named else []
        if tag == "link" and named.get("rel") == "stylesheet":
            self.loads.append(named["href"] or "")
        self.inline += [f"{tag} {name}" for name in named if name.startswith("on") or name == "style"]

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data)

    def handle_endtag(self, tag: str) -> None:
        self._in_script = self._in_script and tag != "script"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    ctx = local_context(tmp_path_factory.mktemp("dashboard"))
    return TestClient(create_app(ctx, ctx.settings))


def test_the_page_is_html_under_a_strict_policy(client):
    response = client.get("/ui")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "unsafe-inline" not in policy
    page = _Page()
    page.feed(response.text)
    assert page.inline == []  # the policy would block an inline script, so there must be none
    assert {"ui/assets/dashboard.js", "ui/assets/dashboard.css"} <= set(page.loads), page.loads


@pytest.mark.parametrize("asset, content_type", [("dashboard.js", "javascript"), ("dashboard.css", "text/css")])
def test_what_the_page_loads_is_served_by_the_api(client, asset, content_type):
    response = client.get(f"/ui/assets/{asset}")
    assert response.status_code == 200 and content_type in response.headers["content-type"]
    assert response.content == (UI_DIR / asset).read_bytes()


def test_every_module_a_module_imports_is_served_too(client):
    modules = sorted(UI_DIR.glob("*.js"))
    imported = {name for path in modules for name in re.findall(r'from "\./([a-z_]+\.js)"', path.read_text())}
    assert imported and imported <= {path.name for path in modules}
    for name in imported:
        assert "javascript" in client.get(f"/ui/assets/{name}").headers["content-type"], name


# The one address an asset may hold: the SVG namespace's name, which createElementNS needs for the
# charts (charts.js). A name, never fetched: the browser test sees every request stay on the API's host.
SVG_NAMESPACE = 'const SVG_NS = "http://www.w3.org/2000/svg";'


def test_no_asset_names_another_host():
    for path in UI_DIR.iterdir():
        text = path.read_text(encoding="utf-8").replace(SVG_NAMESPACE, "", 1)
        assert not re.search(r"https?://|//[a-z0-9-]+\.[a-z]", text, re.IGNORECASE), f"{path.name} names a host"
        assert "innerHTML" not in text and "eval(" not in text, path.name  # data goes in as text only


def test_root_redirects_to_the_dashboard(client):
    response = client.get("/", follow_redirects=False)
    assert response.status_code in (302, 307) and response.headers["location"] == "/ui"
    assert client.get("/").url.path == "/ui"


def test_behind_a_proxy_prefix_the_redirect_keeps_it(tmp_path):
    ctx = local_context(tmp_path)
    prefixed = TestClient(create_app(ctx, ctx.settings), root_path="/poolq")
    assert prefixed.get("/", follow_redirects=False).headers["location"] == "/poolq/ui"


def test_the_dashboard_is_not_in_the_schema(client):
    assert not {"/", "/ui"} & set(client.get("/openapi.json").json()["paths"])
