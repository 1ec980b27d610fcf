"""The --task, --output and --long-documents options of the commands that make jobs (submit, embed).

Their help comes from the registries (the job tasks, ``poolq.jobs.JOB_TASKS``; the long-document
modes, ``poolq.engine.LongDocumentMode``), so a task or mode added there is listed here too.
"""
from __future__ import annotations

import json

import click

from poolq.engine import LongDocumentMode, LongDocumentPolicy
from poolq.jobs import JOB_TASKS


def _listed(names_and_summaries: list[tuple[str, str]]) -> str:
    return "; ".join(f"{name}: {summary}" if summary else name for name, summary in names_and_summaries)


TASKS_HELP = _listed([(name, task.summary) for name, task in JOB_TASKS.items()])
MODES_HELP = ", ".join(mode.value for mode in LongDocumentMode)
DEFAULT_MODE = LongDocumentPolicy().mode.value

task_option = click.option("--task", type=click.Choice(list(JOB_TASKS)), default=None,
                           help=f"what the job computes (default embed): {TASKS_HELP}")
output_option = click.option("--output", "output", default=None,
                             help='output options as JSON, e.g. \'{"sparse_top_k": 128}\' or \'{"activation": false}\'')
long_documents_option = click.option(
    "--long-documents", "long_documents", default=None,
    help=f'JSON, e.g. \'{{"mode": "chunked"}}\'; modes: {MODES_HELP} (default {DEFAULT_MODE})')


def add_task_fields(spec: dict, task: str | None, output: str | None) -> dict:
    """``spec`` with the fields ``--task`` and ``--output`` set (``--output`` merged into its ``output``)."""
    if task:
        spec["task"] = task
    if output:
        try:
            options = json.loads(output)
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--output") from None
        if not isinstance(options, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--output")
        spec["output"] = {**spec.get("output", {}), **options}
    return spec
