"""The dashboard's job page shows a waiting or running job's place (api/server/ui/job_page.js),
rendered by Node on a minimal document stand-in (the page only creates elements and text)."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

UI = Path(__file__).resolve().parents[3] / "api" / "server" / "ui"
# Just enough of a document for el(): elements with attributes and children, text nodes; textContent.
RENDER = """
class Node { constructor() { this.children = []; this.attributes = {}; }
  append(child) { this.children.push(child); } setAttribute(name, value) { this.attributes[name] = value; }
  addEventListener() {} get textContent() { return this.text ?? this.children.map((c) => c.textContent).join(""); } }
globalThis.Node = Node;
globalThis.document = { createElement: () => new Node(),
  createTextNode: (text) => Object.assign(new Node(), { text }) };
const { jobPage } = await import("./job_page.js");
const find = (node, id) => node.attributes?.id === id ? node : node.children?.map((c) => find(c, id)).find(Boolean);
const job = JSON.parse(process.argv[2]);
const line = find(jobPage({ status: job, throughput: [] }, () => {}), "job-place");
console.log(line ? line.textContent : "(none)");
"""
JOB: dict = {"id": "j", "tenant": "a", "status": "running", "model": "m", "task": "embed", "created_at": "2026-12-01T12:00:00Z",
       "started_at": None, "finished_at": None, "counts": {"total": 9, "completed": 1, "failed": 0, "not_processed": 0},
       "usage": {"tokens": 3}, "in_progress": {"documents": 0, "tokens": 0}, "estimate": {"tokens": 40, "measured": False},
       "rates": {"tokens_per_s": None, "documents_per_s": None, "eta_s": None}, "errors_by_code": {}, "error_samples": [],
       "queue": {"jobs_ahead": 3, "tenant_share": 0.5, "fleet_tokens_per_s": 1200.0, "eta_s": 125.0}}


def _rendered(tmp_path: Path, job: dict) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the dashboard's modules cannot run here")
    ui = shutil.copytree(UI, tmp_path / "ui", dirs_exist_ok=True)
    (ui / "package.json").write_text('{"type": "module"}')
    (ui / "render.js").write_text(RENDER)
    done = subprocess.run([node, "render.js", json.dumps(job)], cwd=ui, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_job_page_shows_the_place_while_the_job_waits_or_runs(tmp_path):
    assert _rendered(tmp_path, JOB) == "3 jobs ahead · your share 50 % · ETA 2 min 5 s"
    finished = {**JOB, "status": "succeeded", "queue": None}
    assert _rendered(tmp_path, finished) == "(none)"
