"""The --task, --output and --long-documents options of the commands that make jobs (submit, embed).

Their help comes from the registries (the job tasks, ``poolq.jobs.JOB_TASKS``; the long-document
modes, ``poolq.engine.LongDocumentMode``), so a task or mode added there is listed here too.
"""
from __future__ import annotations

import functools
import json
from typing import Any, Callable

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


def prompt_options(command: Callable) -> Callable:
    """``--prompt-name`` / ``--prompt``, handed to the command as one ``prompt_fields`` dict (the spec's fields)."""

    @functools.wraps(command)
    def with_prompt(*args: Any, prompt_name: str | None, prompt: str | None, **kwargs: Any) -> Any:
        if prompt_name is not None and prompt is not None:
            raise click.UsageError("give --prompt-name or --prompt, not both")
        fields = {"prompt_name": prompt_name} if prompt_name is not None else {}
        fields |= {"prompt": prompt} if prompt is not None else {}
        return command(*args, prompt_fields=fields, **kwargs)

    with_prompt = click.option("--prompt", default=None, help="a literal prompt put before each text")(with_prompt)
    return click.option("--prompt-name", default=None, help="one of the model's named prompts (e.g. query; `poolq models` "
                        "lists them); default: the model's default prompt")(with_prompt)


def add_task_fields(spec: dict, task: str | None, output: str | None, prompt_fields: dict | None = None) -> dict:
    """``spec`` with the fields ``--task``, ``--output`` (merged into its ``output``) and the prompt options set."""
    spec.update(prompt_fields or {})
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
