"""support/hub_models.py's models sit in the Hub cache where huggingface_hub finds them offline: refs,
snapshots, a second commit moving main, a tag; and the repositories poolq must refuse are as described."""
import json

import pytest
from support.hub_models import FAMILIES, publish_bin_only, publish_family, publish_remote_code, snapshot_dir

REPO = FAMILIES["bert-e5"].repo_id


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf-home")
    first = publish_family(home, "bert-e5", tags=("v1",))
    second = publish_family(home, "bert-e5", seed=1)
    return home, first, second


def test_huggingface_hub_finds_the_snapshots_offline(hub, monkeypatch):
    from huggingface_hub import hf_hub_download, snapshot_download

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    home, first, second = hub
    cache = home / "hub"
    assert first != second and len(first) == len(second) == 40 and int(first, 16) >= 0
    # main moved to the second commit; the tag stays on the first; a commit names itself
    assert snapshot_download(REPO, cache_dir=cache, local_files_only=True) == str(snapshot_dir(home, REPO))
    assert snapshot_dir(home, REPO).name == second
    assert snapshot_download(REPO, revision="v1", cache_dir=cache, local_files_only=True).endswith(first)
    assert snapshot_download(REPO, revision=first, cache_dir=cache, local_files_only=True).endswith(first)
    modules = hf_hub_download(REPO, "modules.json", cache_dir=cache, local_files_only=True)
    assert [module["type"].rpartition(".")[2] for module in json.loads(open(modules).read())] == [
        "Transformer", "Pooling", "Normalize"]
    # the two commits hold different weights
    first_weights = (snapshot_dir(home, REPO, "v1") / "model.safetensors").read_bytes()
    assert first_weights != (snapshot_dir(home, REPO) / "model.safetensors").read_bytes()


def test_the_files_are_sentence_transformers_own(hub):
    home, _, _ = hub
    saved = json.loads((snapshot_dir(home, REPO) / "config_sentence_transformers.json").read_text())
    assert saved["prompts"] == {"query": "query: ", "passage": "passage: ", "document": ""}
    assert saved["__version__"]["sentence_transformers"].startswith("6.")
    pooling = json.loads((snapshot_dir(home, REPO) / "1_Pooling" / "config.json").read_text())
    assert (pooling["pooling_mode"], pooling["include_prompt"]) == ("mean", True)


def test_repositories_to_refuse(tmp_path):
    bin_commit = publish_bin_only(tmp_path)
    code_commit = publish_remote_code(tmp_path)
    pickled = snapshot_dir(tmp_path, "test-org/bert-pickled")
    assert pickled.name == bin_commit and (pickled / "pytorch_model.bin").is_file()
    assert not list(pickled.rglob("*.safetensors"))
    custom = snapshot_dir(tmp_path, "test-org/bert-custom-code")
    assert custom.name == code_commit and (custom / "modeling_custom.py").is_file()
    assert json.loads((custom / "config.json").read_text())["auto_map"]["AutoModel"] == "modeling_custom.CustomModel"
