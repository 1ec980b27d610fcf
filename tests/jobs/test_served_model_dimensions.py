"""``GET /v1/models``' ``dimensions`` is the size of the vectors a request naming none gets, as
sentence-transformers' ``get_embedding_dimension`` says: after a Dense module (its ``out_features``, not
the hidden size), cut to ``truncate_dim`` where one is saved (never above the Dense size); ``max_dimensions``
is the full size, the most a request's ``dimensions`` may name.

The model: a BERT of hidden size 32 with mean pooling, a Dense module to 16 and Normalize, saved by
sentence-transformers (support/hub_models.py), served by Hub id from an offline cache.
"""
from pathlib import Path

import pytest
from support.api_client import authed_client
from support.hub_cache import offline_hub, publish
from support.hub_models import ORG, Family, build_family

from poolq.jobs.settings import Settings
from poolq.worker.local_runner import local_context

DENSE = Family("bert-dense", "BertConfig", dict(max_position_embeddings=128), "mean", dense=(16,))


def _saved(scratch: Path, truncate_dim: int | None) -> Path:
    """The Dense model as sentence-transformers saves it, with ``truncate_dim`` if given."""
    from sentence_transformers import SentenceTransformer

    saved = build_family(DENSE, scratch)
    if truncate_dim is None:
        return saved
    again = scratch / "truncated"
    SentenceTransformer(str(saved), device="cpu", truncate_dim=truncate_dim).save(str(again), create_model_card=False)
    return again


@pytest.mark.parametrize("truncate_dim", [None, 10, 24])  # none, below the Dense size, above it
def test_dimensions_are_sentence_transformers_embedding_dimension(tmp_path, monkeypatch, truncate_dim):
    from sentence_transformers import SentenceTransformer

    saved = _saved(tmp_path / "model", truncate_dim)
    repo = f"{ORG}/bert-dense"
    publish(offline_hub(monkeypatch, tmp_path / "hf"), repo, saved)
    client = authed_client(local_context(tmp_path / "store", Settings(models_allow=f"{ORG}/*")))
    response = client.get("/v1/models")
    assert response.status_code == 200, response.text
    listed = {model["id"]: model for model in response.json()["data"]}[repo]
    expected = SentenceTransformer(str(saved), device="cpu").get_embedding_dimension()
    assert expected == min(16, truncate_dim or 16)  # the reference itself: the Dense size, cut
    assert listed["dimensions"] == expected, listed  # not the hidden size (32)
    assert (listed["max_dimensions"], listed["truncate_dim"]) == (16, truncate_dim)
