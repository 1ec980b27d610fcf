"""A Hub model's card comes with its description: ``poolq models pull`` (pin, then the weights) fetches
``README.md`` into the snapshot beside the description files, so ``GET /v1/models`` lists the Matryoshka
sizes it declares, served offline as a pulled fleet is. A card is best effort: a repository without one,
a card over the size bound, or a cache pulled before cards were fetched (its file listing naming a card
its snapshot lacks) still serves the model, offline, with no error.

The Hub: support/fake_hub.py on 127.0.0.1; the model: ``tiny_st_bert`` saved with ``truncate_dim=12``,
its card declaring a MatryoshkaLoss over 32, 16 and 8 (support/matryoshka_model.py).
"""
import shutil

import pytest
from support.api_client import authed_client
from support.fake_hub import FakeHub
from support.hub_cache import hf_hub_repo, offline_hub
from support.matryoshka_model import matryoshka_st_bert

from poolq.engine.loading import hub, hub_card
from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context

REPO = "test-org/tiny-matryoshka"


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """The repository's files as the Hub holds them: the model and its card (read only: a test changing
    them copies them)."""
    saved = matryoshka_st_bert(tmp_path_factory.mktemp("model"), seed=5, truncate_dim=12, card_dims=(32, 16, 8))
    assert (saved / "README.md").is_file()
    return saved


@pytest.fixture(autouse=True)
def fresh_process():
    """Each test a new process would be: description checks are remembered per process and commit."""
    hub._checked_description.cache_clear()
    yield
    hub._checked_description.cache_clear()


def _pull(fake: FakeHub, monkeypatch) -> str:
    """What ``poolq models pull`` does, online against ``fake``: pin the revision, fetch the weights."""
    with fake.online(monkeypatch):
        name = hub.parse_hub_name(REPO)
        assert name is not None
        commit = hub.pin(name)
        hub.weights_dir(name.repo_id, commit)
    return commit


def _listed(tmp_path) -> dict | None:
    """``REPO`` as ``GET /v1/models`` lists it, offline (None: not listed)."""
    client = authed_client(local_context(tmp_path / "store", Settings(models_allow="test-org/*")))
    response = client.get("/v1/models")
    assert response.status_code == 200, response.text
    return {model["id"]: model for model in response.json()["data"]}.get(REPO)


def test_a_pulled_models_card_lists_its_sizes(tmp_path, monkeypatch, remote):
    hf_home = offline_hub(monkeypatch, tmp_path / "hf")
    with FakeHub({REPO: remote}) as fake:
        commit = _pull(fake, monkeypatch)
    assert fake.fetched("README.md")
    assert (hf_hub_repo(hf_home, REPO) / "snapshots" / commit / "README.md").is_file()
    hub._checked_description.cache_clear()  # served by another process, offline
    listed = _listed(tmp_path)
    assert listed is not None and listed["matryoshka_dimensions"] == [32, 16, 12, 8], listed


def test_a_cache_pulled_before_cards_still_serves_the_model_offline(tmp_path, monkeypatch, remote):
    hf_home = offline_hub(monkeypatch, tmp_path / "hf")
    with FakeHub({REPO: remote}) as fake:
        commit = _pull(fake, monkeypatch)
    # as an earlier poolq left it: the commit's file listing (cached by the download) names a card, the snapshot has none
    (hf_hub_repo(hf_home, REPO) / "snapshots" / commit / "README.md").unlink()
    hub._checked_description.cache_clear()
    listed = _listed(tmp_path)
    assert listed is not None and listed["matryoshka_dimensions"] == [12], listed  # its truncate_dim, no card


@pytest.mark.parametrize("why", ["no card", "a card over the bound"])
def test_a_model_without_a_card_it_may_fetch_is_pulled_and_listed(tmp_path, monkeypatch, remote, why):
    offline_hub(monkeypatch, tmp_path / "hf")
    if why == "no card":
        files = shutil.copytree(remote, tmp_path / "no-card")
        (files / "README.md").unlink()
    else:
        files = remote
        monkeypatch.setattr(hub_card, "MAX_FETCHED_CARD_BYTES", (remote / "README.md").stat().st_size - 1)
    with FakeHub({REPO: files}) as fake:
        _pull(fake, monkeypatch)
    assert not fake.fetched("README.md")
    hub._checked_description.cache_clear()
    listed = _listed(tmp_path)
    assert listed is not None and listed["matryoshka_dimensions"] == [12], listed
