"""Each encoder family's sequence classifier equals transformers' own ``*ForSequenceClassification`` forward:
the families with an adapter of their own (DeBERTa v1/v2/v3, ALBERT, DistilBERT) and a common layout beside
them (ELECTRA, a RoBERTa-style head). Tiny random-weight models (fp32, CPU), a few texts batched with padding
against transformers one text at a time."""
import numpy as np
import pytest
import torch

from poolq.engine import ModelSpecError, PoolingEngine
from poolq.engine.pooling.heads.classifier_families import family_classifier

TEXTS = ["a short one", "The quick brown fox jumps over the lazy dog near the river bank.", "x"]
NUM_LABELS = 3
# MiniLM's vocabulary (the saved tokenizer); initializer_range 0.2: logits O(1), not ~0
TINY = dict(vocab_size=30522, num_attention_heads=4, intermediate_size=64, max_position_embeddings=128,
            pad_token_id=0, num_labels=NUM_LABELS, initializer_range=0.2)
DISTILBERT = dict(vocab_size=30522, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=128,
                  pad_token_id=0, num_labels=NUM_LABELS, initializer_range=0.2)
# family -> (config class, its keyword arguments)
FAMILIES = {
    "DebertaV2": ("DebertaV2Config", dict(hidden_size=32, num_hidden_layers=2, **TINY)),
    "Deberta": ("DebertaConfig", dict(hidden_size=32, num_hidden_layers=2, **TINY)),
    "Albert": ("AlbertConfig", dict(hidden_size=32, embedding_size=16, num_hidden_layers=2, **TINY)),
    "DistilBert": ("DistilBertConfig", DISTILBERT),
    "Electra": ("ElectraConfig", dict(hidden_size=32, embedding_size=16, num_hidden_layers=2, **TINY)),
}


def _config(family):
    import transformers

    config_class, values = FAMILIES[family]
    return getattr(transformers, config_class)(**values)


def _model_class(family):
    import transformers

    return getattr(transformers, f"{family}ForSequenceClassification")


def _hf_logits(engine, hf, texts):
    """transformers' own logits, one text at a time (no padding question for the reference)."""
    with torch.inference_mode():
        return np.stack([hf(**engine.tokenizer._tokenizer([text], return_tensors="pt")).logits[0].numpy()
                         for text in texts])


@pytest.mark.parametrize("family", FAMILIES)
def test_classifier_equals_transformers(model_factory, family):
    path, hf = model_factory(f"classifier-{family.lower()}", _model_class(family), _config(family))
    engine = PoolingEngine.from_pretrained(str(path), dtype="float32")
    got = engine.classify(TEXTS, activation=False)
    assert got.shape == (len(TEXTS), NUM_LABELS)  # one row of labels per text (ALBERT gave [n, 1, labels])
    np.testing.assert_allclose(got, _hf_logits(engine, hf, TEXTS), atol=1e-4)


def test_a_family_model_without_its_head_layer_is_a_spec_error_naming_it():
    torch.manual_seed(0)
    model = _model_class("DistilBert")(_config("DistilBert")).eval()
    del model.pre_classifier
    with pytest.raises(ModelSpecError, match="DistilBertForSequenceClassification has no pre_classifier layer"):
        family_classifier(model)
