"""Tiny random-weight models built from configs (mechanics only; real models prove parity)."""
import pytest
from support.random_models import save_random_model, tiny_bert_config


@pytest.fixture(scope="session")
def model_factory(tmp_path_factory):
    def make(name, model_class, config):
        path = tmp_path_factory.mktemp(name)
        return path, save_random_model(path, model_class, config)

    return make


@pytest.fixture(scope="session")
def bert_config():
    """Factory for tiny BERT configs that share MiniLM's vocabulary."""
    return tiny_bert_config
