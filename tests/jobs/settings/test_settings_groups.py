"""Settings grouped by concern load a deployment's environment exactly as the one flat class did: every
field from POOLQ_<FIELD> into its group, flat keyword arguments to their groups, and nothing from the
group names themselves."""
from __future__ import annotations

import json
import os
import re
import typing
from pathlib import Path

import pytest
from pydantic import AliasChoices, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import SettingsError

from poolq.jobs.settings import Settings
from poolq.jobs.settings.service_settings import _groups

ROOT = Path(__file__).resolve().parents[3]
POOLQ_NAME = re.compile(r"\bPOOLQ_[A-Z0-9_]+\b")
# Named in the docs but read by the client, the dev stack or the tests, not by Settings.
NOT_SETTINGS = {"POOLQ_API_KEY", "POOLQ_API_URL", "POOLQ_DEV_DIR", "POOLQ_MODEL_CACHE", "POOLQ_REDIS_SERVER",
                "POOLQ_STACK", "POOLQ_TEST_ARTIFACTS"}
# Raw environment values to try for a field, after its Literal's choices and its default moved a little.
SAMPLES = ("7", "4096", "0.5", "true", "false", "x-sample", '{"k": "v"}', '{"k": ["v"]}', '{"k": "memory://k"}')


def _group_of(name: str) -> str:
    [group] = [group for group, cls in _groups().items() if name in cls.model_fields]
    return group


def _env_names(name: str, field: FieldInfo) -> list[str]:
    """The variables a field is read from: its alias choices that are POOLQ_* names, else POOLQ_<NAME>."""
    alias = field.validation_alias
    choices = [c for c in alias.choices if isinstance(c, str) and c.startswith("POOLQ_")] if isinstance(
        alias, AliasChoices) else []
    return choices or [f"POOLQ_{name.upper()}"]


def _candidates(field: FieldInfo) -> list[str]:
    literal = [str(arg) for arg in typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal]
    default = field.get_default(call_default_factory=True)
    moved = [] if isinstance(default, bool) or not isinstance(default, int | float) else [
        str(type(default)(default + 1)), str(type(default)(default - 1)), str(default / 2)]
    return [*literal, *moved, *SAMPLES]


def _sample(name: str, field: FieldInfo, monkeypatch) -> tuple[str, object]:
    """A raw value its variable may hold that loads to something other than the default, and that value."""
    group = _groups()[_group_of(name)]
    variable = _env_names(name, field)[0]
    for raw in _candidates(field):
        with monkeypatch.context() as env:
            env.setenv(variable, raw)
            try:
                value = getattr(group(), name)
            except (ValidationError, SettingsError):  # not a value of its type
                continue
        if value != group.model_fields[name].get_default(call_default_factory=True):
            return raw, value
    raise AssertionError(f"no sample value for {name}")


@pytest.fixture
def bare_env(monkeypatch):
    """No POOLQ_* variable but the ones a test sets (the suite pins a dtype and a signing secret)."""
    for variable in [v for v in os.environ if v.startswith("POOLQ_")]:
        monkeypatch.delenv(variable)
    return monkeypatch


def test_every_setting_is_read_from_its_own_poolq_variable_into_its_group(bare_env):
    fields = Settings.flat_fields()
    samples = {name: _sample(name, field, bare_env) for name, field in fields.items()}
    for name, (raw, _) in samples.items():
        bare_env.setenv(_env_names(name, fields[name])[0], raw)
    settings = Settings()
    assert len(fields) > 90  # every setting of the flat class
    loaded = {name: getattr(getattr(settings, _group_of(name)), name) for name in fields}
    assert loaded == {name: value for name, (_, value) in samples.items()}


def test_the_variables_the_docs_name_are_settings_each_read_into_its_group(bare_env):
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    documented = {name for page in pages for name in POOLQ_NAME.findall(page.read_text(encoding="utf-8"))
                  if not name.endswith("_")} - NOT_SETTINGS  # POOLQ_WEBHOOK_*: a family, named by its prefix
    fields = Settings.flat_fields()
    by_variable = {variable: name for name, field in fields.items() for variable in _env_names(name, field)}
    assert documented - by_variable.keys() == set(), "documented but not a setting"
    assert len(documented) > 60
    for variable in sorted(documented):
        name = by_variable[variable]
        raw, value = _sample(name, fields[name], bare_env)
        with bare_env.context() as env:
            env.setenv(variable, raw)
            assert getattr(getattr(Settings(), _group_of(name)), name) == value, variable


def test_flat_keywords_go_to_their_groups_and_the_rest_still_comes_from_the_environment(bare_env, tmp_path):
    bare_env.setenv("POOLQ_BUCKET", "from-env")
    bare_env.setenv("POOLQ_STORE", "s3")
    bare_env.setenv("POOLQ_REDIS_RETRIES", "4")
    settings = Settings(store="local", local_store_root=tmp_path, dtype="int8", webhook_allow="https://hooks.example/")
    assert (settings.storage.store, settings.storage.local_store_root, settings.storage.bucket) == ("local", tmp_path,
                                                                                                     "from-env")
    assert settings.serving.dtype == "int8" and settings.webhooks.webhook_allow == "https://hooks.example/"
    assert settings.broker.redis_retries == 4  # a group given no keyword still reads its variables


def test_unknown_keywords_are_ignored_as_before_and_every_bad_value_is_named(bare_env):
    assert Settings(not_a_setting=1) == Settings()
    with pytest.raises(ValidationError) as refused:
        Settings(bucket=3, max_num_seqs=0)
    assert {error["loc"] for error in refused.value.errors()} == {("bucket",), ("max_num_seqs",)}
    with pytest.raises(ValidationError, match="plan_soft_time_limit_s < plan_time_limit_s"):
        Settings(plan_soft_time_limit_s=10, plan_time_limit_s=5)
    bare_env.setenv("POOLQ_MODELS", "{not json")
    with pytest.raises(SettingsError, match='field "models"'):  # pydantic-settings' own error, as before
        Settings()


def test_with_values_changes_a_validated_copy_and_refuses_names_that_are_not_settings(bare_env):
    settings = Settings(bucket="b")
    changed = settings.with_values(models_allow="*", max_shard_crashes=2)
    assert (changed.serving.models_allow, changed.reliability.max_shard_crashes, changed.storage.bucket) == ("*", 2, "b")
    assert (settings.serving.models_allow, settings.reliability.max_shard_crashes) == ("", 3)
    with pytest.raises(ValidationError, match="max_shard_crashes"):
        settings.with_values(max_shard_crashes=0)
    with pytest.raises(ValueError, match=r"\['max_shards'\] are not settings"):
        settings.with_values(max_shards=2)


def test_a_groups_own_name_is_no_variable(bare_env):
    """``storage``, ``broker``, ...: a variable named after a group is neither read nor an error."""
    for group in _groups():
        bare_env.setenv(f"POOLQ_{group.upper()}", json.dumps({"bucket": "not-read"}))
    assert Settings() == Settings.model_validate({})
    assert Settings().storage.bucket == "poolq"


def test_a_tenants_waiting_share_of_the_lane_must_leave_slots_to_others():
    from poolq.jobs.settings import Settings

    with pytest.raises(ValidationError, match=r"embeddings_max_waiting_per_tenant \(4\) must be below embeddings_max_wait"):
        Settings(embeddings_max_waiting=4, embeddings_max_waiting_per_tenant=4)
    assert Settings(embeddings_max_waiting=4, embeddings_max_waiting_per_tenant=3).lane.waiting_per_tenant == 3
    assert Settings(embeddings_max_waiting=4).lane.waiting_per_tenant == 2
