"""The service's settings: one group per concern (``settings.storage``, ``settings.broker``, ...), each read
from the environment under the POOLQ_* names of its fields; ``Settings`` holds them all."""
from poolq.jobs.settings.group import Role, SettingsGroup
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
from poolq.jobs.settings.service_settings import Settings

__all__ = [
    "AccessSettings", "BrokerSettings", "EstimateSettings", "LaneSettings", "LimitSettings", "ObservabilitySettings",
    "ReliabilitySettings", "ReuseSettings", "Role", "ServingSettings", "Settings", "SettingsGroup", "ShardingSettings",
    "SinkSettings", "StoreSettings", "TaskSettings", "WebhookSettings",
]
