"""MPNet loads, padded and packed: transformers has no sdpa attention for MPNet and refuses to load it when
asked for sdpa, so the loader asks for eager where the class has no sdpa (engine/loading/model_loader.py)."""
import numpy as np
import pytest
from support.random_models import family_class, save_random_model, tiny_family_config, write_st_modules

from poolq.engine import EngineConfig, PoolingEngine
from poolq.engine.runners.packed_runner import PackedRunner
from poolq.engine.runners.runner import ModelRunner

TEXTS = ["a fox in the snow", "Interest rates rose again this quarter.", "compile the kernel with make",
         "she played the cello every evening", "the river bank at dawn, with the old oak tree"]


@pytest.fixture(scope="module")
def mpnet_dir(tmp_path_factory):
    """A random MPNet in sentence-transformers' layout: Transformer, mean Pooling, Normalize."""
    path = tmp_path_factory.mktemp("mpnet-st")
    config = tiny_family_config("mpnet")
    save_random_model(path, family_class("mpnet", "Model"), config)
    write_st_modules(path, config.hidden_size, pooling="mean")
    return path


def _centred_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Random weights make every raw embedding nearly parallel (cosine ~1 whatever the text): subtract the
    # batch mean first, so what is compared is what tells the texts apart.
    mean = b.mean(axis=0, keepdims=True)
    a, b = a - mean, b - mean
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("packed, runner_class", [(False, ModelRunner), (True, PackedRunner)])
def test_mpnet_loads_and_embeds_as_sentence_transformers_does(mpnet_dir, packed, runner_class):
    from sentence_transformers import SentenceTransformer

    engine = PoolingEngine.from_pretrained(str(mpnet_dir), config=EngineConfig(packed=packed), dtype="float32")
    assert isinstance(engine.runner, runner_class)
    ours = engine.embed(TEXTS)
    reference = SentenceTransformer(str(mpnet_dir), device="cpu").encode(TEXTS)
    assert _centred_cosines(ours, reference).min() >= 0.9999
    assert _centred_cosines(np.roll(reference, 1, axis=0), reference).max() < 0.9  # the gate tells texts apart
