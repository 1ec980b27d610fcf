"""A Hugging Face Hub endpoint on 127.0.0.1 serving repositories from local folders: as much of the Hub's
HTTP API as ``huggingface_hub`` uses to pin a revision, list a commit's files and download them
(``snapshot_download``, ``hf_hub_download``, ``list_repo_files``), so tests run poolq's online paths with
no network. One commit per repository; every request's method and path are recorded (``requests``).

    with FakeHub({"test-org/model": folder}) as hub, hub.online(monkeypatch):
        ...  # huggingface_hub and poolq talk to it, not to huggingface.co
"""
from __future__ import annotations

import hashlib
import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    length: int | None = None  # Content-Length where it is not the body's (a HEAD names the file's)


_REPO_NOT_FOUND = Reply(404, {"X-Error-Code": "RepoNotFound"}, b'{"error": "Repository not found"}')


class FakeHub:
    def __init__(self, repos: dict[str, Path]) -> None:
        self.repos = {repo_id: (self.commit_of(repo_id, folder), folder) for repo_id, folder in repos.items()}
        self.requests: list[tuple[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @staticmethod
    def commit_of(repo_id: str, folder: Path) -> str:
        digest = hashlib.sha1(repo_id.encode())
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                digest.update(path.relative_to(folder).as_posix().encode() + path.read_bytes())
        return digest.hexdigest()

    def __enter__(self) -> "FakeHub":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @contextmanager
    def online(self, monkeypatch):
        """huggingface_hub (its constants, read at import) and poolq (HF_HUB_OFFLINE, read at each call)
        online, against this endpoint."""
        from huggingface_hub import constants

        with monkeypatch.context() as patch:
            patch.setenv("HF_HUB_OFFLINE", "0")
            patch.setattr(constants, "HF_HUB_OFFLINE", False)
            patch.setattr(constants, "ENDPOINT", self.url)
            patch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", self.url + "/{repo_id}/resolve/{revision}/{filename}")
            yield self

    def fetched(self, filename: str) -> bool:
        return any(method == "GET" and path.endswith(f"/resolve/{commit}/{filename}")
                   for method, path in self.requests for commit, _ in self.repos.values())

    def answer(self, method: str, path: str) -> Reply:
        self.requests.append((method, path))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
            return self._api(f"{parts[2]}/{parts[3]}", parts[4], parts[5])
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._file(f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]), with_body=method == "GET")
        return _REPO_NOT_FOUND

    def _api(self, repo_id: str, kind: str, revision: str) -> Reply:
        """A repository's info (its commit) or its commit's file listing (``revision``: any, one commit)."""
        if repo_id not in self.repos:
            return _REPO_NOT_FOUND
        commit, folder = self.repos[repo_id]
        files = [path for path in sorted(folder.rglob("*")) if path.is_file()]
        body: object
        if kind == "revision":
            body = {"id": repo_id, "sha": commit, "siblings": [{"rfilename": p.relative_to(folder).as_posix()} for p in files]}
        else:
            body = [{"type": "file", "path": p.relative_to(folder).as_posix(), "size": p.stat().st_size,
                     "oid": hashlib.sha1(p.read_bytes()).hexdigest()} for p in files]
        return Reply(200, {"Content-Type": "application/json"}, json.dumps(body).encode())

    def _file(self, repo_id: str, revision: str, filename: str, with_body: bool) -> Reply:
        if repo_id not in self.repos:
            return _REPO_NOT_FOUND
        commit, folder = self.repos[repo_id]
        path = folder / filename
        if not path.is_file():
            return Reply(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}, b"{}")
        data = path.read_bytes()
        headers = {"X-Repo-Commit": commit, "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                   "Content-Type": "application/octet-stream"}
        return Reply(200, headers, data if with_body else b"", len(data))


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self._reply("GET")

        def do_HEAD(self) -> None:  # noqa: N802
            self._reply("HEAD")

        def _reply(self, method: str) -> None:
            reply = hub.answer(method, unquote(urlsplit(self.path).path))
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body) if reply.length is None else reply.length))
            self.end_headers()
            if method == "GET":
                self.wfile.write(reply.body)

        def log_message(self, *args) -> None:
            pass

    return Handler
