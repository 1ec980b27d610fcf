"""``poolq models``: what the deployment serves; ``poolq models pull ID``: fill this host's Hub cache
ahead of time (an air-gapped fleet pulls once and copies the cache; docs/models.md)."""
from __future__ import annotations

import click

from poolq.api.cli.output import print_json, with_client
from poolq.api.client.poolq_client import PoolqClient


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="print the server's answer as JSON")
@click.pass_context
def models(context: click.Context, as_json: bool) -> None:
    """The models this deployment serves (GET /v1/models): tasks, dimensions, window, prompts, loaded."""
    if context.invoked_subcommand is None:
        context.invoke(list_models, as_json=as_json)


@models.command("list")
@click.option("--json", "as_json", is_flag=True, help="print the server's answer as JSON")
@with_client
def list_models(client: PoolqClient, as_json: bool) -> None:
    """The models this deployment serves."""
    served = client.models()
    if as_json:
        print_json(served.model_dump(mode="json"))
        return
    for model in served.data:
        prompts = ", ".join(model.prompts) or "-"
        state = (f"loaded on {model.loaded_workers} worker(s), {model.resident_bytes / 2**20:.0f} MiB, "
                 f"{model.loads} loads, {model.evictions} evictions") if model.loaded else "not loaded"
        click.echo(f"{model.id}  tasks {','.join(model.tasks)}  dim {model.dimensions}  window {model.window}  "
                   f"pooling {model.pooling}  prompts {prompts}  ({state})")


@models.command()
@click.argument("model_id")
def pull(model_id: str) -> None:
    """Download MODEL_ID (org/name[@revision]) into this host's Hub cache (HF_HOME), safetensors and the
    model's description only; refused, naming why, where poolq would not load it. Prints the commit."""
    from poolq.engine.loading import hub

    name = hub.parse_hub_name(model_id)
    if name is None:
        raise click.BadParameter(f"{model_id!r} is not a Hub id (org/name or org/name@revision)", param_hint="MODEL_ID")
    try:
        commit = hub.pin(name)
        path = hub.weights_dir(name.repo_id, commit)
    except (hub.HubModelRefused, hub.HubUnavailable) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{name.repo_id}@{commit}  {path}")
