"""The local stack's state: its file holds its admin key and S3 secret (its owner alone reads it);
the environment it gives its services."""
import stat
from dataclasses import fields

from poolq.devtools.devstack.stack_state import StackState


def _state() -> StackState:
    values = {field.name: f"x-{field.name}" for field in fields(StackState)}
    return StackState(**{**values, "ports": {}, "pids": {}})


def test_the_state_file_and_its_folder_are_private(tmp_path):
    path = tmp_path / "state" / "stack.json"
    _state().save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_saving_again_over_a_readable_file_makes_it_private(tmp_path):
    path = tmp_path / "stack.json"
    path.write_text("{}")
    path.chmod(0o644)
    (tmp_path / "stack.tmp").write_text("{}")
    (tmp_path / "stack.tmp").chmod(0o644)
    _state().save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert StackState.load(path) == _state()


def test_a_state_gets_its_secrets_once_and_its_redis_url_carries_the_password():
    state = StackState(state_dir="d", api_url="", s3_endpoint="", bucket="b", redis_url="", access_key_id="k",
                       secret_access_key="s", ports={"redis": 6390})
    assert state.ensure_secrets() == ["redis_password", "key_signing_secret", "flower_password"]
    assert len({state.redis_password, state.key_signing_secret, state.flower_password}) == 3
    assert state.redis_url == f"redis://:{state.redis_password}@127.0.0.1:6390/0"
    assert state.redis_address == "redis://127.0.0.1:6390/0"  # what may be printed
    assert state.ensure_secrets() == []  # kept: the running services use them
    assert state.env()["POOLQ_KEY_SIGNING_SECRET"] == state.key_signing_secret
    assert "POOLQ_FLOWER_BASIC_AUTH" not in state.env()  # the API and workers have no use for it
    assert "POOLQ_KEY_SIGNING_SECRET" not in state.worker_env()  # only the API checks keys
    assert state.cli_env()["POOLQ_FLOWER_BASIC_AUTH"] == f"poolq:{state.flower_password}"


def test_the_stack_leaves_the_tokenizers_threads_as_a_deployment_does():
    # A deployment (compose, k8s, `poolq worker`) leaves TOKENIZERS_PARALLELISM unset, so a worker's
    # tokenizer spreads each batch over the cores; a dev stack forcing it off would tokenize on one
    assert "TOKENIZERS_PARALLELISM" not in _state().env() and "TOKENIZERS_PARALLELISM" not in _state().worker_env()
