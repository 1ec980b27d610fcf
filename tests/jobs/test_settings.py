import pytest
from pydantic import ValidationError

from poolq.jobs.settings import Settings
from poolq.worker.celery_app import create_celery_app


def test_celery_is_configured_for_long_idempotent_gpu_tasks():
    conf = create_celery_app(Settings(redis_url="redis://127.0.0.1:1/0")).conf
    assert conf.task_serializer == "json" and conf.accept_content == ["json"]
    assert conf.task_acks_late is True and conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_soft_time_limit < conf.task_time_limit < conf.broker_transport_options["visibility_timeout"] / 2
    assert conf.visibility_timeout == conf.broker_transport_options["visibility_timeout"]


def test_timeouts_out_of_order_are_refused_with_the_rule():
    with pytest.raises(ValidationError, match="task_soft_time_limit_s < task_time_limit_s < visibility_timeout_s / 2"):
        Settings(task_soft_time_limit_s=100, task_time_limit_s=2000, visibility_timeout_s=3600)


def test_settings_come_from_poolq_environment(monkeypatch):
    monkeypatch.setenv("POOLQ_BUCKET", "corpus-out")
    monkeypatch.setenv("POOLQ_SHARD_MAX_DOCUMENTS", "17")
    settings = Settings()
    assert settings.storage.bucket == "corpus-out" and settings.sharding.shard_max_documents == 17



@pytest.mark.parametrize("variable", ["POOLQ_COMPUTE_DTYPE", "POOLQ_DTYPE"])
def test_the_compute_dtype_is_read_under_either_name(monkeypatch, variable):
    monkeypatch.delenv("POOLQ_COMPUTE_DTYPE", raising=False)  # the suite's float32 pin (tests/conftest.py)
    monkeypatch.setenv(variable, "int8")
    settings = Settings()
    assert settings.serving.dtype == "int8" and settings.serving.engine_config().dtype == "int8"
    assert Settings(dtype="bfloat16").serving.compute_dtype == "bfloat16"  # and given directly, by its field name


def test_an_engine_step_is_about_a_second_of_work_on_the_device_unless_set():
    assert Settings(device="cpu").serving.engine_config().max_num_batched_tokens == 2048
    assert Settings(device="cuda").serving.engine_config().max_num_batched_tokens == 8192
    assert Settings(device="cpu", max_num_batched_tokens=4096).serving.engine_config().max_num_batched_tokens == 4096
