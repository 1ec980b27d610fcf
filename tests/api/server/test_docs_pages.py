"""``/docs`` and ``/redoc`` load everything they need from the API itself (no CDN: they work
offline). The pages are parsed for every script, stylesheet and icon they load; each must be a
path on this API that answers with the asset. (``/`` goes to the dashboard: test_dashboard.py.)"""
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from poolq.api.server.app import create_app
from poolq.worker.local_runner import local_context


class _Loads(HTMLParser):
    """The URLs a page loads: <script src>, <link href>, and the JS bundles its inline script names."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href", "img": "src"}.get(tag)
        self.urls += [value for name, value in attrs if name == wanted and value]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    ctx = local_context(tmp_path_factory.mktemp("docs-pages"))
    return TestClient(create_app(ctx, ctx.settings))


@pytest.mark.parametrize("page, bundle", [("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")])
def test_doc_pages_load_only_local_assets(client, page, bundle):
    response = client.get(page)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert "cdn." not in response.text and "fonts.googleapis" not in response.text, response.text
    parser = _Loads()
    parser.feed(response.text)
    assert any(url.endswith(bundle) for url in parser.urls), parser.urls
    for url in parser.urls:
        assert url.startswith("/") and not url.startswith("//"), f"{page} loads {url} from elsewhere"
        asset = client.get(url)
        assert asset.status_code == 200 and len(asset.content) > 1000, url
    # the page reads the API's own schema, which this API serves
    assert "/openapi.json" in response.text and client.get("/openapi.json").status_code == 200


def test_the_pages_are_not_in_the_schema(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert not {"/", "/docs", "/redoc"} & set(paths)
