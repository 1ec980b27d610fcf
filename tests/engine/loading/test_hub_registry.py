"""Models named by Hub id (``org/name[@revision]``), resolved offline from a Hub cache under a temporary
``HF_HOME`` exactly as a user's would be: the operator's allow-list, pinning to a commit, revisions,
refusals (pickled weights, custom code), and a name checked as a name before any file is touched."""
import json

import numpy as np
import pytest
from support.hub_cache import offline_hub, publish, tiny_st_bert

from poolq.engine import PoolingEngine
from poolq.engine.loading.hub import HubAccess, HubModelRefused, ModelNameError
from poolq.engine.loading.registry import ModelRegistry, UnknownModelError

REPO = "test-org/tiny-bert"
TEXTS = ["a first document about rivers", "the second one, about mountains", "third"]


@pytest.fixture
def hub_home(tmp_path, monkeypatch):
    """An offline Hub cache holding two commits of REPO (main: the second; tag v1: the first)."""
    home = offline_hub(monkeypatch, tmp_path / "hf")
    first = publish(home, REPO, tiny_st_bert(tmp_path / "v1", seed=1), tags=("v1",))
    second = publish(home, REPO, tiny_st_bert(tmp_path / "v2", seed=2))
    return home, first, second


def _registry(allow="test-org/*", local_paths=False):
    return ModelRegistry.with_packaged_models(hub_access=HubAccess.parse(allow), local_paths=local_paths)


def test_a_hub_id_is_pinned_to_the_commit_its_revision_names(hub_home):
    _, first, second = hub_home
    registry = _registry()
    assert registry.canonical(REPO) == f"{REPO}@{second}"
    assert registry.canonical(f"{REPO}@v1") == f"{REPO}@{first}"
    assert registry.canonical(f"{REPO}@{first}") == f"{REPO}@{first}"
    assert registry.resolve(f"{REPO}@{first}").name == first
    assert registry.fingerprint(f"{REPO}@v1") == f"hf:{REPO}@{first}"
    assert registry.spec(REPO).hidden_size == 32


def test_a_pinned_name_computes_with_its_own_snapshot(hub_home):
    _, first, _ = hub_home
    registry = _registry()
    pinned = PoolingEngine.from_pretrained(f"{REPO}@{first}", dtype="float32", registry=registry).embed(TEXTS)
    latest = PoolingEngine.from_pretrained(REPO, dtype="float32", registry=registry).embed(TEXTS)
    direct = PoolingEngine.from_pretrained(registry.resolve(f"{REPO}@v1"), dtype="float32").embed(TEXTS)
    np.testing.assert_allclose(pinned, direct, atol=1e-6)
    assert not np.allclose(pinned, latest, atol=1e-3)  # the second commit has other weights


def test_an_id_outside_the_allow_list_is_refused_naming_it(hub_home):
    for allow in ("", "other-org/*", "test-org/tiny-bert-*"):
        with pytest.raises(HubModelRefused, match=REPO):
            _registry(allow).canonical(REPO)
    with pytest.raises(HubModelRefused, match="POOLQ_MODELS_ALLOW is empty"):
        _registry("").spec(REPO)


def test_an_id_missing_from_an_offline_cache_says_so(hub_home):
    with pytest.raises(HubModelRefused, match="not in this host's Hub cache.*poolq models pull"):
        _registry().canonical("test-org/not-there")
    with pytest.raises(HubModelRefused, match="not in this host's Hub cache"):
        _registry().canonical(f"{REPO}@no-such-tag")


def test_pickled_weights_and_custom_code_are_refused(hub_home, tmp_path):
    home, _, _ = hub_home
    pickled = tiny_st_bert(tmp_path / "pickled", seed=3)
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    publish(home, "test-org/pickled", pickled)
    with pytest.raises(HubModelRefused, match=r"test-org/pickled.*only pickled weights \(pytorch_model.bin\); poolq loads "
                                              "safetensors weights only"):
        _registry().spec("test-org/pickled")
    remote = tiny_st_bert(tmp_path / "remote", seed=4)
    config = json.loads((remote / "config.json").read_text())
    (remote / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": "modeling.MyModel"}}))
    publish(home, "test-org/remote", remote)
    with pytest.raises(HubModelRefused, match="test-org/remote.*trust_remote_code"):
        _registry().spec("test-org/remote")
    custom = tiny_st_bert(tmp_path / "custom", seed=5)
    modules = json.loads((custom / "modules.json").read_text()) + [{"idx": 3, "name": "3", "path": "3", "type": "my.Module"}]
    (custom / "modules.json").write_text(json.dumps(modules))
    publish(home, "test-org/custom", custom)
    with pytest.raises(HubModelRefused, match=r"my\.Module"):
        _registry().spec("test-org/custom")


@pytest.mark.parametrize("name", ["x" * 1000, "a/" + "b" * 600, "bad\x00name", ""])
def test_a_name_is_checked_as_a_name_before_any_file_is_touched(hub_home, name, monkeypatch):
    touched = []
    monkeypatch.setattr("pathlib.Path.is_dir", lambda self: touched.append(self) or False)
    with pytest.raises(ModelNameError):
        _registry(local_paths=True).canonical(name)
    assert touched == []


def test_a_local_directory_is_a_model_only_where_local_paths_are_allowed(tmp_path):
    model_dir = tiny_st_bert(tmp_path / "local", seed=6)
    assert _registry(local_paths=True).canonical(str(model_dir)) == str(model_dir)
    with pytest.raises(UnknownModelError, match="unknown model"):
        _registry(local_paths=False).canonical(str(model_dir))


def test_the_engines_own_api_takes_any_hub_id(hub_home):
    _, first, _ = hub_home
    by_id = PoolingEngine.from_pretrained(f"{REPO}@v1", dtype="float32").embed(TEXTS)
    direct = PoolingEngine.from_pretrained(_registry().resolve(f"{REPO}@{first}"), dtype="float32").embed(TEXTS)
    np.testing.assert_allclose(by_id, direct, atol=1e-6)
