"""The one Settings object of the service's edges (API, workers, CLI): a group of settings per concern,
each read from the POOLQ_* environment under the same names as when Settings was one flat class."""
from __future__ import annotations

from collections import defaultdict
from functools import cache
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from poolq.jobs.settings.group import SettingsGroup
from poolq.jobs.settings.groups.access import AccessSettings
from poolq.jobs.settings.groups.broker import BrokerSettings
from poolq.jobs.settings.groups.estimates import EstimateSettings
from poolq.jobs.settings.groups.lane import LaneSettings
from poolq.jobs.settings.groups.limits import LimitSettings
from poolq.jobs.settings.groups.observability import ObservabilitySettings
from poolq.jobs.settings.groups.reliability import ReliabilitySettings
from poolq.jobs.settings.groups.reuse import ReuseSettings
from poolq.jobs.settings.groups.serving import ServingSettings
from poolq.jobs.settings.groups.sharding import ShardingSettings
from poolq.jobs.settings.groups.sinks import SinkSettings
from poolq.jobs.settings.groups.storage import StoreSettings
from poolq.jobs.settings.groups.tasks import TaskSettings
from poolq.jobs.settings.groups.webhooks import WebhookSettings


class Settings(BaseModel):
    """Service configuration. Every process of one deployment must load the same values.

    ``Settings()`` reads every group from the environment; ``Settings(store="local", bucket="b")``
    takes flat keys (the fields' own names) and gives each to the group holding it, the rest of that
    group still read from the environment. Unknown keys are ignored, as they always were."""

    model_config = ConfigDict(extra="ignore")

    storage: StoreSettings = Field(default_factory=StoreSettings)
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    tasks: TaskSettings = Field(default_factory=TaskSettings)
    serving: ServingSettings = Field(default_factory=ServingSettings)
    sharding: ShardingSettings = Field(default_factory=ShardingSettings)
    reliability: ReliabilitySettings = Field(default_factory=ReliabilitySettings)
    estimates: EstimateSettings = Field(default_factory=EstimateSettings)
    access: AccessSettings = Field(default_factory=AccessSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    vector_sinks: SinkSettings = Field(default_factory=SinkSettings)
    lane: LaneSettings = Field(default_factory=LaneSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    reuse: ReuseSettings = Field(default_factory=ReuseSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)

    def __init__(self, **values: Any) -> None:
        """Flat keys (``store="local"``) or whole groups (``storage=StoreSettings(...)``). The groups are built
        here, before validation, so an unreadable variable raises pydantic-settings' own SettingsError."""
        super().__init__(**_grouped(values))

    @model_validator(mode="before")
    @classmethod
    def _groups_from_flat_keys(cls, data: Any) -> Any:
        """``Settings.model_validate`` takes flat keys too."""
        return _grouped(data) if isinstance(data, dict) else data

    def with_values(self, **values: Any) -> Settings:
        """A copy with these flat fields changed (``with_values(models_allow="*")``), each group validated again."""
        routes = _routes()
        if unknown := sorted(values.keys() - routes.keys()):
            raise ValueError(f"Settings.with_values: {unknown} are not settings (the fields of Settings' groups)")
        changed: dict[str, dict[str, Any]] = defaultdict(dict)
        for key, value in values.items():
            changed[routes[key]][key] = value
        return self.model_copy(update={
            name: type(group).model_validate({**dict(group), **changed[name]})
            for name in changed for group in [getattr(self, name)]})

    @classmethod
    def flat_fields(cls) -> dict[str, FieldInfo]:
        """Every setting by its own name (its env variable is POOLQ_<NAME>), over all the groups."""
        return {name: info for group in _groups().values() for name, info in group.model_fields.items()}

    @property
    def worker_tokens_per_s(self) -> float:
        """A worker's embedding throughput: ``shard_tokens_per_s``, else the estimate for ``device``."""
        return self.sharding.shard_tokens_per_s or (50_000.0 if self.serving.on_gpu else 2_000.0)

    @property
    def shard_token_budget(self) -> int:
        """Estimated tokens per shard: ``shard_work_s`` of work at ``shard_tokens_per_s``."""
        return max(1, int(self.sharding.shard_work_s * self.worker_tokens_per_s))

    @property
    def embeddings_request_tokens(self) -> int:
        """The most estimated tokens one ``/v1/embeddings`` request may hold: ``embeddings_max_request_tokens``,
        else a quarter of ``embeddings_timeout_s`` at a worker's throughput (so a request the limit lets
        through is answered well before its deadline, even while the worker runs a shard)."""
        if self.lane.embeddings_max_request_tokens is not None:
            return self.lane.embeddings_max_request_tokens
        return max(512, int(self.lane.embeddings_timeout_s / 4 * self.worker_tokens_per_s))


def _grouped(data: dict[str, Any]) -> dict[str, Any]:
    """Each flat key to the group that holds it; each group built by its own ``__init__``, so what was not
    given is read from the environment, and an error names the flat key (``bucket``), as it always did."""
    routes, given = _routes(), defaultdict[str, dict[str, Any]](dict)
    grouped = {key: value for key, value in data.items() if key not in routes}
    for key in data.keys() & routes.keys():
        given[routes[key]][key] = data[key]
    errors: list[Any] = []  # every group's, so one error names every bad setting
    for name, group in _groups().items():
        nested = grouped.get(name)
        if isinstance(nested, group) and name not in given:
            continue
        try:
            grouped[name] = group(**{**dict(nested or {}), **given[name]})
        except ValidationError as error:
            errors += error.errors()
    if errors:
        raise ValidationError.from_exception_data(Settings.__name__, errors)
    return grouped


@cache
def _groups() -> dict[str, type[SettingsGroup]]:
    """Settings' group fields and their classes."""
    return {name: group for name, info in Settings.model_fields.items()
            if isinstance(group := info.annotation, type) and issubclass(group, SettingsGroup)}


@cache
def _routes() -> dict[str, str]:
    """Flat key -> the group holding it: each field's name and the other names it is read under (dtype:
    POOLQ_COMPUTE_DTYPE). A name in two groups would be ambiguous, and refused here."""
    routes: dict[str, str] = {}
    for group_name, group in _groups().items():
        for name, info in group.model_fields.items():
            alias = info.validation_alias
            keys = {name, *(c for c in (alias.choices if isinstance(alias, AliasChoices) else [alias]) if isinstance(c, str))}
            if clash := {key: routes[key] for key in keys if key in routes}:
                raise TypeError(f"settings {sorted(clash)} are in both {group_name} and {sorted(set(clash.values()))}")
            routes.update(dict.fromkeys(keys, group_name))
    return routes
