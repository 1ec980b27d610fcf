"""The --task and --output options of the commands that make jobs (submit, embed)."""
from __future__ import annotations

import json
from typing import get_args

import click

from poolq.jobs import JobTaskName

task_option = click.option("--task", type=click.Choice(get_args(JobTaskName)), default=None,
                           help="what the job computes (default embed): embed, sparse_embed (SPLADE), classify")
output_option = click.option("--output", "output", default=None,
                             help='output options as JSON, e.g. \'{"sparse_top_k": 128}\' or \'{"activation": false}\'')


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
