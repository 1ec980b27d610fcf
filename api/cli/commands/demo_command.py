"""Start the local stack, submit the sample corpus over HTTP, poll, show results, stop."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console

from poolq.api.cli.progress import PLAIN_EVERY_S, job_progress
from poolq.api.client.poolq_client import PoolqClient
from poolq.devtools.demo.sample_corpus import load_sample_corpus
from poolq.devtools.devstack.process import ServiceError
from poolq.devtools.devstack.stack import LocalStack, StackPorts
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobStatus

# chunked: every document is embedded whole (256-token windows, token-weighted mean), none cut.
DEMO_JOB_OPTIONS = {"long_documents": {"mode": "chunked"}}


def run_demo(
    state_dir: Path, *, keep: bool = False, ports: StackPorts | None = None, console: Console | None = None
) -> int:
    """Returns a process exit code: 0 when the job succeeded and its results were read back."""
    console = console or Console(soft_wrap=True)  # keys, URLs and ids are never broken across lines
    stack = LocalStack(state_dir, ports)
    try:
        state, started = stack.up(log=console.print)
    except ServiceError as exc:
        console.print(f"[red]could not start the local stack:[/red] {exc}")
        return 2
    try:
        return _run_job(state.api_url, state.api_key, state.bucket, console)
    finally:
        if keep:
            console.print(f"stack left running; stop it with: poolq dev down --dir {state_dir}")
        elif started:
            for name in stack.down(only=started):
                console.print(f"stopped {name}")


def _run_job(api_url: str, api_key: str, bucket: str, console: Console) -> int:
    documents = load_sample_corpus()
    titles = {doc["id"]: doc["title"] for doc in documents}
    body = {"input": {"documents": [{"id": d["id"], "text": d["text"]} for d in documents]}, **DEMO_JOB_OPTIONS}
    with PoolqClient(api_url, api_key) as client:
        job = client.submit(body)
        console.print(f"submitted job [bold]{job.id}[/bold]: {len(documents)} documents (POST {api_url}/v1/jobs)")
        final = _wait_with_progress(client, job.id, console)
        console.print(f"job {final.status.value}: {final.counts.model_dump()} tokens={final.usage.tokens}")
        if final.status not in (JobState.SUCCEEDED, JobState.PARTIALLY_SUCCEEDED):
            console.print(f"[red]job did not succeed:[/red] {final.error}")
            return 1
        results = client.results(job.id)
        table = client.read_table(job.id)
    console.print(f"results in bucket [bold]{bucket}[/bold]:")
    console.print(f"  manifest  {results.manifest_key}")
    for part in results.parts:
        console.print(f"  part      {part.key}  ({part.rows} rows)")
    console.print(f"  errors    {results.errors.key}  ({results.errors.count} records)")
    longest = max(table.column("num_tokens").to_pylist())
    console.print(f"  {table.num_rows} rows of {results.dimensions}-d vectors; every document embedded whole "
                  f"(longest {longest} tokens, long_documents.mode=chunked), none truncated")
    _show_nearest_neighbour(table, titles, console)
    return 0


def _wait_with_progress(client: PoolqClient, job_id: str, console: Console, every_s: float = PLAIN_EVERY_S) -> JobStatus:
    """The CLI's bar (documents, running shards' progress included; tokens/s; ETA) on a terminal;
    elsewhere (infra/demo.sh in CI, piped to a log) a plain line every ``every_s`` seconds and on each status change."""
    progress = job_progress(console, every_s)
    try:
        return client.wait(job_id, poll_interval=0.5, timeout=1800, on_progress=progress.update)
    finally:
        progress.close()


def _show_nearest_neighbour(table, titles: dict[str, str], console: Console) -> None:
    ids = table.column("id").to_pylist()
    vectors = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))  # [rows, dim]
    query = 0
    scores = vectors @ vectors[query]  # unit vectors: dot product = cosine
    scores[query] = -np.inf
    best = int(np.argmax(scores))
    console.print(
        f"nearest neighbour of [bold]{titles.get(ids[query], ids[query])}[/bold]: "
        f"[bold]{titles.get(ids[best], ids[best])}[/bold] (cosine {scores[best]:.3f})"
    )
