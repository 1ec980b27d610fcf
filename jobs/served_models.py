"""What this deployment serves (``GET /v1/models``, ``poolq models``): OpenAI's model list, with what a
client needs to use each model well (its tasks, vectors, window, pooling and prompts, whether a
worker has it loaded now, and what the live workers' loads of it cost: loads, evictions, memory).

Served are the registry's names (packaged, ``POOLQ_MODELS``), the Hub models the operator allows that
this host's Hub cache holds (``poolq models pull``), and any model a live worker has loaded. Only the
description files are read (and a model card, README.md, where one sits beside them, a Hub id's fetched
with its description: the Matryoshka sizes it declares): listing never downloads weights.
"""
from __future__ import annotations

import logging

from poolq.engine import ModelSpec, ModelSpecError, UnknownModelError
from poolq.engine.loading.hub import HubAccess, HubUnavailable, hub_cache_dir
from poolq.engine.loading.model_card import matryoshka_dimensions
from poolq.jobs.context import JobContext
from poolq.jobs.coordination.worker_model_stats import ModelTotals
from poolq.jobs.spec.served_model import ModelList, ServedModel
from poolq.jobs.tasks.embed_task import default_output_dimensions, model_output_dimensions
from poolq.jobs.tasks.job_task import OptionRejected

log = logging.getLogger(__name__)


def served_models(ctx: JobContext) -> ModelList:
    """Every model this deployment serves, each described from its files; one that cannot be described
    now (its Hub cache entry half-written, the Hub down) is left out and logged, not an error."""
    totals = ctx.workers.model_totals()
    loaded = [model for model, counted in totals.items() if counted.loaded_workers]
    names = [*ctx.registry.names(), *_cached_hub_ids(ctx.registry.hub_access)]
    names += sorted(model for model in loaded if model.split("@", 1)[0] not in names and _allowed_loaded(ctx, model))
    models = []
    for name in dict.fromkeys(names):
        try:
            spec = ctx.registry.spec(name)
            # a name's own totals and its pinned revisions' (name@commit): the workers count each apart
            counted = sum((each for model, each in totals.items() if model == name or model.startswith(f"{name}@")),
                          ModelTotals(name))
            models.append(_described(name, spec, counted))
        except (UnknownModelError, ModelSpecError, HubUnavailable, OptionRejected) as exc:  # rejected: a Dense unread
            log.warning("GET /v1/models: %s left out: %s", name, exc)
    return ModelList(data=models)


def _described(name: str, spec: ModelSpec, counted: ModelTotals) -> ServedModel:
    owner = name.split("/", 1)[0] if "/" in name else "poolq"
    return ServedModel(
        id=name, created=_created(spec), owned_by=owner, tasks=[task.value for task in spec.kind.tasks],
        # after any Dense module (its out_features), cut to truncate_dim by default, as sentence-transformers' encode
        dimensions=default_output_dimensions(spec), max_dimensions=model_output_dimensions(spec), truncate_dim=spec.truncate_dim,
        matryoshka_dimensions=list(matryoshka_dimensions(spec.path, spec.truncate_dim)) or None,
        window=spec.window_tokens, pooling=spec.pooling.value, normalized=spec.normalize,
        prompts={name: text for name, text in spec.prompts.items() if text}, default_prompt_name=spec.default_prompt_name,
        loaded=counted.loaded_workers > 0, loaded_workers=counted.loaded_workers, resident_bytes=counted.resident_bytes,
        loads=counted.loads, evictions=counted.evictions,
    )


def _created(spec: ModelSpec) -> int:
    try:
        return int((spec.path / "config.json").stat().st_mtime)
    except OSError:
        return 0


def _cached_hub_ids(access: HubAccess) -> list[str]:
    """The allowed Hub repositories this host's cache holds (the cache's folder names, nothing opened)."""
    if not access.allow:
        return []
    root = hub_cache_dir()
    if not root.is_dir():
        return []
    ids = []
    for folder in sorted(root.glob("models--*--*")):
        repo_id = folder.name.removeprefix("models--").replace("--", "/", 1)
        if (folder / "refs" / "main").is_file() and access.allows(repo_id):
            ids.append(repo_id)
    return ids


def _allowed_loaded(ctx: JobContext, model: str) -> bool:
    """A model a worker loaded is listed if this server would accept it now (the API's own rules)."""
    return model in ctx.registry or ctx.registry.hub_access.allows(model.split("@", 1)[0])
