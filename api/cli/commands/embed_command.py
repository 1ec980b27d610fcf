"""``poolq embed``: a job run in this process, no services, its results written where `poolq results`
would download them: ``OUT/<job_id>/manifest.json``, ``parts/*.parquet`` and ``errors.jsonl``.

The job runs on a local store in a scratch folder under OUT (the steps are the workers' own);
its result files are then moved into place and the scratch folder removed.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

import click
from pydantic import ValidationError

from poolq.api.cli.output import job_summary
from poolq.api.cli.task_options import add_task_fields, long_documents_option, output_option, prompt_options, task_option
from poolq.api.client.result_files import local_part_path, with_local_paths
from poolq.jobs.ledger.manifest import JobManifest
from poolq.jobs.spec.job_state import JobState
from poolq.jobs.spec.job_status import JobResult

if TYPE_CHECKING:
    from poolq.jobs import Settings


@click.command()
@click.argument("input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="output directory: the results go to OUT/<job_id>/")
@click.option("--model", default=None, help="model name, local model directory or Hub id org/name[@revision] "
              "(default: all-MiniLM-L6-v2)")
@click.option("--id-field", default="id", show_default=True)
@click.option("--text-field", default="text", show_default=True)
@long_documents_option
@task_option
@output_option
@prompt_options
@click.option("--json", "as_json", is_flag=True, help="print the job's status as JSON instead of a summary")
def embed(input_path: Path, out_dir: Path, model: str | None, id_field: str, text_field: str, long_documents: str | None,
          task: str | None, output: str | None, prompt_fields: dict, as_json: bool) -> None:
    """Run INPUT_PATH (JSONL or Parquet) through a model in this process, no services; the results
    go to OUT/<job_id>/ (manifest.json, parts/*.parquet, errors.jsonl), as `poolq results` writes them."""
    from poolq.jobs import JobRejected, JobSpec
    from poolq.worker import local_context, run_job_locally

    body: dict = {"input": {"uri": input_path.resolve().as_uri(), "id_field": id_field, "text_field": text_field}}
    if model:
        body["model"] = model
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".poolq-embed-", dir=out_dir))
    try:
        if long_documents:
            body["long_documents"] = json.loads(long_documents)
        spec = JobSpec.model_validate(add_task_fields(body, task, output, prompt_fields))
        status = run_job_locally(local_context(scratch, _local_settings()), spec)
        manifest_path = _move_results(status.result.manifest_uri, out_dir / status.id) if status.result else None
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--long-documents") from None
    except ValidationError as exc:
        raise click.UsageError(_first_errors(exc)) from None
    except JobRejected as exc:
        raise click.UsageError(f"{exc.field}: {exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if manifest_path is not None:
        status = status.model_copy(update={"result": JobResult(manifest_uri=manifest_path.resolve().as_uri())})
    if as_json:
        click.echo(json.dumps(status.model_dump(mode="json"), indent=2))
    else:
        click.echo("\n".join([job_summary(status), *(_files(manifest_path) if manifest_path else [])]))
    if status.status not in (JobState.SUCCEEDED, JobState.PARTIALLY_SUCCEEDED):
        sys.exit(1)


def _local_settings() -> "Settings":
    """This process's settings; a Hub id may be named here unless POOLQ_MODELS_ALLOW narrows it (the user
    runs the model on their own machine, as PoolingEngine.from_pretrained does)."""
    from poolq.jobs import Settings

    settings = Settings()
    return settings if settings.serving.models_allow else settings.with_values(models_allow="*")


def _move_results(manifest_uri: str, target: Path) -> Path:
    """Move the job's parts, error file and manifest (its files named relative to ``target``) into
    ``target``; returns the manifest's path."""
    stored = _path(manifest_uri).read_bytes()
    manifest = JobManifest.model_validate_json(stored)
    (target / "parts").mkdir(parents=True, exist_ok=True)
    local_parts = [local_part_path(part.key) for part in manifest.parts]
    for part, local in zip(manifest.parts, local_parts):
        os.replace(_path(part.uri), target / local)
    os.replace(_path(manifest.errors.uri), target / "errors.jsonl")
    # the stored JSON itself, not the model re-dumped: manifest.json is the manifest as stored, plus paths
    (target / "manifest.json").write_text(json.dumps(with_local_paths(json.loads(stored), local_parts), indent=2),
                                          encoding="utf-8")
    return target / "manifest.json"


def _files(manifest_path: Path) -> list[str]:
    """Where the results are: one line per file, as `poolq results` prints them."""
    manifest, folder = JobManifest.model_validate_json(manifest_path.read_bytes()), manifest_path.parent
    lines = [f"  part      {folder / local_part_path(part.key)}  ({part.rows} rows)" for part in manifest.parts]
    lines.append(f"  errors    {folder / 'errors.jsonl'}  ({manifest.errors.count} records)")
    return [*lines, f"  manifest  {manifest_path}"]


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def _first_errors(exc: ValidationError, limit: int = 5) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()[:limit]
    )
